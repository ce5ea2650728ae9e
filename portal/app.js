// The portal's shell: the hash router over the pages of pages/index.js, the
// navigation (global pages; inside a run, the tab bar of the run's pages), the
// search box, and the helpers every page uses (api, el, fmt, link, chartTable,
// timeSeries). Plain ES modules, no build step; uPlot is window.uPlot
// (vendor/uplot, loaded by index.html before this module).
//
// A page module (pages/NAME.js) exports:
//   { id, title, scope: 'global' | 'run', route: /^#\/.../,
//     async render(root, params, query), refresh?(root, params, query),
//     href?(runId) (run pages: the tab's link; default #/runs/ID/<id>, #/runs/ID for 'run'),
//     nav?: false (a page with no nav entry, e.g. search) }
// The route is matched against location.hash without its ?query; its captures,
// decoded, are `params`; `query` is the URLSearchParams of the hash's query.
// refresh() is called every 2 s while the run of a run page is RUNNING.
import * as pageModules from './pages/index.js';

// ---- helpers for pages -------------------------------------------------------

// An answer of the API other than 2xx: the server's `error` text and status.
export class ApiError extends Error {
  constructor(message, status, path) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.path = path;
  }
}

// GET a JSON route of the API; throws ApiError with the server's `error` text.
export async function api(path) {
  let res;
  try {
    res = await fetch(path, { headers: { Accept: 'application/json' } });
  } catch (e) {
    throw new ApiError(`cannot reach runlens (${e.message})`, 0, path);
  }
  let body = null;
  const text = await res.text();
  try {
    body = text ? JSON.parse(text) : null;
  } catch (e) {
    throw new ApiError(`${path}: not JSON (HTTP ${res.status})`, res.status, path);
  }
  if (!res.ok) {
    const msg = body && body.error ? body.error : `HTTP ${res.status}`;
    throw new ApiError(msg, res.status, path);
  }
  return body;
}

// The API writes non-finite numbers as the strings "NaN", "Infinity",
// "-Infinity": a number, NaN/Infinity, or null for anything else missing.
export function num(v) {
  if (typeof v === 'number') return v;
  if (v === 'NaN') return NaN;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  if (typeof v === 'string' && v.trim() !== '' && !Number.isNaN(Number(v))) return Number(v);
  return null;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2).toLowerCase(), v);
    else if (k === 'style' && typeof v === 'object') Object.assign(node.style, v);
    else if (k === 'value' && 'value' in node) node.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'disabled') node[k] = Boolean(v);
    else node.setAttribute(k === 'className' ? 'class' : k, v === true ? '' : String(v));
  }
  const add = (c) => {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) return c.forEach(add);
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  };
  add(children);
  return node;
}

// el('a', {href, class, 'data-testid', onclick}, 'text', child, [more]): DOM,
// never innerHTML (ids and summaries come from users).
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// The same in the SVG namespace (drawn graphs, heatmaps).
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

// Links a page's own stylesheet once (its URL, e.g. new URL('./views.css', import.meta.url).href).
export function useStylesheet(href) {
  if ([...document.querySelectorAll('link[rel=stylesheet]')].some((l) => l.href === href)) return;
  document.head.append(el('link', { rel: 'stylesheet', href }));
}

// <a href> with text; attrs as el().
export function link(href, text, attrs = {}) {
  return el('a', { ...attrs, href }, text);
}

// Hash of a route: hashOf('#/runs/ID', {from: 1, to: null}) -> '#/runs/ID?from=1'.
export function hashOf(base, query = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `${base}?${s}` : base;
}

// #/runs/ID with the id encoded.
export function runHref(runId, page = '') {
  return `#/runs/${encodeURIComponent(runId)}${page ? '/' + page : ''}`;
}

function finite(v) {
  const n = num(v);
  return n === null ? null : n;
}

function nonFinite(n) {
  if (Number.isNaN(n)) return 'NaN';
  return n > 0 ? 'Infinity' : '-Infinity';
}

