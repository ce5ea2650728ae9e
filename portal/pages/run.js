// #/runs/ID[?from=A&to=B]: one run as section 15's dashboard: progress,
// throughput, the step timing breakdown, the GPU summary, and synced plots of
// loss, validation loss, gradient norm, learning rate and step time with the
// run's alerts marked. Dragging across a plot zooms to those steps (the hash's
// from/to, fetched again for that range); a running run refreshes every 2 s.
import { api, el, fmt, hashOf, link, num, runHref, setQuery, statusBadge, timeSeries } from '../app.js';

// The most rows a plot asks for: /steps buckets consecutive steps beyond it
// (maxPoints; a non-finite loss survives its bucket), so a zoom to a short
// range is at full resolution and a long run stays a few thousand points.
const MAX_POINTS = 2000;

const BREAKDOWN = [
  { key: 'forward', label: 'forward', color: '#1f5fbf' },
  { key: 'backward', label: 'backward', color: '#5b8fd9' },
  { key: 'optimizer', label: 'optimizer', color: '#8a4baf' },
  { key: 'comm', label: 'communication', color: '#a15c00' },
  { key: 'dataWait', label: 'data', color: '#1b7f3b' },
];

function range(query) {
  const from = num(query.get('from'));
  const to = num(query.get('to'));
  return { from: Number.isInteger(from) ? from : null, to: Number.isInteger(to) ? to : null };
}

async function load(runId, query) {
  const id = encodeURIComponent(runId);
  const { from, to } = range(query);
  const steps = new URLSearchParams({ maxPoints: String(MAX_POINTS) });
  const span = new URLSearchParams();
  if (from !== null) span.set('fromStep', String(from));
  if (to !== null) span.set('toStep', String(to));
  for (const [k, v] of span) steps.set(k, v);
  const [run, stepRows, timeline, gpus] = await Promise.all([
    api(`/v1/runs/${id}`),
    api(`/v1/runs/${id}/steps?${steps}`),
    api(`/v1/runs/${id}/timeline?${new URLSearchParams({ ...Object.fromEntries(span), limit: '5000' })}`),
    api(`/v1/runs/${id}/gpus?${span}`),
  ]);
  return { run, steps: stepRows.steps || [], events: timeline.events || [], gpus: Array.isArray(gpus) ? gpus : [] };
}

const SEVERITY_RANK = { info: 0, warning: 1, critical: 2 };

// One marker per step with alerts in the range: their kinds (each once, over
// revisions) and the highest severity.
function markersOf(events) {
  const byStep = new Map();
  for (const e of events) {
    if (e.kind !== 'alert' || e.step === null || e.step === undefined) continue;
    const kind = ((e.detail && e.detail.alert_kind) || 'alert').replace(/_/g, ' ');
    const m = byStep.get(e.step) || { step: e.step, kinds: [], severity: 'info' };
    if (!m.kinds.includes(kind)) m.kinds.push(kind);
    if ((SEVERITY_RANK[e.severity] ?? 0) > (SEVERITY_RANK[m.severity] ?? 0)) m.severity = e.severity;
    byStep.set(e.step, m);
  }
  return [...byStep.values()].map((m) => ({ step: m.step, label: m.kinds.join(', '), severity: m.severity }));
}

function card(label, value, testid, sub) {
  return el('div', { class: 'card', 'data-testid': testid }, el('div', { class: 'label' }, label), el('div', { class: 'value' }, value), sub ? el('div', { class: 'label' }, sub) : null);
}

function totalSteps(run) {
  const c = run.config || {};
  for (const k of ['total_steps', 'max_steps', 'train_steps', 'steps']) if (Number.isFinite(num(c[k]))) return num(c[k]);
  return null;
}

function progress(run, steps) {
  const m = run.metrics || {};
  const total = totalSteps(run);
  const last = steps.length ? steps[steps.length - 1] : null;
  const gpus = num(run.gpus ?? run.worldSize);
  const tps = num(m.tokensPerSecond);
  return el(
    'section',
    { 'aria-label': 'Progress and throughput' },
    el(
      'div',
      { class: 'cards' },
      card('Step', total ? `${fmt.int(run.step)} of ${fmt.int(total)}` : fmt.int(run.step), 'progress-step', total ? fmt.pct(num(run.step) / total) : null),
      card('Status', statusBadge(run.status), 'progress-status', run.endReason || null),
      card('Tokens processed', fmt.si(run.tokensProcessed), 'progress-tokens'),
      card('Tokens/s', fmt.si(tps), 'throughput-tps', last ? `step ${fmt.int(last.lastStep ?? last.step)}` : null),
      card('Tokens/s per GPU', gpus && tps !== null ? fmt.si(tps / gpus) : '—', 'throughput-per-gpu', gpus ? `${fmt.int(gpus)} GPUs` : null),
      card('MFU', fmt.pct(m.mfu), 'throughput-mfu'),
      card('Step time (median)', fmt.ms(m.stepTimeMsMedian), 'step-time'),
      card('Loss', fmt.num(m.loss), 'latest-loss'),
    ),
  );
}

