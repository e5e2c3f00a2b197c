/**
 * The baseline of bench/directory.ts: a plain Koa app that does what the gateway's directory
 * routes do, except the directory. It runs the gateway's own bearer check, built from the
 * gateway's own modules as src/services.ts builds it without Redis (loadConfig with the same
 * SIGNING_KEYS, createSigner, createRevocations over a MemoryRevocationStore,
 * createAuthenticator, readBearerToken), so a token the gateway issued is valid here too, and
 * answers each path with a constant JSON body given at start-up: the gateway's own answer, so
 * size and shape match. A request that fails the check gets the error's status, a path not
 * given 404.
 *
 *   PORT=<port> SIGNING_KEYS='[…]' BODIES='{"/api/roles": {…}, "/api/sign": {…}}' \
 *     GATEWAY_MODULES=<the gateway's compiled src/> node bench/servers/koa-constant.ts
 *
 * GATEWAY_MODULES is the directory the gateway under test runs from (bench/results/dist, as
 * bench/lib/gateway.ts builds it), so both run the same compiled code; with src/ itself
 * (`--runtime tsx`) this runs under `node --import tsx`. No logging, no request id, no router.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Koa from 'koa';

const port = Number(process.env.PORT);
const modules = process.env.GATEWAY_MODULES;
const signingKeys = process.env.SIGNING_KEYS;
const bodies = process.env.BODIES;
if (!Number.isInteger(port) || port <= 0 || modules === undefined || signingKeys === undefined || bodies === undefined) {
  throw new Error('PORT, GATEWAY_MODULES, SIGNING_KEYS and BODIES must be set');
}

/** One of the gateway's modules, from where the gateway under test runs. */
const load = (path: string): Promise<unknown> => import(pathToFileURL(join(modules, path)).href);
const { loadConfig } = await load('config/load.js') as typeof import('../../src/config/load.js');
const { createSigner } = await load('auth/signer.js') as typeof import('../../src/auth/signer.js');
const { createAuthenticator, readBearerToken } = await load('auth/bearer.js') as typeof import('../../src/auth/bearer.js');
const { createRevocations } = await load('auth/revocation.js') as typeof import('../../src/auth/revocation.js');
const { MemoryRevocationStore } = await load('state/revocation/memory.js') as typeof import('../../src/state/revocation/memory.js');
const { resetRetentionMs } = await load('state/revocation/store.js') as typeof import('../../src/state/revocation/store.js');
const { systemClock: clock } = await load('util/clock.js') as typeof import('../../src/util/clock.js');

// As src/services.ts wires the check when no Redis is configured.
const config = loadConfig({ env: { SIGNING_KEYS: signingKeys } });
const t = config.tokens;
const revocations = createRevocations({
  store: new MemoryRevocationStore({ clock, retainMs: resetRetentionMs(t) }),
  clock,
  ttlMs: config.redis.resetCacheTtlMs,
  rememberMs: (t.accessTokenTtlSeconds + t.clockSkewSeconds) * 1000,
});
const authenticate = createAuthenticator(createSigner(config, clock), revocations);

const answers = new Map(Object.entries(JSON.parse(bodies) as Record<string, object>));

const app = new Koa();
app.use(async (ctx) => {
  const body = answers.get(ctx.path);
  if (body === undefined) {
    ctx.status = 404;
    ctx.body = { success: false, message: { code: 'not_found' } };
    return;
  }
  try {
    await authenticate(readBearerToken(ctx.req));
  } catch (err) {
    ctx.status = (err as { status?: number }).status ?? 500;
    ctx.body = { success: false, message: { code: (err as { code?: string }).code ?? 'internal_error' } };
    return;
  }
  // As the gateway's router does for every answer of its own routes.
  ctx.set('Cache-Control', 'no-store');
  // An object, as a plain Koa endpoint has it: Koa serialises it per request. (The gateway
  // writes a cached page's JSON once: that saving is the gateway's, not the baseline's.)
  ctx.body = body;
});
const server = app.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
