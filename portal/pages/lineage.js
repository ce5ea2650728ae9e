// Lineage (section 22): the run graph around any entity, /v1/lineage/ID,
// drawn as a layered left-to-right SVG graph: experiment → run → dataset,
// code, config → checkpoints → model version → evaluations; cluster → node →
// GPU → rank. Columns come from the entity's type (so the direction reads the
// same whichever entity is at the centre), rows from the order the tree is
// walked (siblings stay together). Large fan-outs (40 checkpoints, 1024 GPUs)
// show their first few and a "+N more" button that expands them. Nodes are
// links: to their own lineage (re-centring the graph), a GPU or rank to the
// rank's drill-down. The same tree is a nested list under "As a list".
import { api, el, svg, link, fmt, runHref, hashOf } from '../app.js';
import { useViewsStyle } from './views-style.js';

// Column of each entity type, left to right.
const COLUMN = {
  experiment: 0,
  job: 0,
  training_run: 1,
  dataset_version: 2,
  code_commit: 2,
  config: 2,
  model: 2,
  cluster: 2,
  incident: 2,
  alert: 3,
  checkpoint: 3,
  node: 3,
  artifact: 4,
  model_version: 4,
  gpu: 4,
  evaluation: 5,
  rank: 5,
};
const LABEL = {
  training_run: 'run',
  dataset_version: 'dataset',
  code_commit: 'code',
  model_version: 'model version',
};
// Types that /v1/lineage cannot look up (no re-centring on them).
const NO_LINEAGE = new Set(['config', 'gpu', 'rank', 'cluster']);
// Children of one type shown per parent before "+N more".
const FANOUT = { gpu: 2, node: 3, checkpoint: 3, training_run: 6 };
const FANOUT_DEFAULT = 4;
// Children of the entity at the centre: all GPUs of a node.
const ROOT_FANOUT = { gpu: 64, training_run: 8 };

const NODE_W = 184;
const NODE_H = 38;
const COL_GAP = 70;
const ROW_GAP = 12;
const PAD = 16;

function typeLabel(t) {
  return LABEL[t] || t.replace(/_/g, ' ');
}

