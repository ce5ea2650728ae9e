// Compare (sections 23, 42): two runs side by side, /v1/runs/compare, with
// what differs marked (changed inputs highlighted, metric verdicts colored,
// the conclusion), their loss and step time overlaid on shared step axes, and,
// where both runs are versions of one model, the model comparison of the
// evaluation routes (/v1/models/MODEL/compare).
import { api, el, fmt, link, timeSeries, runHref, hashOf, statusBadge, errorBox, num } from '../app.js';
import { useViewsStyle } from './views-style.js';

// (a function: app.js imports this module before its own exports exist)
const metrics = () => [
  ['loss', 'loss (last 10)', (v) => fmt.num(v)],
  ['valLoss', 'validation loss', (v) => fmt.num(v)],
  ['tokensPerSecond', 'tokens/s (mean)', (v) => fmt.si(v)],
  ['mfu', 'MFU (mean)', (v) => fmt.pct(v)],
  ['stepTimeMs', 'step time (median)', fmt.ms],
  ['learningRate', 'learning rate (peak)', (v) => fmt.num(v)],
];

function value(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v); // inputs as the run gave them (0.0003, not 3.000e-4)
}

function picker(runs, left, right) {
  const list = el('datalist', { id: 'compare-runs' }, runs.map((r) => el('option', { value: r.runId }, `${r.runId} · ${r.modelId || ''} ${r.modelVersion || ''} · ${r.status}`)));
  const form = el(
    'form',
    { class: 'inline-form', 'data-testid': 'compare-form' },
    el('label', { for: 'compare-left' }, 'Left run '),
    el('input', { id: 'compare-left', name: 'left', list: 'compare-runs', value: left || '', size: 28, required: true }),
    ' ',
    el('label', { for: 'compare-right' }, 'Right run '),
    el('input', { id: 'compare-right', name: 'right', list: 'compare-runs', value: right || '', size: 28, required: true }),
    ' ',
    el('button', { type: 'submit' }, 'Compare'),
    list,
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const l = form.elements.left.value.trim();
    const r = form.elements.right.value.trim();
    if (l && r) location.hash = hashOf('#/compare', { left: l, right: r });
  });
  return form;
}

function runsHeader(c) {
  const col = (r) =>
    el(
      'div',
      { class: 'compare-run' },
      el('h3', {}, link(runHref(r.runId), r.runId), ' ', statusBadge(r.status)),
      el('p', { class: 'muted' }, `${fmt.text(r.modelId)} ${fmt.text(r.modelVersion)} · experiment ${fmt.text(r.experimentId)} · ${fmt.int(r.worldSize)} ranks · step ${fmt.int(r.step)}`),
    );
  return el('div', { class: 'compare-runs' }, col(c.left), col(c.right));
}

function inputsTable(c) {
  const rows = [];
  const add = (key, label, d) => rows.push({ ...d, key, label });
  add('dataset', 'dataset version', c.dataset);
  add('codeCommit', 'code commit', c.codeCommit);
  add('model', 'model', c.model);
  add('worldSize', 'world size', c.worldSize);
  for (const k of c.config || []) add(`config.${k.key}`, k.key, k);
  rows.sort((a, b) => Number(Boolean(b.changed)) - Number(Boolean(a.changed)));
  const changed = rows.filter((r) => r.changed).length;
  return el(
    'section',
    {},
    el('h2', {}, 'Inputs ', el('span', { class: 'muted' }, `(${changed} changed of ${rows.length})`)),
    el(
      'div',
      { class: 'table-wrap' },
      el(
        'table',
        { class: 'compare-table', 'data-testid': 'compare-inputs' },
        el('thead', {}, el('tr', {}, ['input', 'left', 'right', ''].map((h) => el('th', { scope: 'col' }, h)))),
        el(
          'tbody',
          {},
          rows.map((r) =>
            el(
              'tr',
              { class: r.changed ? 'changed' : '', 'data-testid': r.changed ? `changed-${r.key}` : `same-${r.key}` },
              el('th', { scope: 'row' }, r.key.startsWith('config.') ? el('span', {}, el('span', { class: 'muted' }, 'config '), r.label) : r.label),
              el('td', {}, value(r.left)),
              el('td', {}, value(r.right)),
              el('td', {}, r.changed ? el('strong', { class: 'changed-mark' }, 'changed') : 'same'),
            ),
          ),
        ),
      ),
    ),
  );
}