// Mean of each part over the rows that report it.
function breakdown(steps) {
  const sums = {};
  const counts = {};
  let reported = false;
  for (const s of steps) {
    if (!s.breakdownMs) continue;
    reported = true;
    for (const b of BREAKDOWN) {
      const v = num(s.breakdownMs[b.key]);
      if (v !== null && Number.isFinite(v)) {
        sums[b.key] = (sums[b.key] || 0) + v;
        counts[b.key] = (counts[b.key] || 0) + 1;
      }
    }
  }
  if (reported && Object.keys(counts).length) {
    return { source: 'reported by the ranks (means over ranks and steps)', parts: BREAKDOWN.map((b) => ({ ...b, ms: counts[b.key] ? sums[b.key] / counts[b.key] : null })) };
  }
  // Without a reported breakdown: communication and data wait from their
  // ratios of the step, the rest is compute (forward, backward and optimizer together).
  let n = 0;
  let comm = 0;
  let data = 0;
  let step = 0;
  for (const s of steps) {
    const ms = num(s.stepMs);
    if (ms === null || !Number.isFinite(ms)) continue;
    n += 1;
    step += ms;
    comm += ms * (num(s.communicationRatio) || 0);
    data += ms * (num(s.dataWaitRatio) || 0);
  }
  if (!n) return null;
  return {
    source: 'from the step time and its communication and data-wait ratios (forward, backward and optimizer not reported apart)',
    parts: [
      { key: 'compute', label: 'compute (forward + backward + optimizer)', color: '#1f5fbf', ms: (step - comm - data) / n },
      { key: 'comm', label: 'communication', color: '#a15c00', ms: comm / n },
      { key: 'dataWait', label: 'data', color: '#1b7f3b', ms: data / n },
    ],
  };
}

function breakdownSection(steps) {
  const b = breakdown(steps);
  const section = el('section', { 'aria-labelledby': 'h-breakdown', 'data-testid': 'breakdown' }, el('h2', { id: 'h-breakdown' }, 'Step timing breakdown'));
  if (!b) return section.append(el('p', { class: 'empty' }, 'No step timing in this range.')), section;
  const parts = b.parts.filter((p) => p.ms !== null);
  const total = parts.reduce((a, p) => a + Math.max(0, p.ms), 0) || 1;
  const summary = parts.map((p) => `${p.label} ${fmt.ms(p.ms)} (${fmt.pct(p.ms / total)})`).join(', ');
  section.append(
    el('div', { class: 'bar', role: 'img', 'aria-label': `Mean step time: ${summary}` }, parts.map((p) => el('span', { style: { width: `${(100 * Math.max(0, p.ms)) / total}%`, background: p.color }, title: `${p.label}: ${fmt.ms(p.ms)}` }))),
    el(
      'table',
      { class: 'compact' },
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'part'), el('th', { scope: 'col', class: 'num' }, 'mean per step'), el('th', { scope: 'col', class: 'num' }, 'share'))),
      el('tbody', {}, parts.map((p) => el('tr', { 'data-part': p.key }, el('td', {}, el('span', { class: 'swatch', style: { background: p.color } }), ' ', p.label), el('td', { class: 'num' }, fmt.ms(p.ms)), el('td', { class: 'num' }, fmt.pct(p.ms / total))))),
    ),
    el('p', { class: 'muted' }, b.source),
  );
  return section;
}

const THROTTLE_BITS = [
  [0x1, 'idle'],
  [0x2, 'app clocks'],
  [0x4, 'sw power cap'],
  [0x8, 'hw slowdown'],
  [0x20, 'sw thermal'],
  [0x40, 'hw thermal'],
  [0x80, 'hw power brake'],
];

function throttleText(bits) {
  const b = num(bits);
  if (!b) return 'none';
  const names = THROTTLE_BITS.filter(([m]) => (b & m) !== 0 && m !== 0x1).map(([, n]) => n);
  return names.length ? names.join(', ') : `0x${b.toString(16)}`;
}