const grouping = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

// Number formatting: missing values are "—", NaN is "NaN", infinities "Infinity".
export const fmt = {
  // Significant digits for small numbers, grouping for large ones.
  num(v, digits = 4) {
    const n = finite(v);
    if (n === null) return '—';
    if (!Number.isFinite(n)) return nonFinite(n);
    const a = Math.abs(n);
    if (a === 0) return '0';
    if (Number.isInteger(n) && a < 1e15) return grouping.format(n);
    if (a >= 1e4) return grouping.format(n);
    if (a < 1e-3) return n.toExponential(Math.max(0, digits - 1));
    return String(Number(n.toPrecision(digits)));
  },
  int(v) {
    const n = finite(v);
    if (n === null) return '—';
    if (!Number.isFinite(n)) return nonFinite(n);
    return grouping.format(Math.round(n));
  },
  // 0.22 -> "22.0 %"
  pct(v, digits = 1) {
    const n = finite(v);
    if (n === null) return '—';
    if (!Number.isFinite(n)) return nonFinite(n);
    return `${(n * 100).toFixed(digits)} %`;
  },
  // A value that already is a percentage: 95.2 -> "95.2 %"
  pctOf100(v, digits = 1) {
    const n = finite(v);
    if (n === null) return '—';
    if (!Number.isFinite(n)) return nonFinite(n);
    return `${n.toFixed(digits)} %`;
  },
  ms(v) {
    const n = finite(v);
    if (n === null) return '—';
    if (!Number.isFinite(n)) return nonFinite(n);
    return n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${n.toFixed(n >= 100 ? 0 : 1)} ms`;
  },
  // 443504 -> "443.5 k"
  si(v, unit = '') {
    const n = finite(v);
    if (n === null) return '—';
    if (!Number.isFinite(n)) return nonFinite(n);
    const a = Math.abs(n);
    const [d, s] = a >= 1e12 ? [1e12, 'T'] : a >= 1e9 ? [1e9, 'G'] : a >= 1e6 ? [1e6, 'M'] : a >= 1e3 ? [1e3, 'k'] : [1, ''];
    const x = n / d;
    return `${d === 1 ? fmt.num(x, 3) : x.toFixed(Math.abs(x) >= 100 ? 0 : 1)}${s || unit ? ' ' : ''}${s}${unit}`;
  },
  bytes(v) {
    const n = finite(v);
    if (n === null) return '—';
    if (!Number.isFinite(n)) return nonFinite(n);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let x = n;
    let i = 0;
    while (Math.abs(x) >= 1024 && i < units.length - 1) {
      x /= 1024;
      i += 1;
    }
    return `${i === 0 ? x : x.toFixed(1)} ${units[i]}`;
  },
  // Nanoseconds since the epoch -> "2026-01-01 00:00:00 UTC"
  time(ns) {
    const n = finite(ns);
    if (n === null || !Number.isFinite(n)) return '—';
    return new Date(n / 1e6).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  },
  // Seconds -> "1 h 02 min", "3 min 20 s", "12.5 s"
  duration(s) {
    const n = finite(s);
    if (n === null || !Number.isFinite(n)) return '—';
    if (n < 60) return `${n.toFixed(n < 10 ? 1 : 0)} s`;
    const m = Math.floor(n / 60);
    if (m < 60) return `${m} min ${String(Math.round(n - m * 60)).padStart(2, '0')} s`;
    const h = Math.floor(m / 60);
    return `${h} h ${String(m - h * 60).padStart(2, '0')} min`;
  },
  text(v) {
    return v === null || v === undefined || v === '' ? '—' : String(v);
  },
};

// The "numbers" disclosure of a chart: <details> with a table, built when
// first opened (a plot's table may have thousands of rows).
// columns: ['step', 'loss'] or [{label, format(v)}]; rows: arrays of cells.
export function chartTable(columns, rows, caption = 'Numbers') {
  const cols = columns.map((c) => (typeof c === 'string' ? { label: c } : c));
  const details = el('details', { class: 'numbers', 'data-testid': 'numbers' }, el('summary', {}, caption));
  let built = false;
  const fill = () => {
    if (built) return;
    built = true;
    const body = el('tbody');
    for (const row of rows) {
      body.append(
        el(
          'tr',
          {},
          row.map((v, i) => {
            const f = cols[i] && cols[i].format;
            const text = f ? f(v) : typeof v === 'number' || num(v) !== null ? fmt.num(v) : fmt.text(v);
            return el('td', {}, text);
          }),
        ),
      );
    }
    details.append(
      el(
        'div',
        { class: 'table-wrap' },
        el('table', {}, el('thead', {}, el('tr', {}, cols.map((c) => el('th', { scope: 'col' }, c.label)))), body),
      ),
    );
  };
  details.addEventListener('toggle', () => details.open && fill());
  details.fill = fill;
  return details;
}

// ---- time series (uPlot) -----------------------------------------------------

const PALETTE = ['#1f5fbf', '#b3261e', '#1b7f3b', '#8a4baf', '#a15c00', '#00707a'];
const SEVERITY_COLOR = { critical: '#b3261e', warning: '#a15c00', info: '#1f5fbf' };
const livePlots = new Set();

function slug(s) {
  return String(s)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

function summarize(title, x, series, markers) {
  if (!x.length) return `${title}: no data`;
  const parts = series.map((s) => {
    const vals = s.values.map(num).filter((v) => v !== null);
    const fin = vals.filter(Number.isFinite);
    const last = vals.length ? fmt.num(vals[vals.length - 1]) : '—';
    const range = fin.length ? `, min ${fmt.num(Math.min(...fin))}, max ${fmt.num(Math.max(...fin))}` : '';
    return `${s.label} last ${last}${range}`;
  });
  const m = markers.length ? `; ${markers.length} marker${markers.length > 1 ? 's' : ''}: ${markers.map((k) => `${k.label} at step ${k.step}`).join(', ')}` : '';
  return `${title}: steps ${x[0]} to ${x[x.length - 1]}; ${parts.join('; ')}${m}`;
}

// The plotted data of a series list: uPlot's columns (non-finite values as
// gaps) and the markers, with one added where a series turns non-finite.
function prepare(x, series, given) {
  const markers = [...(given || [])];
  const seen = new Set(markers.map((m) => m.step));
  const data = [x.map(Number)];
  for (const s of series) {
    const vals = s.values.map(num);
    // One marker where a stretch of non-finite values begins.
    vals.forEach((v, i) => {
      const bad = (w) => w !== null && !Number.isFinite(w);
      if (bad(v) && !(i > 0 && bad(vals[i - 1])) && !seen.has(x[i])) {
        seen.add(x[i]);
        markers.push({ step: x[i], label: `${s.label} ${nonFinite(v)}`, severity: 'critical' });
      }
    });
    data.push(vals.map((v) => (v !== null && Number.isFinite(v) ? v : null)));
  }
  markers.sort((a, b) => a.step - b.step);
  return { data, markers };
}

function markerElements(markers) {
  return markers.map((m) =>
    el(
      'span',
      {
        class: `marker sev-${m.severity || 'info'}`,
        'data-testid': `marker-${m.step}`,
        'data-step': m.step,
        title: `step ${m.step}: ${m.label}`,
      },
      m.label,
    ),
  );
}

// A plot of series over steps with the portal's conventions:
//   timeSeries(container, {title, x: steps, series: [{label, values, color?}],
//     markers: [{step, label, severity}], onZoom(from, to), sync = 'steps', height = 180, log = false})
// Plots of one sync key share the cursor (uPlot.sync) and so the step under it;
// the legend shows the values under the cursor; markers are vertical lines
// drawn on the canvas with their labels as DOM elements (data-testid
// marker-STEP); non-finite values (NaN, Infinity) are gaps marked as such;
// dragging across the plot selects steps and calls onZoom(from, to).
// Returns {figure, plot, update({x, series, markers})}: update() replaces the
// data in place (live pages), keeping the cursor and the zoom.
export function timeSeries(container, opts) {
  const { title, onZoom = null, sync = 'steps', height = 180, log = false } = opts;
  let x = opts.x || [];
  let series = opts.series || [];
  const plotted = (d) => (log ? d.map((col, i) => (i === 0 ? col : col.map((v) => (v !== null && v > 0 ? v : null)))) : d);
  let { data, markers } = prepare(x, series, opts.markers);

  const id = slug(title);
  const figure = el('figure', {
    class: 'chart',
    'data-testid': `chart-${id}`,
    'aria-label': summarize(title, x, series, markers),
  });
  const plotBox = el('div', { class: 'plot', 'aria-hidden': 'true' });
  const table = () => chartTable(['step', ...series.map((s) => s.label)], x.map((step, i) => [step, ...series.map((s) => s.values[i])]), `Numbers: ${title}`);
  let numbers = table();
  figure.append(el('figcaption', {}, title), plotBox, numbers);
  container.append(figure);

  if (!x.length) {
    plotBox.append(el('p', { class: 'empty' }, 'No data in this range.'));
    return { figure, plot: null, update() {} };
  }

  const markerLayer = el('div', { class: 'markers' });
  let markerEls = markerElements(markers);
  markerLayer.append(...markerEls);

  const drawMarkers = (u) => {
    const ctx = u.ctx;
    const { top, height: h } = u.bbox;
    const [lo, hi] = [u.scales.x.min, u.scales.x.max];
    ctx.save();
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
    markers.forEach((m, i) => {
      const elm = markerEls[i];
      if (m.step < lo || m.step > hi) {
        elm.hidden = true;
        return;
      }
      elm.hidden = false;
      const cx = Math.round(u.valToPos(m.step, 'x', true));
      ctx.strokeStyle = SEVERITY_COLOR[m.severity] || SEVERITY_COLOR.info;
      ctx.beginPath();
      ctx.moveTo(cx, top);
      ctx.lineTo(cx, top + h);
      ctx.stroke();
      elm.style.left = `${u.valToPos(m.step, 'x')}px`;
      elm.style.top = `${(i % 3) * 1.4}em`;
    });
    ctx.restore();
  };

  const width = () => Math.max(320, (plotBox.clientWidth || container.clientWidth || 640) - 4);
  const plot = new window.uPlot(
    {
      width: width(),
      height,
      cursor: {
        sync: { key: sync, setSeries: false },
        drag: { x: true, y: false, setScale: !onZoom },
      },
      legend: { live: true },
      // log: a logarithmic y axis (loss, gradient norm: a spike does not flatten the rest).
      scales: log ? { x: { time: false }, y: { distr: 3 } } : { x: { time: false } },
      axes: [
        { label: 'step', stroke: '#333', grid: { stroke: '#e4e4e4' } },
        { stroke: '#333', grid: { stroke: '#e4e4e4' }, size: 64, values: (u, vals) => vals.map((v) => (v === null || v === undefined ? '' : fmt.num(v, 3))) },
      ],
      series: [
        { label: 'step', value: (u, v) => (v === null || v === undefined ? '—' : fmt.int(v)) },
        ...series.map((s, i) => ({
          label: s.label,
          stroke: s.color || PALETTE[i % PALETTE.length],
          width: 1.5,
          spanGaps: false,
          value: (u, v) => (v === null || v === undefined ? '—' : fmt.num(v)),
        })),
      ],
      hooks: {
        draw: [drawMarkers],
        setSelect: [
          (u) => {
            if (!onZoom || u.select.width < 2) return;
            const xs = u.data[0];
            const from = Math.max(xs[0], Math.round(u.posToVal(u.select.left, 'x')));
            const to = Math.min(xs[xs.length - 1], Math.round(u.posToVal(u.select.left + u.select.width, 'x')));
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            if (to > from) onZoom(from, to);
          },
        ],
      },
    },
    plotted(data),
    plotBox,
  );
  plot.over.append(markerLayer);
  livePlots.add(plot);
  if (window.ResizeObserver) {
    const ro = new ResizeObserver(() => {
      if (!plot.root.isConnected) return ro.disconnect();
      const w = width();
      if (Math.abs(w - plot.width) > 8) plot.setSize({ width: w, height });
    });
    ro.observe(plotBox);
    plot.resizeObserver = ro;
  }
  const update = (next) => {
    x = next.x;
    series = next.series;
    ({ data, markers } = prepare(x, series, next.markers));
    markerEls = markerElements(markers);
    markerLayer.replaceChildren(...markerEls);
    figure.setAttribute('aria-label', summarize(title, x, series, markers));
    const fresh = table();
    numbers.replaceWith(fresh);
    numbers = fresh;
    plot.setData(plotted(data), true);
  };
  return { figure, plot, update };
}

function destroyPlots() {
  for (const p of livePlots) {
    if (p.resizeObserver) p.resizeObserver.disconnect();
    p.destroy();
  }
  livePlots.clear();
}

// A status badge: RUNNING, COMPLETED, FAILED, ...
export function statusBadge(status) {
  const s = String(status || 'UNKNOWN').toUpperCase();
  return el('span', { class: `badge status-${s.toLowerCase()}`, 'data-testid': 'status' }, s);
}

// An error in the page (never thrown to the console).
export function errorBox(err) {
  const status = err && err.status ? ` (HTTP ${err.status})` : '';
  return el('div', { class: 'error', role: 'alert', 'data-testid': 'page-error' }, `${err && err.message ? err.message : err}${status}`);
}

// ---- router and navigation -----------------------------------------------------

const GLOBAL_ORDER = ['runs', 'compare', 'lineage', 'evaluations', 'gates'];
const RUN_ORDER = ['run', 'failure', 'ranks', 'timeline'];

function ordered(list, order) {
  const rank = (p) => (order.includes(p.id) ? order.indexOf(p.id) : order.length);
  return [...list].sort((a, b) => rank(a) - rank(b) || a.title.localeCompare(b.title));
}

export const pages = Object.values(pageModules).filter((p) => p && p.route && p.render);
const globalPages = ordered(
  pages.filter((p) => p.scope !== 'run' && p.nav !== false),
  GLOBAL_ORDER,
);
const runPages = ordered(
  pages.filter((p) => p.scope === 'run' && p.nav !== false),
  RUN_ORDER,
);

function pageHref(page, runId) {
  if (page.href) return page.href(runId);
  if (page.scope === 'run') return runHref(runId, page.id === 'run' ? '' : page.id);
  return `#/${page.id}`;
}

// The hash split into its route part and its query.
export function currentRoute() {
  const hash = location.hash || '#/runs';
  const i = hash.indexOf('?');
  return { path: i < 0 ? hash : hash.slice(0, i), query: new URLSearchParams(i < 0 ? '' : hash.slice(i + 1)) };
}

// Sets the hash's query (same route); the page renders again.
export function setQuery(values) {
  const { path, query } = currentRoute();
  const q = Object.fromEntries(query.entries());
  Object.assign(q, values);
  const next = hashOf(path, q);
  if (next !== location.hash) location.hash = next;
}

function decode(s) {
  try {
    return decodeURIComponent(s);
  } catch (e) {
    return s;
  }
}

function match(path) {
  for (const page of pages) {
    const m = page.route.exec(path);
    if (m) return { page, params: m.slice(1).map((c) => (c === undefined ? undefined : decode(c))) };
  }
  return null;
}

let generation = 0;
let liveTimer = null;

function renderNav(active, runId, run) {
  const nav = document.getElementById('nav');
  nav.replaceChildren(
    ...globalPages.map((p) =>
      el('a', { href: pageHref(p), 'aria-current': p === active ? 'page' : null, 'data-testid': `nav-${p.id}` }, p.title),
    ),
  );
  const tabs = document.getElementById('run-tabs');
  if (!runId) {
    tabs.hidden = true;
    tabs.replaceChildren();
    return;
  }
  tabs.hidden = false;
  tabs.replaceChildren(
    el(
      'div',
      { class: 'run-title' },
      el('span', { class: 'run-label' }, 'Run '),
      el('strong', { 'data-testid': 'run-id' }, runId),
      ' ',
      run ? statusBadge(run.status) : null,
    ),
    el(
      'nav',
      { 'aria-label': 'Run pages', class: 'tabs' },
      runPages.map((p) =>
        el('a', { href: pageHref(p, runId), 'aria-current': p === active ? 'page' : null, 'data-testid': `tab-${p.id}` }, p.title),
      ),
    ),
  );
}

async function navigate() {
  const gen = ++generation;
  if (liveTimer) clearInterval(liveTimer);
  liveTimer = null;
  destroyPlots();
  const { path, query } = currentRoute();
  const found = match(path);
  const old = document.getElementById('page');
  const root = el('main', { id: 'page', tabindex: '-1' });
  old.replaceWith(root);
  const body = document.body;
  body.dataset.state = 'loading';
  // The hash this state is of (tests wait for state 'ready' of the current hash).
  body.dataset.hash = location.hash;
  const loading = document.getElementById('loading');
  loading.hidden = false;
  if (!found) {
    body.dataset.page = '';
    renderNav(null, null, null);
    root.append(el('h1', {}, 'Not found'), errorBox(new Error(`no page at ${path}`)), el('p', {}, link('#/runs', 'All runs')));
    loading.hidden = true;
    body.dataset.state = 'error';
    return;
  }
  const { page, params } = found;
  body.dataset.page = page.id;
  const runId = page.scope === 'run' ? params[0] : null;
  renderNav(page, runId, null);
  document.title = `${page.title}${runId ? ' · ' + runId : ''} · runlens`;
  let run = null;
  try {
    const [, r] = await Promise.all([page.render(root, params, query), runId ? api(`/v1/runs/${encodeURIComponent(runId)}`).catch(() => null) : null]);
    run = r;
    if (gen !== generation) return;
    renderNav(page, runId, run);
    body.dataset.state = 'ready';
  } catch (err) {
    if (gen !== generation) return;
    root.append(errorBox(err));
    body.dataset.state = 'error';
  } finally {
    if (gen === generation) loading.hidden = true;
  }
  if (page.refresh && run && String(run.status).toUpperCase() === 'RUNNING') {
    let busy = false;
    liveTimer = setInterval(async () => {
      if (busy || gen !== generation) return;
      busy = true;
      try {
        await page.refresh(root, params, query);
        const r = await api(`/v1/runs/${encodeURIComponent(runId)}`);
        if (gen !== generation) return;
        renderNav(page, runId, r);
        if (String(r.status).toUpperCase() !== 'RUNNING') clearInterval(liveTimer);
      } catch (err) {
        if (gen === generation) root.dataset.refreshError = err.message;
      } finally {
        busy = false;
      }
    }, 2000);
  }
}

function boot() {
  const form = document.getElementById('search');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = document.getElementById('search-q').value.trim();
    if (q) location.hash = hashOf('#/search', { q });
  });
  window.addEventListener('hashchange', navigate);
  // Errors of a page's handlers are shown, not left to the console alone.
  window.addEventListener('unhandledrejection', (e) => {
    const root = document.getElementById('page');
    if (root) root.append(errorBox(e.reason));
  });
  if (!location.hash) history.replaceState(null, '', '#/runs');
  navigate();
}

boot();
