// #/search?q=ID: what an id names (run, job, model version, checkpoint, node,
// GPU, dataset version, evaluation, ...; GET /v1/search), each with the runs
// it belongs to. A single run match opens the run.
import { api, el, link, runHref } from '../app.js';

// Where a match of each type is shown best.
function target(m) {
  if (m.type === 'run') return runHref(m.id);
  if (m.type === 'evaluation') return `#/evaluations/${encodeURIComponent(m.id)}`;
  if (m.type === 'model_version' && m.id.lastIndexOf(':') > 0) {
    const i = m.id.lastIndexOf(':');
    return `#/models/${encodeURIComponent(m.id.slice(0, i))}/versions/${encodeURIComponent(m.id.slice(i + 1))}`;
  }
  return `#/lineage/${encodeURIComponent(m.id)}`;
}

export default {
  id: 'search',
  title: 'Search',
  scope: 'global',
  nav: false,
  route: /^#\/search$/,

  async render(root, params, query) {
    const q = (query.get('q') || '').trim();
    const input = document.getElementById('search-q');
    if (input && input.value !== q) input.value = q;
    root.append(el('h1', {}, 'Search'));
    if (!q) {
      root.append(el('p', { class: 'empty' }, 'Type an id in the search box: a run, job, model version, checkpoint, node, GPU, dataset version or evaluation.'));
      return;
    }
    const res = await api(`/v1/search?${new URLSearchParams({ q })}`);
    const matches = res.matches || [];
    if (matches.length === 1 && matches[0].type === 'run' && matches[0].id === q) {
      location.replace(runHref(q));
      return;
    }
    root.append(el('p', { class: 'muted', 'data-testid': 'search-count' }, `${matches.length} match${matches.length === 1 ? '' : 'es'} for “${q}”`));
    if (!matches.length) return;
    root.append(
      el(
        'table',
        { 'data-testid': 'search-results' },
        el('thead', {}, el('tr', {}, ['Type', 'Id', 'Runs'].map((h) => el('th', { scope: 'col' }, h)))),
        el(
          'tbody',
          {},
          matches.map((m) =>
            el(
              'tr',
              { 'data-testid': 'search-match', 'data-type': m.type },
              el('td', {}, m.type.replace(/_/g, ' ')),
              el('td', {}, link(target(m), m.label || m.id)),
              el('td', {}, (m.runIds || []).flatMap((r, i) => [i ? ', ' : '', link(runHref(r), r)])),
            ),
          ),
        ),
      ),
    );
  },
};