function short(id, n = 24) {
  const s = String(id);
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

// The tree with a rank node under every GPU that names one.
function withRanks(node) {
  const children = (node.children || []).map(withRanks);
  if (node.type === 'gpu' && node.attrs && node.attrs.rank !== undefined && node.attrs.rank !== null) {
    children.push({ type: 'rank', id: String(node.attrs.rank), attrs: { rank: node.attrs.rank }, children: [] });
  }
  return { ...node, children };
}

// The run a subtree belongs to (for GPU and rank links).
function runOf(path) {
  for (let i = path.length - 1; i >= 0; i--) if (path[i].type === 'training_run') return path[i].id;
  return null;
}

// Where a node leads: its lineage, or a page.
function hrefOf(node, run) {
  if (node.type === 'rank' || node.type === 'gpu') {
    const r = node.type === 'rank' ? node.attrs.rank : node.attrs && node.attrs.rank;
    return run && r !== undefined && r !== null ? hashOf(runHref(run, 'ranks'), { rank: r }) : null;
  }
  if (NO_LINEAGE.has(node.type)) return null;
  return `#/lineage/${encodeURIComponent(node.id)}`;
}

function pageOf(node) {
  if (node.type === 'training_run') return { href: runHref(node.id), text: 'Run page' };
  if (node.type === 'incident' || node.type === 'alert') {
    const run = node.attrs && (node.attrs.run_id || node.attrs.runId);
    if (run) return { href: runHref(run, 'failure'), text: 'Failure page' };
  }
  return null;
}

// Lays the tree out: nodes [{key, type, id, attrs, col, row, href, more}], edges [[from, to]].
function layout(root, expanded) {
  const nodes = new Map();
  const edges = [];
  const order = [];
  const visit = (n, path, parentKey) => {
    const key = `${n.type}\u0000${n.id}`;
    const run = runOf([...path, n]);
    if (!nodes.has(key)) {
      const node = { key, type: n.type, id: n.id, attrs: n.attrs || {}, col: COLUMN[n.type] ?? 2, href: hrefOf(n, run) };
      nodes.set(key, node);
      order.push(node);
      if (parentKey) edges.push([parentKey, key]);
      const groups = new Map();
      for (const c of n.children || []) {
        if (!groups.has(c.type)) groups.set(c.type, []);
        groups.get(c.type).push(c);
      }
      for (const [type, kids] of groups) {
        const gkey = `${key}\u0000${type}`;
        const cap = (path.length === 0 ? ROOT_FANOUT[type] : undefined) ?? FANOUT[type] ?? FANOUT_DEFAULT;
        const shown = expanded.has(gkey) ? kids : kids.slice(0, cap);
        for (const c of shown) visit(c, [...path, n], key);
        if (shown.length < kids.length) {
          const mkey = `more\u0000${gkey}`;
          const more = { key: mkey, type, id: `+${kids.length - shown.length} more`, attrs: {}, col: COLUMN[type] ?? 2, more: gkey, count: kids.length - shown.length };
          nodes.set(mkey, more);
          order.push(more);
          edges.push([key, mkey]);
        }
      }
    } else if (parentKey && parentKey !== key) {
      edges.push([parentKey, key]);
    }
  };
  visit(root, [], null);
  // Compact the columns in use; rows in walk order within each column.
  const cols = [...new Set(order.map((n) => n.col))].sort((a, b) => a - b);
  const colIndex = new Map(cols.map((c, i) => [c, i]));
  // Within a column, nodes follow the rows of their neighbours in the columns
  // to their left (fewer crossings); walk order breaks ties.
  const rows = cols.map(() => 0);
  const neighbours = new Map(order.map((n) => [n.key, []]));
  for (const [a, b] of edges) {
    neighbours.get(a).push(b);
    neighbours.get(b).push(a);
  }
  order.forEach((n, i) => {
    n.col = colIndex.get(n.col);
    n.walk = i;
  });
  for (let c = 0; c < cols.length; c++) {
    const inCol = order.filter((n) => n.col === c);
    for (const n of inCol) {
      const left = neighbours.get(n.key).map((k) => nodes.get(k)).filter((m) => m.col < c);
      n.bary = left.length ? Math.min(...left.map((m) => m.row)) : -1;
    }
    inCol.sort((a, b) => a.bary - b.bary || a.walk - b.walk);
    for (const n of inCol) n.row = rows[c]++;
  }
  return { nodes: order, byKey: nodes, edges, cols: cols.length, rows: Math.max(...rows) };
}

function draw(root, tree, expanded, rerender) {
  const g = layout(tree, expanded);
  const width = PAD * 2 + g.cols * NODE_W + (g.cols - 1) * COL_GAP;
  const height = PAD * 2 + g.rows * (NODE_H + ROW_GAP);
  const pos = (n) => ({ x: PAD + n.col * (NODE_W + COL_GAP), y: PAD + n.row * (NODE_H + ROW_GAP) });
  const edgeEls = g.edges.map(([a, b]) => {
    const na = g.byKey.get(a);
    const nb = g.byKey.get(b);
    const pa = pos(na);
    const pb = pos(nb);
    // From the right side of the node on the left to the left side of the other.
    const [l, r] = pa.x <= pb.x ? [pa, pb] : [pb, pa];
    const x1 = l.x + (l.x === r.x ? NODE_W / 2 : NODE_W);
    const y1 = l.y + NODE_H / 2;
    const x2 = r.x + (l.x === r.x ? NODE_W / 2 : 0);
    const y2 = r.y + NODE_H / 2;
    const mx = (x1 + x2) / 2;
    return svg('path', { class: 'lineage-edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` });
  });
  const nodeEls = g.nodes.map((n) => {
    const p = pos(n);
    const isRoot = n.key === `${tree.type}\u0000${tree.id}`;
    const title = `${typeLabel(n.type)} ${n.id}${Object.keys(n.attrs).length ? ' ' + JSON.stringify(n.attrs) : ''}`;
    const body = [
      svg('rect', { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 6, class: `lineage-box type-${n.type}${isRoot ? ' root' : ''}${n.more ? ' more' : ''}` }),
      svg('text', { x: p.x + 8, y: p.y + 14, class: 'lineage-type' }, n.more ? `${typeLabel(n.type)}` : typeLabel(n.type)),
      svg('text', { x: p.x + 8, y: p.y + 30, class: 'lineage-id' }, short(n.id)),
      svg('title', {}, n.more ? `${n.count} more ${typeLabel(n.type)} (show them)` : title),
    ];
    const testid = `lineage-node-${n.type}-${n.id}`;
    if (n.more) {
      const open = () => {
        expanded.add(n.more);
        rerender();
      };
      return svg('g', { class: 'lineage-node more', role: 'button', tabindex: '0', 'data-testid': `lineage-more-${n.type}`, 'aria-label': `show ${n.count} more ${typeLabel(n.type)}`, onclick: open, onkeydown: (e) => (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), open()) }, body);
    }
    if (!n.href) return svg('g', { class: 'lineage-node', 'data-testid': testid, tabindex: '0', 'aria-label': title }, body);
    return svg('a', { class: 'lineage-node', href: n.href, 'data-testid': testid, 'aria-label': `${title}: open` }, body);
  });
  const figure = el('figure', {
    class: 'lineage-graph',
    'data-testid': 'lineage-graph',
    'aria-label': `Lineage of ${typeLabel(tree.type)} ${tree.id}: ${g.nodes.length} entities in ${g.cols} columns; the list below has them all`,
  });
  figure.append(
    el(
      'div',
      { class: 'lineage-scroll' },
      svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-hidden': 'true' }, svg('g', {}, edgeEls), svg('g', {}, nodeEls)),
    ),
  );
  root.replaceChildren(figure);
}

// The text alternative: the whole tree as nested lists (built when opened).
function treeList(tree) {
  const details = el('details', { class: 'numbers', 'data-testid': 'lineage-list' }, el('summary', {}, 'As a list'));
  let built = false;
  const item = (n, path) => {
    const run = runOf([...path, n]);
    const href = hrefOf(n, run);
    const attrs = Object.entries(n.attrs || {}).map(([k, v]) => `${k}: ${typeof v === 'number' ? fmt.num(v) : fmt.text(v)}`);
    const li = el('li', {}, el('span', { class: 'lineage-type' }, typeLabel(n.type)), ' ', href ? link(href, n.id) : el('code', {}, n.id), attrs.length ? el('span', { class: 'muted' }, ` (${attrs.join(', ')})`) : null);
    if (n.children && n.children.length) li.append(el('ul', {}, n.children.map((c) => item(c, [...path, n]))));
    return li;
  };
  details.addEventListener('toggle', () => {
    if (!details.open || built) return;
    built = true;
    details.append(el('ul', { class: 'lineage-tree' }, item(tree, [])));
  });
  return details;
}

export default {
  id: 'lineage',
  title: 'Lineage',
  scope: 'global',
  route: /^#\/lineage(?:\/(.+))?$/,
  async render(root, params) {
    useViewsStyle();
    const id = params[0];
    const form = el(
      'form',
      { class: 'inline-form', 'data-testid': 'lineage-form' },
      el('label', { for: 'lineage-id' }, 'Entity id '),
      el('input', { id: 'lineage-id', name: 'id', value: id || '', placeholder: 'run, model version, checkpoint, node, dataset…', size: 40 }),
      ' ',
      el('button', { type: 'submit' }, 'Show lineage'),
    );
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const v = form.elements.id.value.trim();
      if (v) location.hash = `#/lineage/${encodeURIComponent(v)}`;
    });
    root.append(el('h1', {}, 'Lineage'), form);
    if (!id) {
      root.append(el('p', {}, 'The run graph around any id of section 1: a run, job, experiment, model version, checkpoint, dataset version, node, alert or incident.'));
      return;
    }
    const data = await api(`/v1/lineage/${encodeURIComponent(id)}`);
    for (const m of data.matches || []) {
      const tree = withRanks(m);
      const page = pageOf(tree);
      const attrs = Object.entries(tree.attrs || {});
      const section = el(
        'section',
        { class: 'lineage', 'data-testid': `lineage-${tree.type}` },
        el('h2', {}, `${typeLabel(tree.type)} `, el('code', { 'data-testid': 'lineage-centre' }, tree.id)),
        attrs.length ? el('p', { class: 'muted' }, attrs.map(([k, v]) => `${k}: ${typeof v === 'number' && k.endsWith('_ns') ? fmt.time(v) : fmt.text(typeof v === 'object' ? JSON.stringify(v) : v)}`).join(' · ')) : null,
        page ? el('p', {}, link(page.href, page.text)) : null,
      );
      const graph = el('div');
      const expanded = new Set();
      const rerender = () => draw(graph, tree, expanded, rerender);
      rerender();
      section.append(graph, treeList(tree));
      root.append(section);
    }
  },
};
