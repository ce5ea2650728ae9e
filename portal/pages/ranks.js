// Ranks (sections 26, 40): the heatmap of ranks x steps (work time over the
// step's median, /heatmap, downsampled by the server: rank windows across the
// run, full-resolution steps inside failure windows, said per column), the
// sortable rank table (/ranks) and, with ?rank=R, the rank's drill-down
// (/ranks/R): node, GPU and their samples around the incident as synced plots,
// so that rank → node → GPU → temperature ↑ → clock ↓ → throttle reads at a glance.
import { api, el, fmt, link, chartTable, timeSeries, runHref, hashOf, setQuery, num } from '../app.js';
import { useViewsStyle } from './views-style.js';

const MAX_RANKS = 256;
const MAX_STEPS = 400;
const TABLE_ROWS = 100;

// ---- color scale: blue below the median, white at it, red to dark above ----
const STOPS = [
  [0.5, [33, 102, 172]],
  [0.9, [171, 204, 230]],
  [1.0, [247, 247, 247]],
  [1.15, [253, 204, 138]],
  [1.4, [239, 101, 72]],
  [2.0, [153, 0, 13]],
  [3.0, [64, 0, 4]],
];
const MISSING = '#c8c8c8';

function rgb(v) {
  if (v <= STOPS[0][0]) return STOPS[0][1];
  for (let i = 1; i < STOPS.length; i++) {
    const [b, cb] = STOPS[i];
    if (v <= b) {
      const [a, ca] = STOPS[i - 1];
      const t = (v - a) / (b - a);
      return ca.map((c, k) => Math.round(c + (cb[k] - c) * t));
    }
  }
  return STOPS[STOPS.length - 1][1];
}

function color(v) {
  const n = num(v);
  if (n === null || !Number.isFinite(n)) return MISSING;
  const [r, g, b] = rgb(n);
  return `rgb(${r},${g},${b})`;
}

const ranksText = (row) => (row.firstRank === row.lastRank ? `rank ${row.firstRank}` : `ranks ${row.firstRank}–${row.lastRank}`);
const stepsText = (c) => (c.firstStep === c.lastStep ? `step ${c.firstStep}` : `steps ${c.firstStep}–${c.lastStep}`);

function legend() {
  const ticks = [0.5, 1, 1.4, 2, 3];
  const lo = 0.5;
  const hi = 3;
  const pos = (v) => `${((v - lo) / (hi - lo)) * 100}%`;
  const grad = STOPS.map(([v, c]) => `rgb(${c.join(',')}) ${pos(v)}`).join(', ');
  return el(
    'div',
    { class: 'heat-legend', 'data-testid': 'heatmap-legend', 'aria-label': 'Color scale: work time over the step median, 0.5 (blue, faster) to 1 (white) to 3 and above (dark red, slower); gray: no data' },
    el('span', { class: 'heat-legend-title' }, 'work time ÷ step median'),
    el(
      'div',
      { class: 'heat-legend-bar-wrap' },
      el('div', { class: 'heat-legend-bar', style: { background: `linear-gradient(to right, ${grad})` } }),
      el('div', { class: 'heat-legend-ticks' }, ticks.map((t) => el('span', { style: { left: pos(t) } }, `${t}×`))),
    ),
    el('span', { class: 'heat-legend-missing' }, el('span', { class: 'swatch', style: { background: MISSING } }), ' no data'),
  );
}

// The rank a click on a heatmap row means: the highlighted rank in the bucket,
// else its slowest by the rank table, else its first.
function rankOfRow(row, hm, table) {
  const h = (hm.highlight || []).find((x) => x.rank >= row.firstRank && x.rank <= row.lastRank);
  if (h) return h.rank;
  let best = null;
  for (const r of table) {
    if (r.rank < row.firstRank || r.rank > row.lastRank) continue;
    if (best === null || (num(r.ratioToMedian) ?? 0) > (num(best.ratioToMedian) ?? 0)) best = r;
  }
  return best ? best.rank : row.firstRank;
}

