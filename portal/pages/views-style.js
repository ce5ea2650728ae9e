// The stylesheet of the Ranks, Compare and Lineage pages (pages/views.css),
// linked once by the first of them to render.
import { useStylesheet } from '../app.js';

export function useViewsStyle() {
  useStylesheet(new URL('./views.css', import.meta.url).href);
}
