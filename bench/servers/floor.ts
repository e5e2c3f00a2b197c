/**
 * The floors of bench/proxy.ts: the least a gateway on this stack can do per request. A bare
 * node:http server that verifies the bearer token with jose (the gateway's verification
 * options) and proxies with http-proxy-3 over a keep-alive agent; no routing table, no
 * headers added or removed, no logging, no error envelope, no cache of verified tokens.
 * With PUBLIC_KEY it takes EdDSA (Ed25519) tokens, as the gateway issues them; with
 * HS256_SECRET (base64url) HS256 tokens with the same claims: the cheapest signature jose
 * checks, the floor the targets are measured against.
 *
 *   PORT=<port> BACKEND=http://127.0.0.1:<port> PUBLIC_KEY="<SPKI PEM>" node bench/servers/floor.ts
 *   PORT=<port> BACKEND=http://127.0.0.1:<port> HS256_SECRET=<base64url> node bench/servers/floor.ts
 */
import { createPublicKey, createSecretKey } from 'node:crypto';
import { Agent, createServer, type ServerResponse } from 'node:http';
import { createProxyServer } from 'http-proxy-3';
import { jwtVerify, type JWTVerifyOptions } from 'jose';

const port = Number(process.env.PORT);
const backend = process.env.BACKEND;
const publicKey = process.env.PUBLIC_KEY;
const secret = process.env.HS256_SECRET;
if (!Number.isInteger(port) || port <= 0 || backend === undefined || (publicKey === undefined) === (secret === undefined)) {
  throw new Error('PORT, BACKEND and one of PUBLIC_KEY and HS256_SECRET must be set');
}

const key = secret === undefined ? createPublicKey(publicKey!) : createSecretKey(Buffer.from(secret, 'base64url'));
// As src/auth/signer.ts verifies access tokens with the default settings.
const VERIFY: JWTVerifyOptions = {
  algorithms: [secret === undefined ? 'EdDSA' : 'HS256'],
  issuer: 'auth-gateway',
  audience: 'auth-gateway',
  typ: 'at+jwt',
  clockTolerance: 5,
  maxTokenAge: 900,
  requiredClaims: ['sub', 'client_id', 'jti', 'iat', 'iat_ms', 'exp'],
};

const proxy = createProxyServer({ target: backend, agent: new Agent({ keepAlive: true }) });

function answer(res: ServerResponse, status: number, error: string): void {
  const body = JSON.stringify({ error });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...(status === 401 ? { 'www-authenticate': 'Bearer' } : {}) });
  res.end(body);
}

const server = createServer((req, res) => {
  const header = req.headers.authorization;
  if (header === undefined || !header.startsWith('Bearer ')) return answer(res, 401, 'unauthorized');
  jwtVerify(header.slice('Bearer '.length), key, VERIFY).then(
    () => proxy.web(req, res, {}, () => {
      if (!res.headersSent) answer(res, 502, 'bad gateway');
      else res.destroy();
    }),
    () => answer(res, 401, 'unauthorized'),
  );
});
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