function heatmap(section, hm, table) {
  const rows = hm.rows || [];
  const cols = hm.columns || [];
  const cells = hm.cells || [];
  const stepCols = cols.filter((c) => c.resolution === 'step').length;
  const windows = cols.length - stepCols;
  const fw = (hm.failureWindows || []).map(([a, b]) => `${a}–${b}`).join(', ');
  section.append(
    el(
      'p',
      { class: 'heat-resolution', 'data-testid': 'heatmap-resolution' },
      `${rows.length} rows of ${hm.rankBucket > 1 ? `${hm.rankBucket} ranks` : '1 rank'} (a cell is the slowest of its ranks) × ${cols.length} columns: `,
      el('span', { class: 'res-window' }, `${windows} rank-window column${windows === 1 ? '' : 's'}`),
      ' (the mean over a window of steps, light bar above the map) and ',
      el('span', { class: 'res-step' }, `${stepCols} full-resolution step column${stepCols === 1 ? '' : 's'}`),
      fw ? ` inside the failure window${hm.failureWindows.length > 1 ? 's' : ''} (steps ${fw}; dark bar above the map).` : ' (no failure window).',
    ),
    legend(),
  );
  if (!rows.length || !cols.length) {
    section.append(el('p', { class: 'empty' }, 'No rank data in this range.'));
    return;
  }
  const LEFT = 64;
  const TOP = 12;
  const BOTTOM = 22;
  const wrap = el('div', { class: 'heat-wrap' });
  const canvas = el('canvas', { class: 'heat-canvas', 'data-testid': 'heatmap-canvas', 'aria-hidden': 'true' });
  const overlay = el('div', { class: 'heat-overlay' });
  const hover = el('div', { class: 'heat-hover', 'data-testid': 'heatmap-hover', role: 'status', 'aria-live': 'polite' }, 'Hover over the map for a cell’s ranks, steps and value; click a row for its drill-down.');
  const maxV = num(hm.max);
  const hl = hm.highlight || [];
  const figure = el('figure', {
    class: 'chart heatmap',
    'data-testid': 'heatmap',
    'aria-label': `Heatmap of ${rows.length} rank rows by ${cols.length} step columns, ${stepsText({ firstStep: hm.fromStep, lastStep: hm.toStep })}; highest ${fmt.num(maxV, 3)}× the step median${hl.length ? `; incidents on ${hl.map((h) => `rank ${h.rank} (${h.kind})`).join(', ')}` : ''}`,
  });
  wrap.append(canvas, overlay);
  figure.append(wrap, hover);
  section.append(figure);

  const width = Math.max(480, Math.min(1400, section.clientWidth || 960));
  const ch = Math.max(2, Math.min(14, Math.floor(560 / rows.length)));
  const height = TOP + rows.length * ch + BOTTOM;
  const cw = (width - LEFT - 4) / cols.length;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  wrap.style.width = `${width}px`;
  wrap.style.height = `${height}px`;
  const ctx = canvas.getContext('2d');
  ctx.scale(dpr, dpr);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, width, height);
  // The resolution strip above the map.
  cols.forEach((c, j) => {
    ctx.fillStyle = c.resolution === 'step' ? '#333333' : '#bbbbbb';
    ctx.fillRect(LEFT + j * cw, 2, Math.max(1, cw), TOP - 5);
  });
  for (let i = 0; i < rows.length; i++) {
    const line = cells[i] || [];
    for (let j = 0; j < cols.length; j++) {
      ctx.fillStyle = color(line[j]);
      ctx.fillRect(LEFT + j * cw, TOP + i * ch, Math.ceil(cw), ch);
    }
  }
  // Axes: rank labels on the left, step labels below.
  ctx.fillStyle = '#222222';
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  const rowEvery = Math.max(1, Math.ceil(14 / ch));
  for (let i = 0; i < rows.length; i += rowEvery * Math.max(1, Math.round(rows.length / (rowEvery * 12)))) {
    ctx.fillText(String(rows[i].firstRank), LEFT - 6, TOP + i * ch + ch / 2);
  }
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  const ticks = 8;
  for (let t = 0; t < ticks; t++) {
    const j = Math.round((t * (cols.length - 1)) / (ticks - 1));
    ctx.fillText(String(cols[j].firstStep), Math.min(width - 20, LEFT + j * cw + cw / 2), TOP + rows.length * ch + 5);
  }
  ctx.save();
  ctx.translate(12, TOP + (rows.length * ch) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = 'middle';
  ctx.fillText('rank', 0, 0);
  ctx.restore();
  // Incident rows: outlined on the map, and a link over them.
  const rowOf = (rank) => rows.findIndex((r) => rank >= r.firstRank && rank <= r.lastRank);
  for (const h of hl) {
    const i = rowOf(h.rank);
    if (i < 0) continue;
    const j0 = Math.max(0, cols.findIndex((c) => c.lastStep >= h.openedStep));
    let j1 = cols.length - 1;
    for (let j = cols.length - 1; j >= 0; j--) if (cols[j].firstStep <= (h.lastStep ?? hm.toStep)) { j1 = j; break; }
    ctx.strokeStyle = '#000000';
    ctx.lineWidth = 2;
    ctx.strokeRect(LEFT + 1, TOP + i * ch - 1, cols.length * cw - 2, ch + 2);
    ctx.setLineDash([3, 2]);
    ctx.strokeStyle = '#1f5fbf';
    ctx.strokeRect(LEFT + j0 * cw, TOP + i * ch - 2, (j1 - j0 + 1) * cw, ch + 4);
    ctx.setLineDash([]);
    overlay.append(
      el(
        'a',
        {
          class: 'heat-highlight',
          href: hashOf(runHref(hm.runId, 'ranks'), { rank: h.rank }),
          'data-testid': `heatmap-highlight-${h.rank}`,
          'data-rank': h.rank,
          title: `rank ${h.rank}: ${h.kind} from step ${h.openedStep}${h.lastStep ? ` to ${h.lastStep}` : ''}`,
          style: { left: '0px', top: `${TOP + i * ch - 2}px`, width: `${LEFT - 2}px`, height: `${Math.max(ch + 4, 16)}px` },
        },
        el('span', { class: 'heat-highlight-label' }, `▶ ${h.rank}`),
      ),
    );
  }
  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left - LEFT;
    const y = e.clientY - r.top - TOP;
    const j = Math.floor(x / cw);
    const i = Math.floor(y / ch);
    if (i < 0 || i >= rows.length || j < 0 || j >= cols.length) return null;
    return { i, j };
  };
  canvas.addEventListener('mousemove', (e) => {
    const p = at(e);
    if (!p) return;
    const c = cols[p.j];
    const v = (cells[p.i] || [])[p.j];
    hover.textContent = `${ranksText(rows[p.i])}, ${stepsText(c)} (${c.resolution === 'step' ? 'full resolution' : 'rank window'}): ${num(v) === null ? 'no data' : `${fmt.num(v, 3)}× the step median`}`;
  });
  canvas.addEventListener('click', (e) => {
    const p = at(e);
    if (p) setQuery({ rank: rankOfRow(rows[p.i], hm, table) });
  });
  // The numbers: per row, its highest cell and where.
  const summary = rows.map((r, i) => {
    const line = (cells[i] || []).map(num);
    let best = -1;
    line.forEach((v, j) => {
      if (v !== null && Number.isFinite(v) && (best < 0 || v > line[best])) best = j;
    });
    const fin = line.filter((v) => v !== null && Number.isFinite(v));
    return [ranksText(r).replace(/^ranks? /, ''), best < 0 ? null : line[best], best < 0 ? '—' : stepsText(cols[best]).replace(/^steps? /, ''), fin.length ? fin.reduce((a, b) => a + b, 0) / fin.length : null];
  });
  figure.append(chartTable(['ranks', 'highest ×median', 'at steps', 'mean ×median'], summary, 'Numbers: heatmap rows'));
}

