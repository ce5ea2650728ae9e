// #/models/MODEL/versions/VERSION: a model version (GET
// /v1/models/M/versions/V): its status, checkpoint and run, its evaluations,
// its gate decisions (verdict PASS/FAIL colored, reasons, the gated metrics),
// the promotion audit (.../audit) and the regression walk's conclusion
// (.../explain) against the model's production version. explain answers 409
// when there is nothing to compare with; the page asks only when there is
// (a production version other than this one, found through the model's
// lineage and its versions' audits) and says why not otherwise, so no
// request fails.
import { api, el, fmt, link, runHref, statusBadge } from '../app.js';
import { evaluationHref, lineageHref, metricsLine, modelVersionHref, useEvalStyle, verdictBadge } from './eval-common.js';

const MAX_VERSIONS = 50;

function section(id, heading, ...children) {
  return el('section', { 'aria-labelledby': `h-${id}`, 'data-testid': `mv-${id}` }, el('h2', { id: `h-${id}` }, heading), ...children);
}

function table(testid, headers, rows) {
  return el(
    'div',
    { class: 'table-wrap' },
    el('table', { 'data-testid': testid }, el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))), el('tbody', {}, rows)),
  );
}

// The model's production version (MODEL:VERSION) other than `self`, or null.
async function productionVersion(model, self) {
  const lineage = await api(`/v1/lineage/${encodeURIComponent(model)}`).catch(() => null);
  const versions = new Set();
  const walk = (n) => {
    if (!n) return;
    if (n.type === 'model_version' && n.attrs && n.attrs.model_id === model && n.attrs.model_version) versions.add(n.attrs.model_version);
    (n.children || []).forEach(walk);
  };
  ((lineage && lineage.matches) || []).forEach(walk);
  versions.delete(self);
  const audits = await Promise.all(
    [...versions].slice(0, MAX_VERSIONS).map((v) => api(`/v1/models/${encodeURIComponent(model)}/versions/${encodeURIComponent(v)}/audit`).catch(() => null)),
  );
  const prod = audits.find((a) => a && a.status === 'production');
  return prod ? prod.modelVersion : null;
}

function gateDecision(g) {
  const fail = String(g.verdict).toUpperCase() !== 'PASS';
  return el(
    'div',
    { class: `gate ${fail ? 'fail' : 'pass'}`, 'data-testid': `gate-${g.gateId}`, 'data-verdict': g.verdict },
    el(
      'p',
      {},
      verdictBadge(g.verdict, { 'data-testid': 'gate-verdict' }),
      ' ',
      el('strong', {}, `${g.policy} v${g.policyVersion}`),
      ` · ${g.gateId} · ${fmt.time(g.decidedNs)} · candidate `,
      link(evaluationHref(g.candidateEvaluation), g.candidateEvaluation),
      ' against baseline ',
      g.baselineEvaluation ? link(evaluationHref(g.baselineEvaluation), g.baselineEvaluation) : '—',
      g.hardFailure ? el('strong', { class: 'sev-critical' }, ' · hard failure') : null,
    ),
    g.refused ? el('p', { class: 'sev-warning' }, `Refused: ${g.refused}`) : null,
    el('ul', { 'data-testid': 'gate-reasons' }, (g.reasons || []).map((r) => el('li', {}, r))),
    (g.metrics || []).length
      ? table(
          'gate-metrics',
          ['metric', 'dimension', 'method', 'n', 'candidate', 'baseline', 'difference', 'bounds', 'margin', 'verdict'],
          g.metrics.map((m) =>
            el(
              'tr',
              { title: m.reason || '' },
              el('th', { scope: 'row' }, m.metric),
              el('td', {}, fmt.text(m.dimension)),
              el('td', {}, fmt.text(m.method)),
              el('td', {}, fmt.int(m.n)),
              el('td', {}, fmt.num(m.candidate)),
              el('td', {}, fmt.num(m.baseline)),
              el('td', {}, fmt.num(m.difference)),
              el('td', {}, `${fmt.num(m.lower)} to ${fmt.num(m.upper)}`),
              el('td', {}, fmt.num(m.margin)),
              el('td', {}, verdictBadge(m.verdict)),
            ),
          ),
        )
      : null,
  );
}

