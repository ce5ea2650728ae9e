// The portal's pages, one export per line (app.js orders the navigation).
export { default as runs } from './runs.js';
export { default as search } from './search.js';
export { default as run } from './run.js';
export { default as failure } from './failure.js';
export { default as timeline } from './timeline.js';
export { default as ranks } from './ranks.js';
export { default as compare } from './compare.js';
export { default as lineage } from './lineage.js';
export { default as evaluations } from './evaluations.js';
export { default as evaluation } from './evaluation.js';
export { default as modelVersion } from './model-version.js';
export { default as gates } from './gates.js';