// ---- the rank table (section 40) ----
// (a function: app.js imports this module before its own exports exist)
const columns = () => [
  { key: 'rank', label: 'rank', f: fmt.int },
  { key: 'node', label: 'node', f: fmt.text },
  { key: 'gpu', label: 'GPU', f: fmt.int },
  { key: 'stepTimeMs', label: 'work time', f: fmt.ms },
  { key: 'ratioToMedian', label: '× median', f: (v) => fmt.num(v, 3) },
  { key: 'maxStepTimeMs', label: 'max work', f: fmt.ms },
  { key: 'wallStepMs', label: 'wall step', f: fmt.ms },
  { key: 'commMs', label: 'comm', f: fmt.ms },
  { key: 'dataWaitMs', label: 'data wait', f: fmt.ms },
  { key: 'steps', label: 'steps', f: fmt.int },
  { key: 'slowestSteps', label: 'slowest in', f: fmt.int },
];

function rankTable(section, runId, table, incidentRanks, current) {
  const COLUMNS = columns();
  let sortKey = 'ratioToMedian';
  let desc = true;
  let all = table.length <= TABLE_ROWS;
  const thead = el('thead');
  const tbody = el('tbody');
  const more = el('p');
  const cmp = (a, b) => {
    const x = a[sortKey];
    const y = b[sortKey];
    const nx = num(x);
    const ny = num(y);
    let c = nx !== null && ny !== null ? nx - ny : String(x ?? '').localeCompare(String(y ?? ''), 'en', { numeric: true });
    if (c === 0) c = a.rank - b.rank;
    return desc ? -c : c;
  };
  const fill = () => {
    thead.replaceChildren(
      el(
        'tr',
        {},
        COLUMNS.map((c) =>
          el(
            'th',
            { scope: 'col', 'aria-sort': c.key === sortKey ? (desc ? 'descending' : 'ascending') : 'none' },
            el(
              'button',
              {
                type: 'button',
                class: 'sort',
                'data-testid': `sort-${c.key}`,
                onclick: () => {
                  if (sortKey === c.key) desc = !desc;
                  else {
                    sortKey = c.key;
                    desc = !['rank', 'node', 'gpu'].includes(c.key);
                  }
                  fill();
                  section.querySelector(`[data-testid="sort-${c.key}"]`).focus();
                },
              },
              c.label,
              c.key === sortKey ? (desc ? ' ▼' : ' ▲') : '',
            ),
          ),
        ),
      ),
    );
    const sorted = [...table].sort(cmp);
    const shown = all ? sorted : sorted.slice(0, TABLE_ROWS);
    tbody.replaceChildren(
      ...shown.map((r) => {
        const href = hashOf(runHref(runId, 'ranks'), { rank: r.rank });
        return el(
          'tr',
          {
            'data-testid': `rank-row-${r.rank}`,
            class: `${incidentRanks.has(r.rank) ? 'incident' : ''}${String(r.rank) === current ? ' selected' : ''}`,
            onclick: (e) => {
              if (e.target.closest('a')) return;
              location.hash = href;
            },
          },
          COLUMNS.map((c) => el('td', { class: c.key === 'node' ? '' : 'num' }, c.key === 'rank' ? link(href, fmt.int(r.rank)) : c.f(r[c.key]))),
        );
      }),
    );
    more.replaceChildren(
      all || table.length <= TABLE_ROWS
        ? `${table.length} ranks.`
        : el(
            'button',
            {
              type: 'button',
              'data-testid': 'ranks-show-all',
              onclick: () => {
                all = true;
                fill();
              },
            },
            `Show all ${table.length} ranks (showing ${TABLE_ROWS})`,
          ),
    );
  };
  fill();
  section.append(
    el('div', { class: 'table-wrap' }, el('table', { class: 'rank-table', 'data-testid': 'rank-table' }, el('caption', {}, 'Ranks, by work time over the median (click a header to sort, a row for its drill-down)'), thead, tbody)),
    more,
  );
}

