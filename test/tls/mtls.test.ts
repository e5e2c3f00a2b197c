/**
 * Client certificates (docs/tls.md, "Client certificates (mTLS)"), against a real HTTPS gateway
 * and an echoing backend, with certificates openssl makes (test/helpers/tls.ts): a CA the
 * gateway trusts for clients (tls.clientCaFile) and one it does not.
 *
 * - routes: `clientCertificate: required` answers 401 `client_certificate_required` in the
 *   envelope without a verified certificate (none, or another CA's) and never reaches the
 *   backend; with one, the backend gets its subject and SHA-256; `optional` serves both; the
 *   certificate headers a client sends are stripped on every route;
 * - keys bound to a certificate (RFC 8705): sign-in and refresh need it, the tokens carry
 *   `cnf.x5t#S256`, and such a token is refused (401 invalid_token) with another certificate
 *   or none, on proxied and own routes and WebSocket handshakes alike;
 * - the CA file reloads with the certificates, and a bad one stops the start naming it.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect, type TLSSocket } from 'node:tls';
import { WebSocket } from 'ws';
import { checkConfiguration } from '../../src/cli/config-check.js';
import { loadConfig } from '../../src/config/load.js';
import { withReloadable } from '../../src/config/reload.js';
import { startBackend, type Backend } from '../helpers/backend.js';
import { DEMO, logged, sha256Hex, startGateway } from '../helpers/gateway.js';
import { ADMIN_TOKEN, startOwnerGateway } from '../helpers/owner.js';
import { exitWithin, gatewayEnv, startNode, tempDir } from '../helpers/process.js';
import { roundTrip, startWsBackend } from '../helpers/ws-backend.js';
import { httpsCall, makeTestCa, readPem, type HttpsAnswer, type HttpsCallOptions, type Leaf } from '../helpers/tls.js';

const ca = makeTestCa();
const server = ca.leaf('main', ['localhost', '127.0.0.1']);
const zoe = ca.client('zoe', '/C=DE/O=Example, Inc./CN=Zoë Client');
const other = ca.client('other', '/CN=Other Client');
const stranger = makeTestCa().client('stranger', '/CN=Zoë Client');

/** One HTTPS request on a fresh connection, the test CA trusted, with `as`'s client certificate if given. */
function https(url: string, options: Omit<HttpsCallOptions, 'caPem'> = {}): Promise<HttpsAnswer> {
  return httpsCall(url, { ...options, caPem: ca.caPem });
}

/** The fingerprint as the backend header and the key field spell it: 64 lowercase hex digits. */
function hexOf(leaf: Leaf): string {
  return leaf.fingerprint256.replaceAll(':', '').toLowerCase();
}

function claimsOf(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
}

const SPOOFED = { 'X-Client-Cert-Subject': 'CN=admin', 'x-client-cert-sha256': '00'.repeat(32) };

function tlsWithClients(caFile = ca.caFile) {
  return { certFile: server.certFile, keyFile: server.keyFile, clientCaFile: caFile };
}

function routesTo(backend: Backend) {
  return [
    { prefix: '/strict', targets: [backend.url], auth: 'public', clientCertificate: 'required' },
    { prefix: '/relaxed', targets: [backend.url], auth: 'public', clientCertificate: 'optional' },
    { prefix: '/plain', targets: [backend.url], auth: 'public' },
    { prefix: '/private', targets: [backend.url], clientCertificate: 'required' },
  ];
}