function metricsTable(c) {
  const m = c.metrics || {};
  return el(
    'section',
    {},
    el('h2', {}, 'Outcomes'),
    el(
      'div',
      { class: 'table-wrap' },
      el(
        'table',
        { class: 'compare-table', 'data-testid': 'compare-metrics' },
        el('thead', {}, el('tr', {}, ['metric', 'left', 'right', 'Δ', 'Δ %', 'verdict'].map((h) => el('th', { scope: 'col' }, h)))),
        el(
          'tbody',
          {},
          metrics().filter(([k]) => m[k]).map(([k, label, f]) => {
            const x = m[k];
            const rel = num(x.relativeDelta);
            return el(
              'tr',
              { 'data-testid': `metric-${k}`, class: x.changed ? 'changed' : '' },
              el('th', { scope: 'row' }, label),
              el('td', { class: 'num' }, f(x.left)),
              el('td', { class: 'num' }, f(x.right)),
              el('td', { class: 'num' }, fmt.num(x.delta, 3)),
              el('td', { class: 'num' }, rel === null ? '—' : `${rel > 0 ? '+' : ''}${(rel * 100).toFixed(1)} %`),
              el('td', {}, el('span', { class: `verdict verdict-${x.verdict || 'unknown'}`, 'data-testid': `verdict-${k}` }, x.verdict || 'unknown')),
            );
          }),
        ),
      ),
    ),
    el(
      'p',
      { 'data-testid': 'compare-alerts' },
      `Alerts: ${fmt.int(c.alerts && c.alerts.left)} left, ${fmt.int(c.alerts && c.alerts.right)} right. `,
      `Learning-rate changes: ${((c.lrChanges && c.lrChanges.left) || []).length} left, ${((c.lrChanges && c.lrChanges.right) || []).length} right`,
      ...['left', 'right'].flatMap((side) => ((c.lrChanges && c.lrChanges[side]) || []).map((e) => ` · ${side} step ${e.step}: ${e.summary}`)),
    ),
  );
}

function evaluationsTable(list, caption) {
  if (!list || !list.length) return null;
  return el(
    'div',
    { class: 'table-wrap' },
    el(
      'table',
      { class: 'compare-table', 'data-testid': 'compare-evaluations' },
      el('caption', {}, caption),
      el('thead', {}, el('tr', {}, ['benchmark', 'metric', 'left', 'right', 'Δ', 'verdict'].map((h) => el('th', { scope: 'col' }, h)))),
      el(
        'tbody',
        {},
        list.flatMap((b) =>
          (b.metrics || []).map((m) =>
            el(
              'tr',
              { class: m.verdict && m.verdict !== 'same' && m.verdict !== 'no_change' ? 'changed' : '' },
              el('th', { scope: 'row' }, fmt.text(b.benchmark)),
              el('td', {}, fmt.text(m.metric || m.name)),
              el('td', { class: 'num' }, fmt.num(m.left ?? m.baseline)),
              el('td', { class: 'num' }, fmt.num(m.right ?? m.candidate)),
              el('td', { class: 'num' }, fmt.num(m.delta, 3)),
              el('td', {}, el('span', { class: `verdict verdict-${m.verdict || 'unknown'}` }, fmt.text(m.verdict))),
            ),
          ),
        ),
      ),
    ),
  );
}

async function steps(runId) {
  return (await api(`/v1/runs/${encodeURIComponent(runId)}/steps?maxPoints=1000`)).steps || [];
}

// Both runs' series on one step axis (union of their steps, gaps as null).
function overlay(left, right, key) {
  const xs = [...new Set([...left.map((s) => s.step), ...right.map((s) => s.step)])].sort((a, b) => a - b);
  const lm = new Map(left.map((s) => [s.step, s[key]]));
  const rm = new Map(right.map((s) => [s.step, s[key]]));
  return { x: xs, l: xs.map((s) => (lm.has(s) ? lm.get(s) : null)), r: xs.map((s) => (rm.has(s) ? rm.get(s) : null)) };
}