// ---- the drill-down of one rank ----
function throttleValue(v) {
  if (v === null || v === undefined) return null;
  if (Array.isArray(v)) return v.length;
  if (typeof v === 'number') return THROTTLE_BITS.filter(([b]) => v & b && b !== 0x1).length;
  if (typeof v === 'string') return v === '' || v === 'none' || v === '0' ? 0 : v.split(/[,|]/).filter(Boolean).length;
  return null;
}

// NVML's clocks-throttle-reason bits (nvmlClocksThrottleReason*).
const THROTTLE_BITS = [
  [0x1, 'gpu_idle'],
  [0x2, 'applications_clocks'],
  [0x4, 'sw_power_cap'],
  [0x8, 'hw_slowdown'],
  [0x10, 'sync_boost'],
  [0x20, 'sw_thermal_slowdown'],
  [0x40, 'hw_thermal_slowdown'],
  [0x80, 'hw_power_brake_slowdown'],
  [0x100, 'display_clocks'],
];

function throttleText(v) {
  if (v === null || v === undefined) return '—';
  if (Array.isArray(v)) return v.length ? v.join(', ') : 'none';
  if (typeof v === 'number') {
    const names = THROTTLE_BITS.filter(([b]) => v & b).map(([, n]) => n);
    return v === 0 ? 'none' : `${names.join(', ') || 'other'} (0x${v.toString(16)})`;
  }
  return String(v) || 'none';
}