test('required route: no certificate and another CA\'s get 401 in the envelope and reach no backend; a verified one reaches it, named by subject and SHA-256', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGateway(t, { overrides: { tls: tlsWithClients(), routes: routesTo(backend) } });

  // None; another CA's; and one of the trusted CA's that is not for clients (extendedKeyUsage serverAuth).
  for (const as of [undefined, stranger, server]) {
    const refused = await https(`${gw.url}/strict/a`, { as });
    assert.equal(refused.status, 401, JSON.stringify(refused.body));
    assert.equal(refused.body.success, false);
    assert.equal(refused.body.message.code, 'client_certificate_required');
    assert.match(String(refused.headers['www-authenticate']), /^Bearer realm=/);
  }
  // A route that also requires a token: the certificate is asked for first, whatever the token.
  const { accessToken } = (await https(`${gw.url}/api/signin`, { method: 'POST', body: { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) } })).body.message;
  const noCertificate = await https(`${gw.url}/private/a`, { headers: { authorization: `Bearer ${accessToken}` } });
  assert.equal(noCertificate.status, 401);
  assert.equal(noCertificate.body.message.code, 'client_certificate_required');
  assert.equal(backend.received.length, 0, 'no refused request reached the backend');

  const served = await https(`${gw.url}/strict/a`, { as: zoe });
  assert.equal(served.status, 200, JSON.stringify(served.body));
  const seen = backend.received.at(-1)!;
  // RFC 4514 order (most specific first) and escapes; the non-ASCII "ë" percent-encoded as UTF-8.
  assert.deepEqual(seen.headers['x-client-cert-subject'], ['CN=Zo%C3%AB Client,O=Example\\, Inc.,C=DE']);
  assert.deepEqual(seen.headers['x-client-cert-sha256'], [hexOf(zoe)]);

  const withToken = await https(`${gw.url}/private/a`, { as: zoe, headers: { authorization: `Bearer ${accessToken}` } });
  assert.equal(withToken.status, 200, JSON.stringify(withToken.body));
  assert.deepEqual(backend.received.at(-1)!.headers['x-account-id'], [DEMO.alice.accountId]);
  assert.deepEqual(backend.received.at(-1)!.headers['x-client-cert-sha256'], [hexOf(zoe)]);
});

test('the certificate headers a client sends are stripped on every route, with a certificate and without', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGateway(t, { overrides: { tls: tlsWithClients(), routes: routesTo(backend) } });
  const cases: [string, Leaf | undefined, string[] | undefined][] = [
    ['/strict/x', zoe, [hexOf(zoe)]],
    ['/relaxed/x', zoe, [hexOf(zoe)]],
    ['/relaxed/x', undefined, undefined],
    ['/relaxed/x', stranger, undefined],
    ['/plain/x', zoe, undefined],
    ['/plain/x', undefined, undefined],
  ];
  for (const [path, as, expected] of cases) {
    const res = await https(`${gw.url}${path}`, { as, headers: SPOOFED });
    assert.equal(res.status, 200, `${path} as ${as?.certFile}: ${JSON.stringify(res.body)}`);
    const seen = backend.received.at(-1)!;
    assert.deepEqual(seen.headers['x-client-cert-sha256'], expected, `${path} as ${as?.certFile}`);
    assert.equal(seen.headers['x-client-cert-subject']?.includes('CN=admin') ?? false, false, `${path}: the client's subject is gone`);
    assert.equal(seen.headers['x-client-cert-subject']?.length ?? 0, expected === undefined ? 0 : 1);
  }
});

test('optional route: served without a certificate, with an unverified one (sent on as none) and with a verified one', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGateway(t, { overrides: { tls: tlsWithClients(), routes: routesTo(backend) } });
  for (const [as, named] of [[undefined, false], [stranger, false], [other, true]] as const) {
    const res = await https(`${gw.url}/relaxed/y`, { as });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(backend.received.at(-1)!.headers['x-client-cert-sha256'], named ? [hexOf(other)] : undefined);
    assert.deepEqual(backend.received.at(-1)!.headers['x-client-cert-subject'], named ? ['CN=Other Client'] : undefined);
  }
});

