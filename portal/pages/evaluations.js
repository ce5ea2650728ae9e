// #/evaluations[?modelVersion=&status=&benchmark=]: GET /v1/evaluations as a
// table (id, model version, checkpoint, suite and benchmark, status, main
// metrics), the filters in the hash query (a filtered list is a link). The
// list's summaries carry no metrics: they come from the model versions'
// pages (GET /v1/models/M/versions/V: summary + metrics), one request per
// distinct version shown (at most MAX_VERSIONS).
import { api, el, fmt, link, setQuery, statusBadge } from '../app.js';
import { evaluationHref, lineageHref, metricsLine, modelVersionHref, useEvalStyle } from './eval-common.js';

const STATUSES = ['QUEUED', 'RUNNING', 'COMPLETED', 'PARTIAL', 'FAILED', 'CACHED'];
const MAX_VERSIONS = 50;

function splitVersion(mv) {
  const i = String(mv || '').lastIndexOf(':');
  return i <= 0 ? null : [mv.slice(0, i), mv.slice(i + 1)];
}

async function metricsByEvaluation(evaluations) {
  const versions = [...new Set(evaluations.map((e) => e.modelVersion).filter((mv) => splitVersion(mv)))].slice(0, MAX_VERSIONS);
  const out = new Map();
  const answers = await Promise.all(
    versions.map((mv) => {
      const [m, v] = splitVersion(mv);
      return api(`/v1/models/${encodeURIComponent(m)}/versions/${encodeURIComponent(v)}`).catch(() => null);
    }),
  );
  for (const a of answers) for (const e of (a && a.evaluations) || []) out.set(e.evaluationId, e.metrics || []);
  return out;
}

export default {
  id: 'evaluations',
  title: 'Evaluations',
  scope: 'global',
  route: /^#\/evaluations$/,

  async render(root, params, query) {
    useEvalStyle();
    const filters = {
      modelVersion: (query.get('modelVersion') || '').trim(),
      status: (query.get('status') || '').trim().toUpperCase(),
      benchmark: (query.get('benchmark') || '').trim(),
    };
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    const res = await api(`/v1/evaluations${q.toString() ? '?' + q : ''}`);
    const evaluations = res.evaluations || [];
    const metrics = await metricsByEvaluation(evaluations);

    root.append(el('h1', {}, 'Evaluations'));
    const text = (name, label, placeholder) =>
      el(
        'label',
        {},
        label,
        ' ',
        el('input', {
          type: 'text',
          value: filters[name],
          placeholder,
          'data-testid': `filter-${name}`,
          onchange: (e) => setQuery({ [name]: e.target.value.trim() }),
        }),
      );
    root.append(
      el(
        'form',
        {
          class: 'filters-bar',
          'aria-label': 'Filters',
          // Enter in a text field applies both text filters.
          onsubmit: (e) => {
            e.preventDefault();
            const value = (name) => e.target.querySelector(`[data-testid=filter-${name}]`).value.trim();
            setQuery({ modelVersion: value('modelVersion'), benchmark: value('benchmark') });
          },
        },
        text('modelVersion', 'Model version', 'MODEL:VERSION'),
        text('benchmark', 'Benchmark', 'sklearn-digits'),
        el(
          'label',
          {},
          'Status ',
          el(
            'select',
            { 'data-testid': 'filter-status', onchange: (e) => setQuery({ status: e.target.value }) },
            el('option', { value: '', selected: !filters.status }, 'any'),
            STATUSES.map((s) => el('option', { value: s, selected: filters.status === s }, s)),
          ),
        ),
        el('button', { type: 'submit', 'data-testid': 'filter-apply' }, 'Apply'),
        Object.values(filters).some(Boolean) ? link('#/evaluations', 'Clear filters', { 'data-testid': 'clear-filters' }) : null,
      ),
    );
    root.append(el('p', { class: 'muted', 'data-testid': 'evaluation-count' }, `${evaluations.length} evaluation${evaluations.length === 1 ? '' : 's'}`));
    if (!evaluations.length) {
      root.append(el('p', { class: 'empty' }, 'No evaluation matches. Evaluations are submitted with runlens eval submit, or when a checkpoint is registered.'));
      return;
    }
    root.append(
      el(
        'div',
        { class: 'table-wrap' },
        el(
          'table',
          { 'data-testid': 'evaluations-table' },
          el('thead', {}, el('tr', {}, ['Evaluation', 'Model version', 'Checkpoint', 'Suite / benchmark', 'Status', 'Metrics', 'Completed'].map((h) => el('th', { scope: 'col' }, h)))),
          el(
            'tbody',
            {},
            evaluations.map((e) =>
              el(
                'tr',
                { 'data-testid': `evaluation-row-${e.evaluationId}`, 'data-status': e.status },
                el('td', {}, link(evaluationHref(e.evaluationId), e.evaluationId, { class: 'eval-id', 'data-testid': 'evaluation-link' })),
                el('td', {}, e.modelVersion ? link(modelVersionHref(e.modelVersion), e.modelVersion) : '—'),
                el('td', {}, e.checkpointId ? link(lineageHref(e.checkpointId), e.checkpointId) : '—'),
                el('td', {}, fmt.text(e.benchmarkSuite), el('br'), el('span', { class: 'muted' }, `${fmt.text(e.benchmark)} ${e.benchmarkVersion || ''}`)),
                el('td', {}, statusBadge(e.status), e.cachedFrom ? el('span', { class: 'muted' }, ' from ', link(evaluationHref(e.cachedFrom), e.cachedFrom)) : null),
                el('td', { 'data-testid': 'evaluation-metrics' }, metrics.has(e.evaluationId) ? metricsLine(metrics.get(e.evaluationId)) : '—'),
                el('td', {}, fmt.text(e.completedAt)),
              ),
            ),
          ),
        ),
      ),
    );
  },
};