const hasXid = (s) => s.xid !== null && s.xid !== undefined && s.xid !== 0 && s.xid !== '';

async function drill(section, runId, rank) {
  const d = await api(`/v1/runs/${encodeURIComponent(runId)}/ranks/${encodeURIComponent(rank)}`);
  const byTime = (a, b) => (num(a.timeNs) ?? 0) - (num(b.timeNs) ?? 0) || (a.step ?? 0) - (b.step ?? 0);
  const gs = [...(d.gpuSamples || [])].sort(byTime);
  const ns = [...(d.nodeSamples || [])].sort(byTime);
  // The rank's steps over the samples' steps (the plots share that axis).
  const sampleSteps = gs.map((x) => x.step).filter((x) => x !== null && x !== undefined);
  const lo = sampleSteps.length ? Math.min(...sampleSteps) : -Infinity;
  const hi = sampleSteps.length ? Math.max(...sampleSteps) : Infinity;
  const steps = (d.steps || []).filter((x) => x.step >= lo && x.step <= hi).sort((a, b) => a.step - b.step);
  const inc = d.incidents || [];
  const first = inc[0];
  const opened = first ? first.openedStep : null;
  const before = gs.filter((s) => opened !== null && s.step !== null && s.step < opened);
  const during = gs.filter((s) => opened === null || s.step === null || s.step >= opened);
  const nums = (xs, k) => xs.map((s) => num(s[k])).filter((v) => v !== null && Number.isFinite(v));
  const median = (xs) => {
    if (!xs.length) return null;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)];
  };
  const tBefore = median(nums(before, 'tempC'));
  const tPeak = nums(during, 'tempC').length ? Math.max(...nums(during, 'tempC')) : null;
  const cBefore = median(nums(before, 'smClockMhz'));
  const cLow = nums(during, 'smClockMhz').length ? Math.min(...nums(during, 'smClockMhz')) : null;
  const reasons = [...new Set(during.map((s) => s.throttleReasons).filter((v) => throttleValue(v)).map(throttleText))];
  const xids = gs.filter(hasXid);
  const chain = [
    el('span', { class: 'chain-item', 'data-testid': 'drill-rank' }, `rank ${d.rank}`),
    el('span', { class: 'chain-item', 'data-testid': 'drill-node' }, `node ${fmt.text(d.node)}`),
    el('span', { class: 'chain-item', 'data-testid': 'drill-gpu' }, `GPU ${fmt.text(d.gpu)}`),
    tPeak !== null ? el('span', { class: `chain-item${tBefore !== null && tPeak > tBefore + 5 ? ' up' : ''}` }, `temperature ${tBefore !== null ? `${fmt.num(tBefore, 3)} → ` : ''}${fmt.num(tPeak, 3)} °C${tBefore !== null && tPeak > tBefore + 5 ? ' ↑' : ''}`) : null,
    cLow !== null ? el('span', { class: `chain-item${cBefore !== null && cLow < cBefore * 0.9 ? ' down' : ''}` }, `SM clock ${cBefore !== null ? `${fmt.int(cBefore)} → ` : ''}${fmt.int(cLow)} MHz${cBefore !== null && cLow < cBefore * 0.9 ? ' ↓' : ''}`) : null,
    reasons.length ? el('span', { class: 'chain-item throttle' }, `throttle: ${reasons.join('; ')}`) : null,
    xids.length ? el('span', { class: 'chain-item throttle' }, `XID ${[...new Set(xids.map((s) => s.xid))].join(', ')}`) : null,
  ].filter(Boolean);
  const s = d.summary || {};
  section.append(
    el('h2', { id: 'drill-title' }, `Rank ${d.rank}`),
    el('p', { class: 'chain', 'data-testid': 'drill-chain', 'aria-label': chain.map((c) => c.textContent).join(' → ') }, chain.flatMap((c, i) => (i ? [el('span', { class: 'chain-arrow', 'aria-hidden': 'true' }, ' → '), c] : [c]))),
    el(
      'p',
      { class: 'muted' },
      `work ${fmt.ms(s.stepTimeMs)} per step, ${fmt.num(s.ratioToMedian, 3)}× the median; comm ${fmt.ms(s.commMs)}, data wait ${fmt.ms(s.dataWaitMs)}; `,
      d.node ? link(`#/lineage/${encodeURIComponent(d.node)}`, `lineage of ${d.node}`) : null,
      d.window ? ` · samples ${fmt.time(d.window.fromNs)} to ${fmt.time(d.window.toNs)}` : null,
    ),
    inc.length
      ? el(
          'ul',
          { class: 'incidents', 'data-testid': 'drill-incidents' },
          inc.map((i) => el('li', { class: `sev-${i.severity}` }, `${i.kind} (${i.severity}) from step ${i.openedStep}${i.lastStep ? ` to ${i.lastStep}` : ''} `, link(hashOf(runHref(runId, 'timeline'), { from: Math.max(1, i.openedStep - 20), to: (i.lastStep || i.openedStep) + 20 }), 'timeline'))),
        )
      : el('p', {}, 'No incident on this rank.'),
  );
  const markers = inc.map((i) => ({ step: i.openedStep, label: i.kind, severity: i.severity }));
  const xidMarkers = xids.filter((x) => x.step !== null).map((x) => ({ step: x.step, label: `XID ${x.xid}`, severity: 'critical' }));
  const plots = el('div', { class: 'drill-plots' });
  section.append(plots);
  const gx = gs.map((x) => x.step);
  timeSeries(plots, { title: `Rank ${d.rank} work time (ms)`, x: steps.map((x) => x.step), series: [{ label: 'work ms', values: steps.map((x) => x.workMs) }, { label: 'comm ms', values: steps.map((x) => x.commMs) }], markers, sync: 'drill', height: 140 });
  timeSeries(plots, { title: `GPU ${d.gpu} temperature (°C)`, x: gx, series: [{ label: 'temperature °C', values: gs.map((x) => x.tempC), color: '#b3261e' }], markers: [...markers, ...xidMarkers], sync: 'drill', height: 120 });
  timeSeries(plots, { title: `GPU ${d.gpu} SM clock (MHz)`, x: gx, series: [{ label: 'SM clock MHz', values: gs.map((x) => x.smClockMhz) }], markers, sync: 'drill', height: 120 });
  timeSeries(plots, { title: `GPU ${d.gpu} power (W)`, x: gx, series: [{ label: 'power W', values: gs.map((x) => x.powerW), color: '#a15c00' }, { label: 'limit W', values: gs.map((x) => x.powerLimitW), color: '#555555' }], markers, sync: 'drill', height: 120 });
  timeSeries(plots, { title: `GPU ${d.gpu} throttle reasons (active)`, x: gx, series: [{ label: 'throttle reasons', values: gs.map((x) => throttleValue(x.throttleReasons)), color: '#8a4baf' }], markers: [...markers, ...xidMarkers], sync: 'drill', height: 90 });
  if (ns.length) timeSeries(plots, { title: `Node ${d.node} CPU (%)`, x: ns.map((x) => x.step), series: [{ label: 'CPU %', values: ns.map((x) => x.cpuPct), color: '#00707a' }], markers, sync: 'drill', height: 90 });
  const table = chartTable(
    [
      'step',
      { label: 'time', format: fmt.time },
      { label: 'util %', format: (v) => fmt.num(v, 3) },
      { label: 'temp °C', format: (v) => fmt.num(v, 3) },
      { label: 'SM clock MHz', format: fmt.int },
      { label: 'power W', format: fmt.int },
      { label: 'limit W', format: fmt.int },
      { label: 'throttle', format: throttleText },
      { label: 'XID', format: fmt.text },
    ],
    gs.map((x) => [x.step, x.timeNs, x.utilPct, x.tempC, x.smClockMhz, x.powerW, x.powerLimitW, x.throttleReasons, x.xid]),
    `Numbers: GPU ${d.gpu} samples (${gs.length})`,
  );
  table.setAttribute('data-testid', 'drill-gpu-numbers');
  section.append(table);
}

