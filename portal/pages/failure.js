// #/runs/ID/failure: the failure page of spec section 24, the content of
// `runlens report` (GET /v1/runs/ID/report): status and failure, training
// trend, infrastructure, likely cause with its evidence, related events and
// the recommendation.
import { api, el, fmt, hashOf, link, num, runHref, statusBadge } from '../app.js';

const CAUSE_TITLES = {
  config_change: 'Config change',
  hardware_throttle: 'Hardware throttle',
  data_corruption: 'Data corruption',
  host_bottleneck: 'Host bottleneck',
  unknown: 'Unknown',
};

function title(cause) {
  if (!cause) return 'Unknown';
  return CAUSE_TITLES[cause] || cause.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());
}

function section(id, heading, ...children) {
  return el('section', { 'aria-labelledby': `h-${id}`, 'data-testid': `report-${id}` }, el('h2', { id: `h-${id}` }, heading), ...children);
}

// A series of the trend as "1.58 → 4.77 → NaN" plus its table.
function trend(label, points) {
  const pts = points || [];
  const values = pts.map((p) => fmt.num(p.value, 3));
  const last = pts.length ? num(pts[pts.length - 1].value) : null;
  const firstV = pts.length ? num(pts[0].value) : null;
  const up = last !== null && firstV !== null && (!Number.isFinite(last) || last > firstV);
  return el(
    'tr',
    { 'data-series': label },
    el('th', { scope: 'row' }, label),
    el('td', { class: 'trend' }, values.length ? values.join(' → ') : '—', values.length > 1 ? el('span', { 'aria-label': up ? 'rising' : 'falling' }, up ? ' ↑' : ' ↓') : null),
  );
}

function list(items, render) {
  if (!items || !items.length) return 'none';
  return el('ul', { class: 'plain' }, items.map((i) => el('li', {}, render(i))));
}

function stepLink(runId, step) {
  if (step === null || step === undefined) return el('span', { class: 'step' }, '');
  return el('span', { class: 'step' }, link(hashOf(runHref(runId, 'timeline'), { from: Math.max(0, step - 5), to: step + 5 }), `step ${step}`));
}

function event(runId, e) {
  return [stepLink(runId, e.step), ' ', e.kind && e.kind !== 'signal' ? el('span', { class: 'kind' }, `${e.kind.replace(/_/g, ' ')}: `) : null, e.summary];
}

export default {
  id: 'failure',
  title: 'Failure',
  scope: 'run',
  route: /^#\/runs\/([^/?]+)\/failure$/,

  async render(root, [runId]) {
    const r = await api(`/v1/runs/${encodeURIComponent(runId)}/report`);
    root.append(el('h1', {}, `Failure report: ${r.runId}`));

    const f = r.failure;
    root.append(
      section(
        'status',
        'Status',
        el(
          'p',
          {},
          statusBadge(r.status),
          ' ',
          f ? el('strong', { class: f.critical ? 'sev-critical' : 'sev-warning', 'data-testid': 'failure-title' }, f.title) : el('span', { 'data-testid': 'failure-title' }, 'No failure: no alert in this run.'),
        ),
        f ? el('p', {}, f.summary) : null,
        el('p', { class: 'muted' }, [r.model && r.model.modelId, r.model && r.model.modelVersion, r.model && r.model.datasetVersion && `dataset ${r.model.datasetVersion}`, `${fmt.int(r.gpus)} GPUs (${fmt.int(r.nodes)} nodes)`].filter(Boolean).join(' · ')),
      ),
    );

    const t = r.training || {};
    root.append(
      section(
        'training',
        t.fromStep !== undefined && t.fromStep !== null ? `Training (steps ${t.fromStep} to ${t.toStep})` : 'Training',
        el('table', { class: 'kv-table' }, el('tbody', {}, trend('Loss', t.loss), trend('Gradient norm', t.gradNorm), trend('Learning rate', t.learningRate))),
      ),
    );

    const inf = r.infrastructure || {};
    const row = (label, v) => el('tr', {}, el('th', { scope: 'row' }, label), el('td', {}, v));
    root.append(
      section(
        'infrastructure',
        'Infrastructure',
        el(
          'table',
          { class: 'kv-table' },
          el(
            'tbody',
            {},
            row('GPU utilization', fmt.pct(inf.gpuUtil, 0)),
            row('MFU', fmt.pct(inf.mfu, 0)),
            row('GPU errors', list(inf.gpuErrors, (e) => event(runId, e))),
            row('NCCL errors', list(inf.ncclErrors, (e) => event(runId, e))),
            row('OOM', list(inf.oom, (e) => event(runId, e))),
            row('Stragglers', list(inf.stragglers, (e) => event(runId, e))),
            row('Missing ranks', list(inf.missingRanks, (e) => event(runId, e))),
          ),
        ),
      ),
    );

    const c = r.likelyCause;
    root.append(
      section(
        'cause',
        'Likely cause',
        c
          ? [
              el('p', { class: 'cause' }, el('strong', { 'data-testid': 'cause', 'data-cause': c.cause }, title(c.cause)), '. Owner: ', el('strong', { 'data-testid': 'owner' }, c.owner || 'unknown'), '.'),
              el('p', {}, c.summary),
              el('h3', {}, 'Evidence'),
              el('ul', { class: 'events', 'data-testid': 'evidence' }, (c.evidence || []).map((e) => el('li', { 'data-kind': e.kind }, event(runId, e)))),
            ]
          : el('p', { 'data-testid': 'cause' }, 'No likely cause: nothing went wrong that the rules could explain.'),
      ),
    );

    root.append(
      section('events', 'Related events', (r.relatedEvents || []).length ? el('ul', { class: 'events' }, r.relatedEvents.map((e) => el('li', { 'data-kind': e.kind }, event(runId, e)))) : el('p', { class: 'empty' }, 'None.')),
      section('recommendation', 'Recommendation', (r.recommendation || []).length ? el('ul', {}, r.recommendation.map((x) => el('li', {}, x))) : el('p', { class: 'empty' }, 'None.')),
    );
  },
};