export default {
  id: 'model-version',
  title: 'Model version',
  scope: 'global',
  nav: false,
  route: /^#\/models\/([^/?]+)\/versions\/([^/?]+)$/,

  async render(root, [model, version]) {
    useEvalStyle();
    const base = `/v1/models/${encodeURIComponent(model)}/versions/${encodeURIComponent(version)}`;
    const [mv, audit] = await Promise.all([api(base), api(`${base}/audit`)]);
    const evaluations = mv.evaluations || [];

    root.append(
      el('h1', {}, 'Model version ', el('span', { 'data-testid': 'mv-id' }, mv.modelVersion)),
      el(
        'p',
        {},
        statusBadge(mv.status),
        ' · checkpoint ',
        mv.checkpointId ? link(lineageHref(mv.checkpointId), mv.checkpointId, { 'data-testid': 'mv-checkpoint' }) : '—',
        ' · run ',
        mv.runId ? link(runHref(mv.runId), mv.runId, { 'data-testid': 'mv-run' }) : '—',
        ` · registered ${fmt.time(mv.createdNs)} · `,
        link(lineageHref(mv.modelVersion), 'lineage'),
        ' · ',
        link(`#/evaluations?modelVersion=${encodeURIComponent(mv.modelVersion)}`, 'its evaluations in the list'),
      ),
    );

    root.append(
      section(
        'evaluations',
        'Evaluations',
        evaluations.length
          ? table(
              'mv-evaluations-table',
              ['evaluation', 'suite / benchmark', 'status', 'metrics', 'completed'],
              evaluations.map((e) =>
                el(
                  'tr',
                  { 'data-testid': `mv-evaluation-${e.evaluationId}` },
                  el('td', {}, link(evaluationHref(e.evaluationId), e.evaluationId, { class: 'eval-id' })),
                  el('td', {}, `${fmt.text(e.benchmarkSuite)} (${fmt.text(e.benchmark)})`),
                  el('td', {}, statusBadge(e.status)),
                  el('td', {}, metricsLine(e.metrics)),
                  el('td', {}, fmt.text(e.completedAt)),
                ),
              ),
            )
          : el('p', { class: 'empty' }, 'No evaluation of this version yet.'),
      ),
    );

    const gates = mv.gates || [];
    root.append(
      section(
        'gates',
        'Gate decisions',
        gates.length ? gates.map(gateDecision) : el('p', { class: 'empty', 'data-testid': 'mv-no-gates' }, 'No gate decision for this version.'),
      ),
    );

    const records = audit.audit || [];
    root.append(
      section(
        'audit',
        'Promotion audit',
        records.length
          ? table(
              'mv-audit-table',
              ['when', 'from', 'to', 'who', 'gate decision', 'reason'],
              records.map((r) =>
                el(
                  'tr',
                  {},
                  el('td', {}, fmt.time(r.atNs)),
                  el('td', {}, fmt.text(r.from)),
                  el('td', {}, fmt.text(r.to)),
                  el('td', {}, fmt.text(r.user)),
                  el('td', {}, fmt.text(r.gateId)),
                  el('td', {}, fmt.text(r.reason)),
                ),
              ),
            )
          : el('p', { class: 'empty' }, 'Never promoted: its status is as registered.'),
      ),
    );

    // The regression walk, when there is something to walk against.
    const explain = section('explain', 'Regression walk');
    root.append(explain);
    const say = (text) => explain.append(el('p', { class: 'muted', 'data-testid': 'mv-explain-note' }, text));
    if (String(mv.status) === 'production') return say(`${mv.modelVersion} is the production version: there is no baseline to walk from.`);
    if (!evaluations.length) return say('No evaluation of this version yet: nothing to compare.');
    const prod = await productionVersion(model, version);
    if (!prod) return say(`${model} has no production version to compare with.`);
    // Still refused (e.g. no evaluation of a suite both have): said in the section, the rest of the page stands.
    let x;
    try {
      x = await api(`${base}/explain`);
    } catch (err) {
      return say(`No regression walk: ${err.message}`);
    }
    const walk = x.walk || [];
    explain.append(
      el('p', {}, 'Against the production version ', link(modelVersionHref(x.baseline || prod), x.baseline || prod, { 'data-testid': 'mv-explain-baseline' }), ':'),
      el('ul', { 'data-testid': 'mv-explain-conclusion' }, (x.conclusion || []).map((c) => el('li', {}, c))),
    );
    if (!walk.length) return;
    explain.append(
      el(
        'details',
        {},
        el('summary', {}, 'The walk'),
        el('ol', { class: 'walk', 'data-testid': 'mv-explain-walk' }, walk.map((w) => el('li', {}, el('span', { class: 'level' }, w.level), ' ', el('strong', {}, w.id), ': ', w.summary))),
      ),
    );
  },
};
