// #/runs/ID/timeline?from=A&to=B: the correlated timeline of spec section 41
// between two steps: steps' checkpoints, config changes, alerts and their
// diagnoses inline with their severity, each linking to the rank page and to
// the lineage of its node and GPU.
import { api, el, fmt, hashOf, link, num, runHref, setQuery } from '../app.js';

function rankLink(runId, rank) {
  return link(hashOf(runHref(runId, 'ranks'), { rank }), `rank ${rank}`, { 'data-testid': 'rank-link', 'data-rank': rank });
}

function lineageLink(id, text, testid) {
  return link(`#/lineage/${encodeURIComponent(id)}`, text, { 'data-testid': testid });
}

function label(e) {
  const d = e.detail || {};
  if (e.kind === 'alert' && d.alert_kind) return d.alert_kind.replace(/_/g, ' ');
  if (e.kind === 'diagnosis') return d.symptom ? `diagnosis of ${d.symptom.replace(/_/g, ' ')}` : 'diagnosis';
  return e.kind.replace(/_/g, ' ');
}

function eventItem(runId, e) {
  const d = e.detail || {};
  const links = [];
  if (d.rank !== undefined && d.rank !== null) links.push(rankLink(runId, d.rank));
  if (d.node) links.push(lineageLink(d.node, d.node, 'node-link'));
  if (d.node && d.gpu !== undefined && d.gpu !== null) links.push(lineageLink(`${d.node}/${d.gpu}`, `GPU ${d.gpu}`, 'gpu-link'));
  return el(
    'li',
    { class: `event kind-${e.kind}`, 'data-testid': 'timeline-event', 'data-kind': e.kind, 'data-alert-kind': d.alert_kind || '', 'data-step': e.step ?? '', 'data-rank': d.rank ?? '' },
    el('span', { class: 'step' }, e.step === null || e.step === undefined ? '—' : `step ${e.step}`),
    el('span', { class: `badge sev-${e.severity}` }, e.severity),
    ' ',
    el('strong', {}, label(e)),
    d.revision ? el('span', { class: 'muted' }, ` (revision ${d.revision})`) : null,
    ' ',
    el('span', { class: 'summary' }, e.summary),
    links.length ? el('span', { class: 'links' }, ' · ', links.flatMap((l, i) => (i ? [' · ', l] : [l]))) : null,
    el('div', { class: 'muted small' }, fmt.time(e.timeNs)),
  );
}

export default {
  id: 'timeline',
  title: 'Timeline',
  scope: 'run',
  route: /^#\/runs\/([^/?]+)\/timeline$/,

  async render(root, [runId], query) {
    const from = num(query.get('from'));
    const to = num(query.get('to'));
    const q = new URLSearchParams({ limit: '2000' });
    if (Number.isInteger(from)) q.set('fromStep', String(from));
    if (Number.isInteger(to)) q.set('toStep', String(to));
    const t = await api(`/v1/runs/${encodeURIComponent(runId)}/timeline?${q}`);
    const events = [...(t.events || [])].sort((a, b) => (a.step ?? -1) - (b.step ?? -1) || a.timeNs - b.timeNs);

    root.append(el('h1', {}, `Timeline: ${runId}`));
    root.append(
      el(
        'form',
        {
          class: 'filters',
          'aria-label': 'Step range',
          onsubmit: (e) => {
            e.preventDefault();
            const f = new FormData(e.target);
            setQuery({ from: f.get('from'), to: f.get('to') });
          },
        },
        el('label', {}, 'From step', el('input', { type: 'number', min: '0', name: 'from', value: Number.isInteger(from) ? from : '', 'data-testid': 'timeline-from' })),
        el('label', {}, 'To step', el('input', { type: 'number', min: '0', name: 'to', value: Number.isInteger(to) ? to : '', 'data-testid': 'timeline-to' })),
        el('button', { type: 'submit' }, 'Show'),
      ),
    );
    const span = t.fromStep !== null && t.fromStep !== undefined ? `steps ${t.fromStep} to ${t.toStep}` : 'the whole run';
    const alerts = events.filter((e) => e.kind === 'alert').length;
    const diagnoses = events.filter((e) => e.kind === 'diagnosis').length;
    root.append(el('p', { class: 'muted', 'data-testid': 'timeline-summary' }, `${events.length} events in ${span}: ${alerts} alert${alerts === 1 ? '' : 's'}, ${diagnoses} diagnos${diagnoses === 1 ? 'is' : 'es'}.`));
    if (!events.length) {
      root.append(el('p', { class: 'empty' }, 'Nothing happened in this range.'));
      return;
    }
    root.append(el('ol', { class: 'events timeline', 'data-testid': 'timeline' }, events.map((e) => eventItem(runId, e))));
  },
};