async function modelSection(c) {
  const l = c.left;
  const r = c.right;
  if (!l.modelId || l.modelId !== r.modelId || !l.modelVersion || !r.modelVersion || l.modelVersion === r.modelVersion) return null;
  const box = el('section', { 'data-testid': 'compare-models' }, el('h2', {}, `Model versions: ${l.modelId} ${l.modelVersion} vs ${r.modelVersion}`));
  // Only versions with evaluations can be compared (else the route answers 409).
  const evaluated = async (v) => ((await api(`/v1/evaluations?modelVersion=${encodeURIComponent(`${l.modelId}:${v}`)}`)).evaluations || []).length > 0;
  const [le, re] = await Promise.all([evaluated(l.modelVersion), evaluated(r.modelVersion)]);
  if (!le || !re) {
    box.append(el('p', { class: 'muted', 'data-testid': 'compare-models-none' }, `No evaluation of ${!le ? l.modelVersion : r.modelVersion} yet: the model comparison needs both versions evaluated (runlens eval submit).`));
    return box;
  }
  try {
    const m = await api(`/v1/models/${encodeURIComponent(l.modelId)}/compare?left=${encodeURIComponent(l.modelVersion)}&right=${encodeURIComponent(r.modelVersion)}`);
    box.append(evaluationsTable(m.benchmarks || m.comparisons || [], 'Evaluations of the two model versions') || el('p', {}, 'No benchmark evaluated on both versions.'));
    if (m.conclusion) box.append(el('ul', {}, (Array.isArray(m.conclusion) ? m.conclusion : [m.conclusion]).map((t) => el('li', {}, t))));
  } catch (e) {
    box.append(el('p', { class: 'muted' }, `No model comparison: ${e.message}`));
  }
  return box;
}

export default {
  id: 'compare',
  title: 'Compare',
  scope: 'global',
  route: /^#\/compare$/,
  async render(root, params, query) {
    useViewsStyle();
    const left = query.get('left');
    const right = query.get('right');
    const runs = (await api('/v1/runs?limit=1000')).runs || [];
    root.append(el('h1', {}, 'Compare runs'), picker(runs, left, right));
    if (!left || !right) {
      root.append(el('p', {}, 'Pick two runs: inputs that changed are highlighted, outcomes get a verdict, and their loss and step time are overlaid.'));
      return;
    }
    const c = await api(`/v1/runs/compare?left=${encodeURIComponent(left)}&right=${encodeURIComponent(right)}`);
    root.append(
      runsHeader(c),
      el('section', { class: 'conclusion' }, el('h2', {}, 'Conclusion'), el('ul', { 'data-testid': 'conclusion' }, (c.conclusion || []).map((t) => el('li', {}, t)))),
      el('p', { class: 'muted', 'data-testid': 'changed-keys' }, `Differences: ${(c.changedKeys || []).join(', ') || 'none'}`),
      inputsTable(c),
      metricsTable(c),
    );
    const evals = evaluationsTable(c.evaluations, 'Benchmarks evaluated on both runs’ checkpoints');
    if (evals) root.append(el('section', {}, el('h2', {}, 'Evaluations'), evals));
    const plots = el('section', { class: 'compare-plots' }, el('h2', {}, 'Over steps'));
    root.append(plots);
    try {
      const [ls, rs] = await Promise.all([steps(left), steps(right)]);
      const loss = overlay(ls, rs, 'loss');
      timeSeries(plots, { title: 'Loss', x: loss.x, series: [{ label: `${left} loss`, values: loss.l }, { label: `${right} loss`, values: loss.r }], sync: 'compare' });
      const st = overlay(ls, rs, 'stepMs');
      timeSeries(plots, { title: 'Step time (ms)', x: st.x, series: [{ label: `${left} step ms`, values: st.l }, { label: `${right} step ms`, values: st.r }], sync: 'compare' });
    } catch (e) {
      plots.append(errorBox(e));
    }
    const models = await modelSection(c);
    if (models) root.append(models);
  },
};
