// #/runs: every run with its status, model, GPUs, step, loss, MFU and open
// incidents; filters (experiment, model, status, start time, id search) live in
// the hash's query, so a filtered list is a link; columns sort on click.
import { api, el, fmt, link, num, runHref, setQuery, statusBadge } from '../app.js';

const STATUSES = ['running', 'completed', 'failed', 'aborted'];

// Column: label, the value it sorts by, the cell it shows.
const COLUMNS = [
  { key: 'runId', label: 'Run', value: (r) => r.runId, cell: (r) => link(runHref(r.runId), r.runId, { 'data-testid': 'run-link' }) },
  { key: 'status', label: 'Status', value: (r) => r.status, cell: (r) => statusBadge(r.status) },
  {
    key: 'model',
    label: 'Model',
    value: (r) => `${r.modelId || ''} ${r.modelVersion || ''}`,
    cell: (r) => [fmt.text(r.modelId), r.modelVersion ? el('span', { class: 'muted' }, ` ${r.modelVersion}`) : null],
  },
  { key: 'experimentId', label: 'Experiment', value: (r) => r.experimentId || '', cell: (r) => fmt.text(r.experimentId) },
  { key: 'gpus', label: 'GPUs', num: true, value: (r) => num(r.gpus ?? r.worldSize), cell: (r) => fmt.int(r.gpus ?? r.worldSize) },
  { key: 'step', label: 'Step', num: true, value: (r) => num(r.step), cell: (r) => fmt.int(r.step) },
  { key: 'loss', label: 'Loss', num: true, value: (r) => num(r.loss), cell: (r) => fmt.num(r.loss) },
  { key: 'mfu', label: 'MFU', num: true, value: (r) => num(r.mfu), cell: (r) => fmt.pct(r.mfu) },
  { key: 'tokensPerSecond', label: 'Tokens/s', num: true, value: (r) => num(r.tokensPerSecond), cell: (r) => fmt.si(r.tokensPerSecond) },
  {
    key: 'openIncidents',
    label: 'Open incidents',
    num: true,
    value: (r) => num(r.openIncidents),
    cell: (r) => {
      const n = num(r.openIncidents);
      if (n === null) return '—';
      return n > 0 ? link(runHref(r.runId, 'failure'), String(n), { class: 'sev-critical', 'data-testid': 'open-incidents' }) : '0';
    },
  },
  { key: 'startTimeNs', label: 'Started', num: true, value: (r) => num(r.startTimeNs), cell: (r) => fmt.time(r.startTimeNs) },
];

// datetime-local (UTC) <-> nanoseconds since the epoch.
function nsToInput(ns) {
  const n = num(ns);
  if (n === null) return '';
  return new Date(n / 1e6).toISOString().slice(0, 16);
}
function inputToNs(v) {
  if (!v) return '';
  const ms = Date.parse(`${v}:00Z`);
  return Number.isNaN(ms) ? '' : String(BigInt(ms) * 1000000n);
}

function compare(a, b, numeric) {
  const missing = (v) => v === null || v === undefined || v === '' || (typeof v === 'number' && Number.isNaN(v));
  if (missing(a) && missing(b)) return 0;
  if (missing(a)) return 1;  // missing values last, whichever the direction
  if (missing(b)) return -1;
  return numeric ? a - b : String(a).localeCompare(String(b));
}

function select(name, label, options, current) {
  return el(
    'label',
    {},
    label,
    el(
      'select',
      { name, 'data-testid': `filter-${name}`, onchange: (e) => setQuery({ [name]: e.target.value }) },
      el('option', { value: '' }, 'all'),
      options.map((o) => el('option', { value: o, selected: o === current }, o)),
    ),
  );
}

