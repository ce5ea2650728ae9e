// #/gates: the quality-gate policies `runlens serve --gates DIR` loaded
// (GET /v1/gates: name, file, version, suite, description, alpha, gated
// metrics) and the problems of the files it refused (FILE:LINE:COL: ...).
// A gate's decisions are on the pages of the model versions they judged.
import { api, el, fmt, link } from '../app.js';
import { useEvalStyle } from './eval-common.js';

export default {
  id: 'gates',
  title: 'Gates',
  scope: 'global',
  route: /^#\/gates$/,

  async render(root) {
    useEvalStyle();
    const res = await api('/v1/gates');
    const gates = res.gates || [];
    const problems = res.problems || [];
    root.append(el('h1', {}, 'Quality gates'));
    root.append(
      el(
        'p',
        {},
        `${gates.length} ${gates.length === 1 ? 'policy' : 'policies'} loaded. A gate decides whether a candidate `,
        'evaluation may be promoted over a baseline; its decisions are listed on each model version\u2019s page (',
        link('#/evaluations', 'evaluations'),
        ').',
      ),
    );
    if (gates.length === 0) root.append(el('p', { 'data-testid': 'gates-none' }, 'No gate policy loaded (runlens serve --gates DIR).'));
    else {
      const head = el('tr', {}, ...['gate', 'version', 'suite', 'alpha', 'gated metrics', 'file', 'description'].map((h) => el('th', { scope: 'col' }, h)));
      const body = gates.map((g) =>
        el(
          'tr',
          { 'data-testid': 'gate-row', 'data-gate': g.name },
          el('td', {}, el('strong', {}, g.name)),
          el('td', {}, fmt.text(g.version)),
          el('td', {}, link(`#/evaluations?benchmark=${encodeURIComponent(g.suite || '')}`, g.suite || '—')),
          el('td', { class: 'num' }, fmt.num(g.alpha)),
          el('td', { 'data-testid': 'gate-metrics' }, (g.metrics || []).join(', ') || '—'),
          el('td', {}, el('code', {}, g.file || '—')),
          el('td', {}, g.description || ''),
        ),
      );
      root.append(el('div', { class: 'table-wrap' }, el('table', { 'data-testid': 'gates-table' }, el('caption', {}, 'Gate policies'), el('thead', {}, head), el('tbody', {}, ...body))));
    }
    root.append(el('h2', {}, 'Problems'));
    if (problems.length === 0) root.append(el('p', { 'data-testid': 'gate-problems-none' }, 'Every gate file loaded.'));
    else root.append(el('ul', { 'data-testid': 'gate-problems' }, ...problems.map((p) => el('li', {}, el('code', {}, p)))));
  },
};