test('bound key: sign-in needs its certificate, its tokens carry cnf.x5t#S256 and are refused with another certificate or none', async (t) => {
  const backend = await startBackend(t);
  const gw = await startOwnerGateway(t, { overrides: { tls: tlsWithClients(), routes: [{ prefix: '/orders', targets: [backend.url], clientCertificate: 'optional' }, { prefix: '/open', targets: [backend.url] }] } });
  const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };

  // The fingerprint as openssl prints it (upper case, ":" between bytes) is kept as 64 lowercase hex digits.
  const created = await https(`${gw.url}/owner/v1/accounts/acct_alice/keys`, { method: 'POST', headers: operator, body: { name: 'bound', certificateSha256: zoe.fingerprint256 } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { key, apiSecret } = created.body.message as { key: { id: string; apiKey: string; certificateSha256: string }; apiSecret: string };
  assert.equal(key.certificateSha256, hexOf(zoe));
  for (const bad of ['zz', hexOf(zoe).slice(2), `${hexOf(zoe)}:`, 42]) {
    const refused = await https(`${gw.url}/owner/v1/accounts/acct_alice/keys`, { method: 'POST', headers: operator, body: { name: 'bad', certificateSha256: bad } });
    assert.equal(refused.status, 400, `${bad}: ${JSON.stringify(refused.body)}`);
    assert.equal(refused.body.message.code, 'invalid_request');
  }

  const credentials = { apiKey: key.apiKey, apiSecret: sha256Hex(apiSecret) };
  for (const as of [undefined, other, stranger]) {
    const refused = await https(`${gw.url}/api/signin`, { method: 'POST', body: credentials, as });
    assert.equal(refused.status, 401, JSON.stringify(refused.body));
    assert.equal(refused.body.message.code, 'client_certificate_required');
  }
  // A wrong secret is the usual answer, certificate or not: nothing is said about the key.
  const wrong = await https(`${gw.url}/api/signin`, { method: 'POST', body: { ...credentials, apiSecret: sha256Hex('nope') }, as: zoe });
  assert.equal(wrong.body.message.code, 'invalid_credentials');

  const signedIn = await https(`${gw.url}/api/signin`, { method: 'POST', body: credentials, as: zoe });
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  const { accessToken, refreshToken } = signedIn.body.message as { accessToken: string; refreshToken: string };
  const thumbprint = Buffer.from(hexOf(zoe), 'hex').toString('base64url');
  assert.deepEqual(claimsOf(accessToken).cnf, { 'x5t#S256': thumbprint });

  const bearer = { authorization: `Bearer ${accessToken}` };
  const before = backend.received.length;
  for (const [path, as] of [['/orders/1', undefined], ['/orders/1', other], ['/orders/1', stranger], ['/open/1', other], ['/api/roles', undefined], ['/api/roles', other]] as const) {
    const refused = await https(`${gw.url}${path}`, { headers: bearer, as });
    assert.equal(refused.status, 401, `${path} as ${as?.certFile}: ${JSON.stringify(refused.body)}`);
    assert.equal(refused.body.message.code, 'invalid_token');
    assert.match(String(refused.headers['www-authenticate']), /error="invalid_token"/);
  }
  assert.equal(backend.received.length, before, 'no refused call reached a backend');

  for (const path of ['/orders/1', '/open/1', '/api/roles']) {
    const served = await https(`${gw.url}${path}`, { headers: bearer, as: zoe });
    assert.equal(served.status, 200, `${path}: ${JSON.stringify(served.body)}`);
  }
  assert.deepEqual(backend.received.at(-2)!.headers['x-client-cert-sha256'], [hexOf(zoe)], 'the optional route names it');
  assert.equal(backend.received.at(-1)!.headers['x-client-cert-sha256'], undefined, 'a route without clientCertificate does not');

  // Refresh: with another certificate refused, the refresh token left as it was; with the right one, a bound pair.
  const stolen = await https(`${gw.url}/api/refresh`, { method: 'POST', body: { refreshToken }, as: other });
  assert.equal(stolen.status, 401, JSON.stringify(stolen.body));
  assert.equal(stolen.body.message.code, 'invalid_grant');
  const refreshed = await https(`${gw.url}/api/refresh`, { method: 'POST', body: { refreshToken }, as: zoe });
  assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
  assert.deepEqual(claimsOf(refreshed.body.message.accessToken).cnf, { 'x5t#S256': thumbprint });

  // An unbound key's token has no cnf and needs no certificate.
  const unbound = await https(`${gw.url}/api/signin`, { method: 'POST', body: { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) } });
  assert.equal(claimsOf(unbound.body.message.accessToken).cnf, undefined);
  assert.equal((await https(`${gw.url}/orders/2`, { headers: { authorization: `Bearer ${unbound.body.message.accessToken}` } })).status, 200);

  // The token reset takes the key's credentials: for a bound key, its certificate too.
  const refreshedToken = refreshed.body.message.accessToken as string;
  const resetWithout = await https(`${gw.url}/api/reset`, { method: 'POST', body: { ...credentials, scope: 'account' }, as: other });
  assert.equal(resetWithout.status, 401, JSON.stringify(resetWithout.body));
  assert.equal(resetWithout.body.message.code, 'client_certificate_required');
  assert.equal((await https(`${gw.url}/api/roles`, { headers: { authorization: `Bearer ${refreshedToken}` }, as: zoe })).status, 200, 'nothing was reset');
  gw.clock.advance(1000);
  const reset = await https(`${gw.url}/api/reset`, { method: 'POST', body: { ...credentials, scope: 'key' }, as: zoe });
  assert.equal(reset.status, 200, JSON.stringify(reset.body));
  assert.equal((await https(`${gw.url}/api/roles`, { headers: { authorization: `Bearer ${refreshedToken}` }, as: zoe })).status, 401, 'reset');
});