export default {
  id: 'runs',
  title: 'Runs',
  scope: 'global',
  route: /^#\/(?:runs)?$/,

  async render(root, params, query) {
    const filters = {};
    for (const k of ['experiment', 'model', 'status', 'since', 'until', 'q']) if (query.get(k)) filters[k] = query.get(k);
    const sort = query.get('sort') || 'startTimeNs';
    const desc = (query.get('dir') || (query.get('sort') ? 'asc' : 'desc')) === 'desc';

    const [all, list] = await Promise.all([
      api('/v1/runs?limit=1000'),
      api(`/v1/runs?${new URLSearchParams({ ...filters, limit: '1000' })}`),
    ]);
    const experiments = [...new Set(all.runs.map((r) => r.experimentId).filter(Boolean))].sort();
    const models = [...new Set(all.runs.map((r) => r.modelId).filter(Boolean))].sort();

    root.append(el('h1', {}, 'Runs'));
    const form = el(
      'form',
      {
        class: 'filters',
        'aria-label': 'Filter runs',
        'data-testid': 'run-filters',
        onsubmit: (e) => {
          e.preventDefault();
          const f = new FormData(e.target);
          setQuery({ q: f.get('q'), since: inputToNs(f.get('since')), until: inputToNs(f.get('until')) });
        },
      },
      select('experiment', 'Experiment', experiments, filters.experiment),
      select('model', 'Model', models, filters.model),
      select('status', 'Status', STATUSES, (filters.status || '').toLowerCase()),
      el('label', {}, 'Started after (UTC)', el('input', { type: 'datetime-local', name: 'since', value: nsToInput(filters.since), 'data-testid': 'filter-since' })),
      el('label', {}, 'Started before (UTC)', el('input', { type: 'datetime-local', name: 'until', value: nsToInput(filters.until), 'data-testid': 'filter-until' })),
      el('label', {}, 'Id contains', el('input', { type: 'search', name: 'q', value: filters.q || '', placeholder: 'run, job, experiment, model', 'data-testid': 'filter-q' })),
      el('button', { type: 'submit' }, 'Apply'),
      Object.keys(filters).length ? link('#/runs', 'Clear filters', { 'data-testid': 'clear-filters' }) : null,
    );
    root.append(form);

    const col = COLUMNS.find((c) => c.key === sort) || COLUMNS.find((c) => c.key === 'startTimeNs');
    const rows = [...list.runs].sort((a, b) => {
      const c = compare(col.value(a), col.value(b), col.num);
      return (desc ? -c : c) || a.runId.localeCompare(b.runId);
    });

    root.append(
      el('p', { class: 'muted', 'data-testid': 'run-count' }, `${rows.length} run${rows.length === 1 ? '' : 's'}${Object.keys(filters).length ? ' matching the filters' : ''}`),
    );
    if (!rows.length) {
      root.append(el('p', { class: 'empty' }, 'No runs match.'));
      return;
    }
    const head = el(
      'tr',
      {},
      COLUMNS.map((c) => {
        const active = c.key === col.key;
        return el(
          'th',
          { scope: 'col', class: c.num ? 'num' : null, 'aria-sort': active ? (desc ? 'descending' : 'ascending') : 'none' },
          el(
            'button',
            {
              type: 'button',
              class: 'sort',
              'data-testid': `sort-${c.key}`,
              'aria-pressed': active ? 'true' : 'false',
              onclick: () => setQuery({ sort: c.key, dir: active && !desc ? 'desc' : 'asc' }),
            },
            c.label,
            active ? (desc ? ' ▼' : ' ▲') : '',
          ),
        );
      }),
    );
    const body = el(
      'tbody',
      {},
      rows.map((r) =>
        el(
          'tr',
          {
            class: String(r.status).toUpperCase() === 'FAILED' ? 'failed' : null,
            'data-testid': 'run-row',
            'data-run': r.runId,
            'data-status': String(r.status).toUpperCase(),
          },
          COLUMNS.map((c) => el('td', { class: c.num ? 'num' : null }, c.cell(r))),
        ),
      ),
    );
    root.append(el('div', { class: 'table-wrap tall' }, el('table', { 'data-testid': 'runs-table' }, el('thead', {}, head), body)));
  },
};
