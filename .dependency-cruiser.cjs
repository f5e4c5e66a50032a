/**
 * The house's layering, checked by dependency-cruiser (`bun run deps`, run by .ci/run): the edge and the
 * cloud shim meet only in src/shared and proto/; product code never imports the tools; the page's views
 * import no edge module (they read view-model.ts); and nothing in src/ or views/ imports itself in a loop,
 * type-only imports included (a loop of types is still a loop a reader has to untie). Within each side, the rooms
 * keep one order (ROOM_ORDER).
 */

/**
 * Each side's rooms from the top down: a file may import its own room and the rooms below it, never one above.
 * A room is a folder, or named top-level files. Adding a room means placing it here.
 */
const ROOM_ORDER = {
  edge: [
    ['entry', '^src/edge/main\\.ts$'],
    ['server', '^src/edge/server/'],
    ['transports', '^src/edge/(http|grpc)/'],
    ['chat', '^src/edge/chat/'],
    ['runtime', '^src/edge/(edge-runtime|config)\\.ts$'],
    ['metrics', '^src/edge/metrics/'],
    ['loop', '^src/edge/loop/'],
    ['routing', '^src/edge/routing/'],
    ['request', '^src/edge/request/'],
    ['privacy', '^src/edge/privacy/'],
    ['cloud client', '^src/edge/cloud/'],
    ['constraint', '^src/edge/constraint/'],
  ],
  cloud: [
    ['entry', '^src/cloud/main\\.ts$'],
    ['server', '^src/cloud/shim-server\\.ts$'],
    ['service', '^src/cloud/grpc-service\\.ts$'],
    ['scoring', '^src/cloud/scoring/'],
    ['sessions', '^src/cloud/sessions/'],
    ['admission', '^src/cloud/admission/'],
    ['backends', '^src/cloud/backends/'],
    ['settings and errors', '^src/cloud/(config|quoting-error)\\.ts$'],
  ],
  shared: [
    ['grpc', '^src/shared/grpc/'],
    ['text', '^src/shared/text/'],
    ['model runtime', '^src/shared/model/'],
    ['process', '^src/shared/process/'],
    ['contract', '^src/shared/contract/'],
    ['basics', '^src/shared/[^/]+\\.ts$'],
  ],
};

/** One rule per side and pair of rooms: the lower may not import the upper. */
const roomRules = Object.entries(ROOM_ORDER).flatMap(([side, rooms]) =>
  rooms.flatMap(([upperName, upper], i) =>
    rooms.slice(i + 1).map(([lowerName, lower]) => ({
      name: `${side}-rooms`,
      severity: 'error',
      comment: `${side}: ${lowerName} sits below ${upperName} and does not import it`,
      from: { path: lower },
      to: { path: upper },
    })),
  ),
);

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...roomRules,
    { name: 'no-circular', severity: 'error', comment: 'files that import each other in a loop', from: { path: '^(src|views)/' }, to: { circular: true } },
    {
      name: 'edge-not-cloud',
      severity: 'error',
      comment: 'the edge reaches the cloud through proto/ and src/shared only',
      from: { path: '^src/edge/' },
      to: { path: '^src/cloud/' },
    },
    {
      name: 'cloud-not-edge',
      severity: 'error',
      comment: 'the shim knows nothing of the edge but the contract',
      from: { path: '^src/cloud/' },
      to: { path: '^src/edge/' },
    },
    {
      name: 'shared-is-shared',
      severity: 'error',
      comment: 'src/shared serves both sides and depends on neither',
      from: { path: '^src/shared/' },
      to: { path: '^src/(edge|cloud|tools)/' },
    },
    {
      name: 'product-not-tools',
      severity: 'error',
      comment: 'the edge, the shim and the page never import the tools (models, router training, eval, bench)',
      from: { path: '^(src/(edge|cloud|shared)|views)/' },
      to: { path: '^src/tools/' },
    },
    { name: 'views-not-edge', severity: 'error', comment: 'the views read view-model.ts, not the edge', from: { path: '^views/' }, to: { path: '^src/' } },
    {
      name: 'lab-not-eval-or-router',
      severity: 'error',
      comment: 'what evaluation and router training share imports neither',
      from: { path: '^src/tools/lab/' },
      to: { path: '^src/tools/(eval|router)/' },
    },
    {
      name: 'router-not-eval',
      severity: 'error',
      comment: 'eval evaluates trained routers, never the other way',
      from: { path: '^src/tools/router/' },
      to: { path: '^src/tools/eval/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/shared/grpc/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    moduleSystems: ['es6', 'cjs'],
  },
};