function gpuSection(runId, gpus) {
  const section = el('section', { 'aria-labelledby': 'h-gpus', 'data-testid': 'gpu-summary' }, el('h2', { id: 'h-gpus' }, 'GPUs'));
  if (!gpus.length) return section.append(el('p', { class: 'empty' }, 'No GPU samples in this range.')), section;
  const hot = (g) => num(g.tempMaxC) >= 85 || (num(g.throttleReasons) & 0x68) !== 0 || num(g.xid) > 0;
  const rows = [...gpus].sort((a, b) => Number(hot(b)) - Number(hot(a)) || (num(b.tempMaxC) || 0) - (num(a.tempMaxC) || 0));
  const flagged = rows.filter(hot);
  const util = gpus.map((g) => num(g.utilPct)).filter(Number.isFinite);
  const temps = gpus.map((g) => num(g.tempMaxC)).filter(Number.isFinite);
  section.append(
    el(
      'p',
      { 'data-testid': 'gpu-flagged' },
      `${gpus.length} GPUs; mean utilization ${util.length ? fmt.pctOf100(util.reduce((a, b) => a + b, 0) / util.length) : '—'}; hottest ${temps.length ? fmt.num(Math.max(...temps), 3) : '—'} °C; `,
      flagged.length ? el('strong', { class: 'sev-warning' }, `${flagged.length} throttling, hot or with an XID`) : 'none throttling',
    ),
  );
  const cols = ['rank', 'node', 'GPU', 'util', 'temp (max)', 'SM clock (min)', 'power', 'memory', 'throttle', 'XID'];
  section.append(
    el(
      'div',
      { class: 'table-wrap' },
      el(
        'table',
        {},
        el('thead', {}, el('tr', {}, cols.map((c) => el('th', { scope: 'col' }, c)))),
        el(
          'tbody',
          {},
          rows.map((g) =>
            el(
              'tr',
              { class: hot(g) ? 'flagged' : null, 'data-testid': 'gpu-row', 'data-rank': g.rank },
              el('td', {}, g.rank === null || g.rank === undefined ? '—' : link(hashOf(runHref(runId, 'ranks'), { rank: g.rank }), String(g.rank))),
              el('td', {}, link(`#/lineage/${encodeURIComponent(g.node)}`, g.node)),
              el('td', {}, String(g.gpu)),
              el('td', { class: 'num' }, fmt.pctOf100(g.utilPct)),
              el('td', { class: 'num' }, `${fmt.num(g.tempC, 3)} (${fmt.num(g.tempMaxC, 3)}) °C`),
              el('td', { class: 'num' }, `${fmt.int(g.smClockMhz)} (${fmt.int(g.smClockMinMhz)}) MHz`),
              el('td', { class: 'num' }, `${fmt.int(g.powerW)} W`),
              el('td', { class: 'num' }, fmt.bytes(g.memUsedBytes)),
              el('td', {}, throttleText(g.throttleReasons)),
              el('td', {}, num(g.xid) ? String(g.xid) : '—'),
            ),
          ),
        ),
      ),
    ),
  );
  return section;
}

function incidentsSection(runId, run) {
  const list = run.incidents || [];
  const section = el('section', { 'aria-labelledby': 'h-incidents', 'data-testid': 'incidents' }, el('h2', { id: 'h-incidents' }, 'Incidents'));
  if (!list.length) return section.append(el('p', { class: 'empty' }, 'No incidents.')), section;
  section.append(
    el(
      'ul',
      { class: 'events' },
      list.map((i) => {
        const from = Math.max(0, (num(i.openedStep) ?? 0) - 10);
        const to = (num(i.lastStep) ?? num(i.openedStep) ?? 0) + 10;
        return el(
          'li',
          { 'data-testid': 'incident', 'data-incident': i.incidentId },
          el('span', { class: `badge sev-${i.severity}` }, i.severity),
          ' ',
          el('strong', {}, i.kind.replace(/_/g, ' ')),
          ` steps ${fmt.int(i.openedStep)}–${fmt.int(i.lastStep)}, ${i.alertCount} alert${i.alertCount === 1 ? '' : 's'} · `,
          link(hashOf(runHref(runId, 'timeline'), { from, to }), 'timeline'),
          ' · ',
          link(runHref(runId, 'failure'), 'failure page'),
        );
      }),
    ),
  );
  return section;
}

