// #/evaluations/ID: one evaluation (GET /v1/evaluations/ID): its status and
// progress, its provenance (model version, checkpoint, dataset, prompt,
// evaluator, judge, code, worker and libraries, as the API gives them), its
// metrics with a 95 % interval from their standard errors, its shards, its
// first 100 items (/items) and the scheduler's decisions (/why); links to the
// model version, the checkpoint's lineage and the run.
import { api, el, fmt, link, runHref, statusBadge } from '../app.js';
import { evaluationHref, interval, lineageHref, modelVersionHref, useEvalStyle } from './eval-common.js';

const ITEMS = 100;

function kv(rows) {
  return el(
    'table',
    { class: 'kv-table' },
    el(
      'tbody',
      {},
      rows.filter(Boolean).map(([label, value, testid]) => el('tr', {}, el('th', { scope: 'row' }, label), el('td', testid ? { 'data-testid': testid } : {}, value))),
    ),
  );
}

function section(id, heading, ...children) {
  return el('section', { 'aria-labelledby': `h-${id}`, 'data-testid': `evaluation-${id}` }, el('h2', { id: `h-${id}` }, heading), ...children);
}

function table(testid, headers, rows) {
  return el(
    'div',
    { class: 'table-wrap' },
    el('table', { 'data-testid': testid }, el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))), el('tbody', {}, rows)),
  );
}

const mono = (v) => (v === null || v === undefined || v === '' ? '—' : el('span', { class: 'mono' }, String(v)));

function objectText(o) {
  if (!o || typeof o !== 'object') return fmt.text(o);
  const entries = Object.entries(o);
  return entries.length ? entries.map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ') : '—';
}

