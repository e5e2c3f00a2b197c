/**
 * The sign-in floor of bench/auth.ts (issue 32's target 7): the least a token service on Node
 * can do per sign-in and refresh. node:http, the request body read whole and parsed as JSON,
 * the API secret checked against its stored digest (the gateway's scheme: SHA-256 of the
 * client's SHA-256, compared in constant time), an Ed25519 access token signed with
 * node:crypto (no JOSE library), a refresh token of 32 random bytes kept in a Map (single use:
 * a refresh takes it out and puts its successor in). No limits, no audit, no logging, no
 * envelope beyond the gateway's own answer shape, so bench/wrk/*.lua read it alike.
 *
 *   PORT=<port> API_KEY=<key> SECRET_DIGEST=sha256:<hex> node bench/servers/signin-floor.ts
 */
import { createHash, generateKeyPairSync, randomBytes, randomUUID, sign, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

const port = Number(process.env.PORT);
const apiKey = process.env.API_KEY;
const digest = /^sha256:([0-9a-f]{64})$/.exec(process.env.SECRET_DIGEST ?? '')?.[1];
if (!Number.isInteger(port) || port <= 0 || apiKey === undefined || digest === undefined) throw new Error('PORT, API_KEY and SECRET_DIGEST (sha256:<hex>) must be set');
const key: string = apiKey;
const stored = Buffer.from(digest, 'hex');
const { privateKey } = generateKeyPairSync('ed25519');
const HEADER = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'at+jwt', kid: 'floor-1' })).toString('base64url');
/** Refresh token → the key it was issued to. */
const families = new Map<string, string>();

function accessToken(sub: string): string {
  const now = Math.floor(Date.now() / 1000);
  const payload = Buffer.from(JSON.stringify({ iss: 'auth-gateway', aud: 'auth-gateway', sub, client_id: sub, jti: randomUUID(), iat: now, exp: now + 900 })).toString('base64url');
  const input = `${HEADER}.${payload}`;
  return `${input}.${sign(null, Buffer.from(input), privateKey).toString('base64url')}`;
}

function pair(sub: string): string {
  const refreshToken = randomBytes(32).toString('base64url');
  families.set(refreshToken, sub);
  return JSON.stringify({ success: true, message: { accessToken: accessToken(sub), refreshToken } });
}

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function handle(req: IncomingMessage, res: ServerResponse, text: string): void {
  let body: { apiKey?: unknown; apiSecret?: unknown; refreshToken?: unknown };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return send(res, 400, '{"success":false}');
  }
  if (req.url === '/api/signin') {
    const presented = typeof body.apiSecret === 'string' && /^[0-9a-f]{64}$/.test(body.apiSecret) ? createHash('sha256').update(Buffer.from(body.apiSecret, 'hex')).digest() : undefined;
    if (body.apiKey !== key || presented === undefined || !timingSafeEqual(presented, stored)) return send(res, 401, '{"success":false}');
    return send(res, 200, pair(key));
  }
  if (req.url === '/api/refresh' && typeof body.refreshToken === 'string') {
    const sub = families.get(body.refreshToken);
    if (sub === undefined) return send(res, 401, '{"success":false}');
    families.delete(body.refreshToken);
    return send(res, 200, pair(sub));
  }
  return send(res, 404, '{"success":false}');
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') return send(res, 200, '{"ok":true}');
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
});
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
