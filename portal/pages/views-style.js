// The stylesheet of the Ranks, Compare and Lineage pages (pages/views.css),
// linked once by the first of them to render.
export function useViewsStyle() {
  if (document.getElementById('views-css')) return;
  const l = document.createElement('link');
  l.id = 'views-css';
  l.rel = 'stylesheet';
  l.href = new URL('./views.css', import.meta.url).href;
  document.head.append(l);
}