export default {
  id: 'evaluation',
  title: 'Evaluation',
  scope: 'global',
  nav: false,
  route: /^#\/evaluations\/([^/?]+)$/,

  async render(root, [id]) {
    useEvalStyle();
    const path = `/v1/evaluations/${encodeURIComponent(id)}`;
    const [e, items, why] = await Promise.all([api(path), api(`${path}/items?limit=${ITEMS}`), api(`${path}/why`)]);

    root.append(
      el('h1', {}, 'Evaluation ', el('span', { 'data-testid': 'evaluation-id' }, e.evaluationId)),
      el(
        'p',
        {},
        statusBadge(e.status),
        ' ',
        `${fmt.text(e.benchmarkSuite)} (${fmt.text(e.benchmark)} ${e.benchmarkVersion || ''}) of `,
        e.modelVersion ? link(modelVersionHref(e.modelVersion), e.modelVersion, { 'data-testid': 'evaluation-model-version' }) : '—',
        e.cachedFrom ? [' · served from the cache of ', link(evaluationHref(e.cachedFrom), e.cachedFrom)] : null,
      ),
    );
    if (e.error) root.append(el('p', { class: 'error', role: 'alert', 'data-testid': 'evaluation-error' }, e.error));

    const p = e.progress || {};
    root.append(
      el(
        'div',
        { class: 'cards', 'data-testid': 'evaluation-progress' },
        ['total', 'completed', 'cached', 'running', 'queued', 'failed'].map((k) =>
          el('div', { class: 'card' }, el('div', { class: 'label' }, `shards ${k}`), el('div', { class: 'value' }, fmt.int(p[k]))),
        ),
      ),
    );

    const metrics = e.metrics || [];
    root.append(
      section(
        'metrics',
        'Metrics',
        metrics.length
          ? table(
              'evaluation-metrics',
              ['metric', 'value', 'n', 'std. error', '95 % interval (± 1.96 SE)'],
              metrics.map((m) =>
                el(
                  'tr',
                  { 'data-testid': `metric-${m.name}` },
                  el('th', { scope: 'row' }, m.name),
                  el('td', { 'data-testid': `metric-value-${m.name}`, 'data-value': String(m.value) }, fmt.num(m.value)),
                  el('td', {}, fmt.int(m.n)),
                  el('td', {}, fmt.num(m.stdError)),
                  el('td', {}, interval(m)),
                ),
              ),
            )
          : el('p', { class: 'empty' }, 'No metrics yet: no shard result is in.'),
        (e.missingShards || []).length ? el('p', { class: 'sev-warning' }, `Missing shards: ${e.missingShards.join(', ')}`) : null,
      ),
    );

    const j = e.judge;
    root.append(
      section(
        'provenance',
        'Provenance',
        kv([
          ['Model version', e.modelVersion ? link(modelVersionHref(e.modelVersion), e.modelVersion) : '—'],
          ['Checkpoint', e.checkpointId ? [link(lineageHref(e.checkpointId), e.checkpointId, { 'data-testid': 'checkpoint-lineage' }), ' ', mono(e.checkpointHash)] : '—'],
          ['Run', e.runId ? link(runHref(e.runId), e.runId, { 'data-testid': 'evaluation-run' }) : '—'],
          ['Dataset', [`${fmt.text(e.datasetId)} ${e.datasetVersion || ''} `, mono(e.datasetHash)]],
          ['Prompt template', [`${fmt.text(e.promptTemplateVersion)} `, mono(e.promptTemplateHash)]],
          ['Evaluator', fmt.text(e.evaluatorVersion)],
          ['Decoding', objectText(e.decoding)],
          ['Judge', e.usesJudge && j ? `${j.model} ${j.modelVersion}, prompt ${j.promptVersion}, rubric ${j.rubricVersion}` : 'none'],
          ['Code commit', mono(e.codeCommit)],
          ['Worker', fmt.text(e.workerVersion)],
          ['Libraries', objectText(e.libraryVersions), 'evaluation-libraries'],
          ['Cache key', mono(e.cacheKey)],
          ['Started', fmt.text(e.startedAt)],
          ['Completed', fmt.text(e.completedAt)],
        ]),
      ),
    );

    root.append(
      section(
        'shards',
        'Shards',
        (e.shards || []).length
          ? table(
              'evaluation-shards',
              ['shard', 'items', 'status', 'attempt', 'worker', 'result attempt'],
              e.shards.map((s) =>
                el(
                  'tr',
                  {},
                  el('td', {}, fmt.int(s.shard)),
                  el('td', {}, Array.isArray(s.items) ? `${s.items[0]} to ${s.items[1] - 1}` : fmt.text(s.items)),
                  el('td', {}, statusBadge(s.status)),
                  el('td', {}, fmt.int(s.attempt)),
                  el('td', {}, fmt.text(s.worker)),
                  el('td', {}, fmt.int(s.resultAttempt)),
                ),
              ),
            )
          : el('p', { class: 'empty' }, 'No shards.'),
      ),
    );

    const list = items.items || [];
    const scoreNames = [...new Set(list.flatMap((i) => Object.keys(i.scores || {})))];
    root.append(
      section(
        'items',
        'Items',
        el(
          'p',
          { class: 'muted' },
          `The first ${fmt.int(list.length)} items`,
          items.itemsOf && items.itemsOf !== e.evaluationId ? [' (stored under ', link(evaluationHref(items.itemsOf), items.itemsOf), ')'] : '',
          ' · ',
          link(`${path}/items?limit=${ITEMS}`, 'as JSON', { 'data-testid': 'items-json' }),
        ),
        list.length
          ? el(
              'details',
              { 'data-testid': 'evaluation-items' },
              el('summary', {}, `Items table (${list.length})`),
              table(
                'items-table',
                ['item', 'shard', 'attempt', ...scoreNames, 'latency', 'error'],
                list.map((i) =>
                  el(
                    'tr',
                    {},
                    el('td', {}, fmt.text(i.item)),
                    el('td', {}, fmt.int(i.shard)),
                    el('td', {}, fmt.int(i.attempt)),
                    scoreNames.map((n) => el('td', {}, fmt.num((i.scores || {})[n]))),
                    el('td', {}, fmt.ms(i.latencyMs)),
                    el('td', {}, fmt.text(i.error)),
                  ),
                ),
              ),
            )
          : el('p', { class: 'empty' }, 'No items stored.'),
      ),
    );

    const decisions = why.decisions || [];
    root.append(
      section(
        'why',
        'Decisions',
        why.note ? el('p', { class: 'muted' }, why.note) : null,
        decisions.length ? el('ol', { 'data-testid': 'why-decisions' }, decisions.map((d) => el('li', {}, d))) : el('p', { class: 'empty' }, 'No decisions recorded.'),
      ),
    );
  },
};