/** A WebSocket handshake over TLS as `as`: the open socket, or the status it was answered with instead. */
function openWss(url: string, path: string, { token, as }: { token: string; as?: Leaf }): Promise<WebSocket | number> {
  const ws = new WebSocket(`${url.replace(/^https/, 'wss')}${path}`, [], {
    ca: ca.caPem, ...(as === undefined ? {} : { cert: readPem(as.certFile), key: readPem(as.keyFile) }), headers: { authorization: `Bearer ${token}` },
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      ws.terminate();
      resolve(res.statusCode ?? 0);
    });
    ws.once('error', reject);
  });
}

test('WebSocket route: a bound token opens a WebSocket only with its certificate; the backend\'s handshake names it', async (t) => {
  const backend = await startWsBackend(t);
  const gw = await startOwnerGateway(t, { overrides: { tls: tlsWithClients(), routes: [{ prefix: '/live', targets: [backend.url], websocket: true, clientCertificate: 'required' }] } });
  const created = await https(`${gw.url}/owner/v1/accounts/acct_alice/keys`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: { name: 'ws', certificateSha256: zoe.fingerprint256 } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const signedIn = await https(`${gw.url}/api/signin`, { method: 'POST', body: { apiKey: created.body.message.key.apiKey, apiSecret: sha256Hex(created.body.message.apiSecret) }, as: zoe });
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  const token = signedIn.body.message.accessToken as string;

  assert.equal(await openWss(gw.url, '/live', { token }), 401, 'no certificate');
  assert.equal(await openWss(gw.url, '/live', { token, as: other }), 401, 'another certificate');
  assert.equal(backend.handshakes.length, 0);
  const ws = await openWss(gw.url, '/live', { token, as: zoe });
  assert.ok(typeof ws !== 'number', `answered ${String(ws)}`);
  t.after(() => ws.terminate());
  assert.equal((await roundTrip(ws, 'ping')).data.toString(), 'ping');
  assert.deepEqual(backend.handshakes.at(-1)!.headers['x-client-cert-sha256'], [hexOf(zoe)]);
});

test('binding a key to a certificate stops its earlier tokens; unbinding (null) lets it sign in without one', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { tls: tlsWithClients() } });
  const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const created = await https(`${gw.url}/owner/v1/accounts/acct_alice/keys`, { method: 'POST', headers: operator, body: { name: 'later bound' } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { key, apiSecret } = created.body.message as { key: { id: string; apiKey: string }; apiSecret: string };
  assert.equal((created.body.message.key as Record<string, unknown>).certificateSha256, undefined);
  const credentials = { apiKey: key.apiKey, apiSecret: sha256Hex(apiSecret) };
  const early = (await https(`${gw.url}/api/signin`, { method: 'POST', body: credentials })).body.message.accessToken as string;
  assert.equal((await https(`${gw.url}/api/roles`, { headers: { authorization: `Bearer ${early}` } })).status, 200);

  gw.clock.advance(1000);
  const bound = await https(`${gw.url}/owner/v1/accounts/acct_alice/keys/${key.id}`, { method: 'PATCH', headers: operator, body: { certificateSha256: hexOf(other).toUpperCase() } });
  assert.equal(bound.status, 200, JSON.stringify(bound.body));
  assert.equal(bound.body.message.certificateSha256, hexOf(other));
  const audit = await https(`${gw.url}/owner/v1/accounts/acct_alice/audit?limit=1`, { headers: operator });
  assert.deepEqual([audit.body.message.items[0].action, audit.body.message.items[0].changes], ['key.update', { certificateSha256: [null, hexOf(other)] }]);
  const stopped = await https(`${gw.url}/api/roles`, { headers: { authorization: `Bearer ${early}` }, as: other });
  assert.equal(stopped.status, 401, 'the unbound token from before the binding stopped');
  assert.equal((await https(`${gw.url}/api/signin`, { method: 'POST', body: credentials })).status, 401);
  assert.equal((await https(`${gw.url}/api/signin`, { method: 'POST', body: credentials, as: other })).status, 200);

  const unbound = await https(`${gw.url}/owner/v1/accounts/acct_alice/keys/${key.id}`, { method: 'PATCH', headers: operator, body: { certificateSha256: null } });
  assert.equal(unbound.status, 200, JSON.stringify(unbound.body));
  assert.equal(unbound.body.message.certificateSha256, undefined);
  assert.equal((await https(`${gw.url}/api/signin`, { method: 'POST', body: credentials })).status, 200);
});