// The plots' inputs from the step rows.
function plotSpecs(steps) {
  const x = steps.map((s) => s.step);
  const col = (k) => steps.map((s) => s[k]);
  return [
    { title: 'Loss', log: true, series: [{ label: 'loss', values: col('loss') }] },
    { title: 'Validation loss', series: [{ label: 'validation loss', values: col('valLoss') }] },
    { title: 'Gradient norm', log: true, series: [{ label: 'gradient norm', values: col('gradNorm') }] },
    { title: 'Learning rate', series: [{ label: 'learning rate', values: col('learningRate') }] },
    {
      title: 'Step time',
      series: [
        { label: 'step ms', values: col('stepMs') },
        { label: 'rank p50 ms', values: steps.map((s) => (s.rankTimeMs ? s.rankTimeMs.p50 : null)) },
      ],
    },
  ].map((p) => ({ ...p, x }));
}

function hasValues(spec) {
  return spec.series.some((s) => s.values.some((v) => v !== null && v !== undefined));
}

export default {
  id: 'run',
  title: 'Run',
  scope: 'run',
  route: /^#\/runs\/([^/?]+)$/,

  async render(root, [runId], query) {
    const data = await load(runId, query);
    const { run, steps, events, gpus } = data;
    const { from, to } = range(query);
    root.append(
      el('h1', {}, `Run ${run.runId}`),
      el('p', { class: 'muted' }, [run.modelId, run.modelVersion, run.experimentId && `experiment ${run.experimentId}`, run.jobId && `job ${run.jobId}`, run.datasetVersion && `dataset ${run.datasetVersion}`].filter(Boolean).join(' · ')),
      progress(run, steps),
      incidentsSection(runId, run),
    );

    const plots = el('section', { 'aria-labelledby': 'h-plots', 'data-testid': 'plots' });
    const zoomed = from !== null || to !== null;
    const first = steps.length ? steps[0].step : null;
    const last = steps.length ? steps[steps.length - 1].lastStep ?? steps[steps.length - 1].step : null;
    plots.append(
      el('h2', { id: 'h-plots' }, 'Training curves'),
      el(
        'p',
        { class: 'muted', 'data-testid': 'plot-range', 'data-from': first ?? '', 'data-to': last ?? '' },
        steps.length ? `Steps ${fmt.int(first)} to ${fmt.int(last)}${steps.some((s) => s.lastStep !== undefined && s.lastStep !== s.step) ? ' (consecutive steps averaged into buckets)' : ''}. Drag across a plot to zoom. ` : 'No steps in this range. ',
        zoomed ? link(runHref(runId), 'Show all steps', { 'data-testid': 'zoom-reset' }) : null,
      ),
    );
    const grid = el('div', { class: 'charts' });
    plots.append(grid);
    root.append(plots);
    const markers = markersOf(events);
    const charts = [];
    for (const spec of plotSpecs(steps)) {
      if (!hasValues(spec) && spec.title === 'Validation loss') {
        grid.append(el('figure', { class: 'chart', 'data-testid': 'chart-validation-loss' }, el('figcaption', {}, spec.title), el('p', { class: 'empty' }, 'No validation loss reported in this range.')));
        continue;
      }
      charts.push({ spec, chart: timeSeries(grid, { ...spec, markers, onZoom: (a, b) => setQuery({ from: a, to: b }) }) });
    }
    root.append(breakdownSection(steps), gpuSection(runId, gpus));
    root.liveCharts = charts;
  },

  // A running run: new steps appended to the plots in place, the cards and
  // tables rebuilt.
  async refresh(root, [runId], query) {
    const { run, steps, events, gpus } = await load(runId, query);
    const markers = markersOf(events);
    const specs = plotSpecs(steps);
    for (const { spec, chart } of root.liveCharts || []) {
      const next = specs.find((s) => s.title === spec.title);
      if (next) chart.update({ ...next, markers });
    }
    const swap = (selector, node) => {
      const old = root.querySelector(selector);
      if (old) old.replaceWith(node);
    };
    swap('section[aria-label="Progress and throughput"]', progress(run, steps));
    swap('[data-testid=incidents]', incidentsSection(runId, run));
    swap('[data-testid=breakdown]', breakdownSection(steps));
    swap('[data-testid=gpu-summary]', gpuSection(runId, gpus));
    const r = root.querySelector('[data-testid=plot-range]');
    if (r && steps.length) {
      r.dataset.from = steps[0].step;
      r.dataset.to = steps[steps.length - 1].lastStep ?? steps[steps.length - 1].step;
    }
  },
};

