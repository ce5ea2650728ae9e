// The portal's pages, one export per line (app.js orders the navigation).
export { default as runs } from './runs.js';
export { default as search } from './search.js';