test('the client CA file reloads with the certificates: new handshakes are verified against the new CAs', async (t) => {
  const backend = await startBackend(t);
  const dir = tempDir(t);
  const live = join(dir, 'clients.pem');
  copyFileSync(ca.caFile, live);
  const gw = await startGateway(t, { overrides: { tls: { ...tlsWithClients(live), watchIntervalMs: 1000 }, routes: routesTo(backend) } });
  assert.equal((await https(`${gw.url}/strict/r`, { as: zoe })).status, 200);
  assert.equal((await https(`${gw.url}/strict/r`, { as: stranger })).status, 401);

  // The stranger's CA instead: read from the client certificate's own folder.
  copyFileSync(join(stranger.certFile, '..', 'ca.pem'), live);
  gw.clock.advance(1000);
  assert.equal(logged(gw, 'TLS certificates reloaded').length, 1);
  assert.equal((await https(`${gw.url}/strict/r`, { as: stranger })).status, 200);
  assert.equal((await https(`${gw.url}/strict/r`, { as: zoe })).status, 401);

  // A broken file changes nothing: the CAs in use stay.
  writeFileSync(live, 'not a certificate\n');
  gw.clock.advance(1000);
  const errors = logged(gw, 'TLS certificates changed but cannot be used: still serving the previous ones');
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]!.problem), /clients\.pem: holds no PEM certificate/);
  assert.equal((await https(`${gw.url}/strict/r`, { as: stranger })).status, 200);
});

/**
 * A GET on a new TLS 1.2 connection as `as`, asking for `servername` (none: the listener's
 * default context, not an SNI one), resuming `session` if given: the status, whether it
 * resumed, and the session.
 */
function getOverTls12(url: string, path: string, as: Leaf, servername: string | undefined, session?: Buffer): Promise<{ status: number; reused: boolean; session: Buffer | undefined }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket: TLSSocket = connect({ host: '127.0.0.1', port: Number(port), ca: ca.caPem, cert: readPem(as.certFile), key: readPem(as.keyFile), maxVersion: 'TLSv1.2', ...(servername === undefined ? {} : { servername }), ...(session === undefined ? {} : { session }) }, () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    });
    let data = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => { data += chunk; }).on('error', reject).on('end', () => {
      resolve({ status: Number(data.split(' ')[1]), reused: socket.isSessionReused(), session: socket.getSession() });
    });
  });
}

for (const servername of [undefined, 'localhost']) {
  test(`after the client CAs are reloaded, no session resumes its way past them (new contexts, new ticket keys; SNI name: ${servername ?? 'none'})`, async (t) => {
    const backend = await startBackend(t);
    const live = join(tempDir(t), 'clients.pem');
    copyFileSync(ca.caFile, live);
    const gw = await startGateway(t, { overrides: { tls: { ...tlsWithClients(live), watchIntervalMs: 1000 }, routes: routesTo(backend) } });
    const first = await getOverTls12(gw.url, '/strict/s', zoe, servername);
    assert.equal(first.status, 200);
    assert.ok(first.session !== undefined);
    // Resumption works, and keeps the certificate's verdict.
    const resumed = await getOverTls12(gw.url, '/strict/s', zoe, servername, first.session);
    assert.equal(resumed.reused, true);
    assert.equal(resumed.status, 200);

    copyFileSync(join(stranger.certFile, '..', 'ca.pem'), live);
    gw.clock.advance(1000);
    assert.equal(logged(gw, 'TLS certificates reloaded').length, 1);
    const after = await getOverTls12(gw.url, '/strict/s', zoe, servername, first.session);
    assert.equal(after.reused, false, 'the old ticket no longer resumes');
    assert.equal(after.status, 401);
  });
}

test('a certificate chosen by SNI (tls.certificates) verifies clients against the same CAs', async (t) => {
  const backend = await startBackend(t);
  const api = ca.leaf('api', ['api.example.test']);
  const gw = await startGateway(t, { overrides: { tls: { ...tlsWithClients(), certificates: [{ serverNames: ['api.example.test'], certFile: api.certFile, keyFile: api.keyFile }] }, routes: routesTo(backend) } });
  assert.equal((await getOverTls12(gw.url, '/strict/sni', zoe, 'api.example.test')).status, 200);
  assert.deepEqual(backend.received.at(-1)!.headers['x-client-cert-sha256'], [hexOf(zoe)]);
  assert.equal((await getOverTls12(gw.url, '/strict/sni', stranger, 'api.example.test')).status, 401);
});

