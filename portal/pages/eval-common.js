// Shared by the evaluation pages (evaluations.js, evaluation.js,
// model-version.js): their links, the PASS/FAIL badge of a gate decision, a
// metric with its interval, and their stylesheet (pages/eval.css).
import { el, fmt, num, useStylesheet } from '../app.js';

export function useEvalStyle() {
  useStylesheet(new URL('./eval.css', import.meta.url).href);
}

export function evaluationHref(id) {
  return `#/evaluations/${encodeURIComponent(id)}`;
}

// MODEL:VERSION -> #/models/MODEL/versions/VERSION (the model id may hold ':'; the version is after the last one).
export function modelVersionHref(modelVersion) {
  const s = String(modelVersion || '');
  const i = s.lastIndexOf(':');
  if (i <= 0) return `#/lineage/${encodeURIComponent(s)}`;
  return `#/models/${encodeURIComponent(s.slice(0, i))}/versions/${encodeURIComponent(s.slice(i + 1))}`;
}

export function lineageHref(id) {
  return `#/lineage/${encodeURIComponent(id)}`;
}

// A gate verdict: PASS green, FAIL red, anything else (refused, ...) neutral.
export function verdictBadge(verdict, attrs = {}) {
  const v = String(verdict || 'UNKNOWN').toUpperCase();
  const cls = v === 'PASS' ? 'pass' : v === 'FAIL' ? 'fail' : 'other';
  return el('span', { class: `gate-verdict gate-${cls}`, ...attrs }, v);
}

// "0.95 ± 0.022 (95 % CI 0.928 to 0.972)": the normal interval of the stored standard error.
export function interval(m) {
  const v = num(m.value);
  const se = num(m.stdError);
  if (v === null || se === null || !Number.isFinite(v) || !Number.isFinite(se)) return '—';
  return `${fmt.num(v - 1.96 * se)} to ${fmt.num(v + 1.96 * se)}`;
}

// "accuracy 0.5, f1 0.5" of an evaluation's metrics (the main ones: the first few).
export function metricsLine(metrics, max = 4) {
  const ms = metrics || [];
  if (!ms.length) return '—';
  const parts = ms.slice(0, max).map((m) => `${m.name} ${fmt.num(m.value)}`);
  return ms.length > max ? `${parts.join(', ')}, …` : parts.join(', ');
}