export default {
  id: 'ranks',
  title: 'Ranks',
  scope: 'run',
  route: /^#\/runs\/([^/]+)\/ranks$/,
  async render(root, params, query) {
    useViewsStyle();
    const runId = params[0];
    const rank = query.get('rank');
    const base = `/v1/runs/${encodeURIComponent(runId)}`;
    const range = new URLSearchParams();
    for (const k of ['fromStep', 'toStep']) if (query.get(k)) range.set(k, query.get(k));
    range.set('maxRanks', MAX_RANKS);
    range.set('maxSteps', MAX_STEPS);
    const [hm, table] = await Promise.all([api(`${base}/heatmap?${range}`), api(`${base}/ranks?limit=1000000&sort=rank&order=asc`)]);
    root.append(el('h1', {}, 'Ranks'));
    const drillBox = el('section', { class: 'drill', 'data-testid': 'drill', 'aria-labelledby': 'drill-title' });
    if (rank !== null && rank !== '') root.append(drillBox);
    const heat = el('section', { class: 'heat-section' }, el('h2', {}, 'Work time per rank and step'));
    root.append(heat);
    heatmap(heat, hm, table);
    const incidentRanks = new Set((hm.highlight || []).map((h) => h.rank));
    const tableBox = el('section', {}, el('h2', {}, 'Rank table'));
    root.append(tableBox);
    rankTable(tableBox, runId, table, incidentRanks, rank);
    if (rank !== null && rank !== '') {
      await drill(drillBox, runId, rank);
      drillBox.scrollIntoView({ block: 'start' });
    }
  },
};