test('config: clientCertificate needs tls.clientCaFile, which needs TLS; a bad CA file is named by config check', (t) => {
  const routes = JSON.stringify([{ prefix: '/strict', targets: ['http://127.0.0.1:9'], clientCertificate: 'required' }]);
  const withoutCa = checkConfiguration({ env: { TLS_CERT_FILE: server.certFile, TLS_KEY_FILE: server.keyFile, ROUTES: routes } });
  assert.ok(withoutCa.errors.some((e) => /^routes\.0\.clientCertificate\b.*tls\.clientCaFile/.test(e)), JSON.stringify(withoutCa.errors));
  const withoutTls = checkConfiguration({ env: { TLS_CLIENT_CA_FILE: ca.caFile } });
  assert.ok(withoutTls.errors.some((e) => /^tls\.clientCaFile\b.*need TLS/.test(e)), JSON.stringify(withoutTls.errors));
  const dir = tempDir(t);
  const notPem = join(dir, 'clients.pem');
  writeFileSync(notPem, 'hello\n');
  const bad = checkConfiguration({ env: { TLS_CERT_FILE: server.certFile, TLS_KEY_FILE: server.keyFile, TLS_CLIENT_CA_FILE: notPem, ROUTES: routes } });
  assert.deepEqual(bad.errors.filter((e) => e.startsWith('TLS: ')), [`TLS: ${notPem}: holds no PEM certificate`]);
  const good = checkConfiguration({ env: { TLS_CERT_FILE: server.certFile, TLS_KEY_FILE: server.keyFile, TLS_CLIENT_CA_FILE: ca.caFile, ROUTES: routes } });
  assert.deepEqual(good.errors, []);
  // A reload may bring such a route only to a gateway running with the CA (tls.* needs a restart).
  const running = loadConfig({ env: { TLS_CERT_FILE: server.certFile, TLS_KEY_FILE: server.keyFile } });
  const next = loadConfig({ env: { TLS_CERT_FILE: server.certFile, TLS_KEY_FILE: server.keyFile, TLS_CLIENT_CA_FILE: ca.caFile, ROUTES: routes } });
  assert.throws(() => withReloadable(running, next), (err: Error) => /routes\.0\.clientCertificate: needs the CA/.test(err.message));
  assert.equal(withReloadable(next, next).routes[0]!.clientCertificate, 'required');
});

test('the example of docs/tls.md ("Client certificates (mTLS)") is a valid configuration, its files read as at start-up', (t) => {
  const page = readFileSync(new URL('../../docs/tls.md', import.meta.url), 'utf8');
  const example = /## Client certificates \(mTLS\)\n\n```json\n([\s\S]*?)\n```/.exec(page)?.[1];
  assert.ok(example !== undefined, 'docs/tls.md has the example');
  const dir = tempDir(t);
  mkdirSync(join(dir, 'certs'));
  copyFileSync(server.certFile, join(dir, 'certs', 'gateway.pem'));
  copyFileSync(server.keyFile, join(dir, 'certs', 'gateway.key'));
  copyFileSync(ca.caFile, join(dir, 'certs', 'clients-ca.pem'));
  writeFileSync(join(dir, 'gateway.json'), example);
  assert.deepEqual(checkConfiguration({ env: { GATEWAY_CONFIG: join(dir, 'gateway.json') } }).errors, []);
  assert.deepEqual(JSON.parse(example).routes.map((r: { clientCertificate: string }) => r.clientCertificate), ['required', 'optional']);
});

test('process: a missing or non-PEM client CA file stops the start, naming the file', async (t) => {
  const dir = tempDir(t);
  const notPem = join(dir, 'clients.pem');
  writeFileSync(notPem, '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
  const cases: [string, RegExp][] = [
    [join(dir, 'missing.pem'), /missing\.pem: cannot be read \(ENOENT\)/],
    [notPem, /clients\.pem: certificate 1 is not a valid PEM certificate/],
  ];
  const runs = await Promise.all(cases.map(async ([file]) => {
    const child = startNode(t, ['src/main.ts'], { env: gatewayEnv({ PORT: '0', TLS_CERT_FILE: server.certFile, TLS_KEY_FILE: server.keyFile, TLS_CLIENT_CA_FILE: file }) });
    return { exit: await exitWithin(child), stderr: child.stderr() };
  }));
  runs.forEach(({ exit, stderr }, i) => {
    assert.equal(exit.code, 1, `case ${i}: ${stderr}`);
    assert.match(stderr, cases[i]![1], `case ${i}`);
    assert.doesNotMatch(stderr, /\n\s+at /, `case ${i}: no stack trace`);
  });
});
