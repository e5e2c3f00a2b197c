/**
 * The Koa peer of bench/proxy.ts: Koa written well for the gateway's job, as a careful Koa
 * user would without writing a gateway. One middleware: the prefix checked by hand (a router
 * for one prefix would only cost), the bearer token verified synchronously by fast-jwt
 * (node:crypto, no thread-pool hop; the gateway's verification rules in its options) with its
 * LRU cache of verified tokens on, at the gateway's default bound (CACHE entries, 50,000;
 * keyed by its default, a hash of the token), then `ctx.respond = false` and http-proxy-3 over
 * a keep-alive agent. No logging, no request id, no header policy; 401 and 502 as small JSON.
 *
 *   PORT=<port> BACKEND=http://127.0.0.1:<port> PUBLIC_KEY="<SPKI PEM>" [CACHE=<entries, 0: off>] node bench/servers/koa.ts
 */
import { Agent } from 'node:http';
import { createVerifier } from 'fast-jwt';
import { createProxyServer } from 'http-proxy-3';
import Koa from 'koa';

const port = Number(process.env.PORT);
const backend = process.env.BACKEND;
const publicKey = process.env.PUBLIC_KEY;
const cache = Number(process.env.CACHE ?? 50_000);
if (!Number.isInteger(port) || port <= 0 || backend === undefined || publicKey === undefined || !Number.isInteger(cache) || cache < 0) {
  throw new Error('PORT, BACKEND and PUBLIC_KEY must be set (and CACHE, if set, a number of entries)');
}

// As src/auth/signer.ts verifies access tokens with the default settings.
const verify = createVerifier({
  key: publicKey,
  algorithms: ['EdDSA'],
  allowedIss: 'auth-gateway',
  allowedAud: 'auth-gateway',
  checkTyp: 'at+jwt',
  clockTolerance: 5_000,
  maxAge: 900_000,
  requiredClaims: ['sub', 'client_id', 'jti', 'iat', 'iat_ms', 'exp'],
  cache: cache === 0 ? false : cache,
});

const proxy = createProxyServer({ target: backend, agent: new Agent({ keepAlive: true }) });
const app = new Koa();

app.use((ctx) => {
  if (!ctx.path.startsWith('/bench/')) {
    ctx.status = 404;
    ctx.body = { error: 'not_found' };
    return;
  }
  const header = ctx.get('authorization');
  let valid = header.startsWith('Bearer ');
  if (valid) {
    try {
      verify(header.slice('Bearer '.length));
    } catch {
      valid = false;
    }
  }
  if (!valid) {
    ctx.status = 401;
    ctx.set('www-authenticate', 'Bearer');
    ctx.body = { error: 'unauthorized' };
    return;
  }
  ctx.respond = false;
  proxy.web(ctx.req, ctx.res, {}, () => {
    if (ctx.res.headersSent) return void ctx.res.destroy();
    ctx.res.writeHead(502, { 'content-type': 'application/json' }).end('{"error":"bad gateway"}');
  });
});

const server = app.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
