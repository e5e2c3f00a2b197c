/**
 * HTTPS on the main listener (docs/tls.md): certificate files, SNI, TLS versions, session
 * resumption, HSTS and the `__Host-` cookies, the expiry metric and warning, reloading by the
 * file watch (driven by the gateway's manual clock) and by SIGHUP (a real process), and the
 * start-up refusals that name the file at fault. Certificates are made by openssl for the file
 * (test/helpers/tls.ts); clients are node:tls and node:https with the test CA trusted.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect, type ConnectionOptions, type PeerCertificate, type TLSSocket } from 'node:tls';
import { checkConfiguration } from '../../src/cli/config-check.js';
import { startBackend } from '../helpers/backend.js';
import { DEMO, logged, sha256Hex, startGateway, type TestGateway } from '../helpers/gateway.js';
import { OWNERS } from '../helpers/dashboard.js';
import { parseMetrics, valueOf } from '../helpers/metrics.js';
import { exitWithin, startGatewayProcess, startNode, gatewayEnv, tempDir, waitForLog } from '../helpers/process.js';
import { makeTestCa, type Leaf } from '../helpers/tls.js';

const ca = makeTestCa();
const main = ca.leaf('main', ['localhost', '127.0.0.1']);
const api = ca.leaf('api', ['api.example.test']);
const wild = ca.leaf('wild', ['*.apps.example.test']);
const soon = ca.leaf('soon', ['soon.example.test'], 5);
const renewed = ca.leaf('renewed', ['localhost', '127.0.0.1']);

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTPS request with the test CA trusted (and a fresh connection: no agent). */
function https(url: string, { method = 'GET', body, headers = {} }: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = request(url, { method, ca: ca.caPem, agent: false, headers: { ...headers, ...(text === undefined ? {} : { 'content-type': 'application/json' }) } }, (res) => {
      let data = '';
      res.setEncoding('utf8').on('data', (chunk: string) => { data += chunk; }).on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

/** A TLS connection to the gateway; resolves once the handshake is done. */
function handshake(gw: TestGateway, options: ConnectionOptions = {}): Promise<TLSSocket> {
  const { port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(port), ca: ca.caPem, servername: 'localhost', ...options }, () => resolve(socket));
    socket.once('error', reject);
  });
}

async function peerOf(gw: TestGateway, options: ConnectionOptions = {}): Promise<PeerCertificate> {
  const socket = await handshake(gw, options);
  const peer = socket.getPeerCertificate();
  socket.destroy();
  return peer;
}

/** Sends one keep-alive request on an open TLS socket and reads its answer's status line. */
function statusOn(socket: TLSSocket, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    const onData = (chunk: Buffer) => {
      data += chunk.toString('latin1');
      const end = data.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(data);
      if (end !== -1 && length !== null && data.length >= end + 4 + Number(length[1])) {
        socket.off('data', onData);
        resolve(data.slice(0, data.indexOf('\r\n')));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n`);
  });
}

function filesOf(leaf: Leaf, dir: string, name = 'live'): Leaf {
  const certFile = join(dir, `${name}.pem`);
  const keyFile = join(dir, `${name}.key`);
  copyFileSync(leaf.certFile, certFile);
  copyFileSync(leaf.keyFile, keyFile);
  return { ...leaf, certFile, keyFile };
}

test('HTTPS: sign-in, an own answer and a proxied route over TLS, each with HSTS; SNI picks the certificate; TLS 1.1 is refused', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGateway(t, {
    overrides: {
      tls: { certFile: main.certFile, keyFile: main.keyFile, certificates: [{ serverNames: ['api.example.test'], certFile: api.certFile, keyFile: api.keyFile }, { serverNames: ['*.apps.example.test'], certFile: wild.certFile, keyFile: wild.keyFile }] },
      routes: [{ prefix: '/orders', targets: [backend.url], auth: 'public' }],
    },
  });
  assert.match(gw.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const base = gw.url.replace('127.0.0.1', 'localhost');

  const signIn = await https(`${base}/api/signin`, { method: 'POST', body: { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) } });
  assert.equal(signIn.status, 200, signIn.body);
  assert.equal(signIn.headers['strict-transport-security'], 'max-age=31536000');
  const { accessToken } = JSON.parse(signIn.body).message as { accessToken: string };
  const roles = await https(`${base}/api/roles`, { headers: { authorization: `Bearer ${accessToken}` } });
  assert.equal(roles.status, 200, roles.body);
  const proxied = await https(`${base}/orders/7`);
  assert.equal(proxied.status, 200, proxied.body);
  assert.equal(proxied.headers['strict-transport-security'], 'max-age=31536000');
  // Errors too, own and proxied: a browser takes HSTS from any answer over HTTPS.
  for (const path of ['/nothing-here', '/api/roles']) {
    const refused = await https(`${base}${path}`);
    assert.ok(refused.status >= 400, `${path}: ${refused.status}`);
    assert.equal(refused.headers['strict-transport-security'], 'max-age=31536000', `HSTS on ${path}'s ${refused.status}`);
  }
  assert.equal(backend.received.at(-1)?.url, '/orders/7');

  // SNI: the named certificate, a wildcard's one label, and the default for any other name.
  assert.equal((await peerOf(gw, { servername: 'api.example.test' })).fingerprint256, api.fingerprint256);
  assert.equal((await peerOf(gw, { servername: 'x.apps.example.test' })).fingerprint256, wild.fingerprint256);
  assert.equal((await peerOf(gw, { servername: 'a.b.apps.example.test', checkServerIdentity: () => undefined })).fingerprint256, main.fingerprint256);
  assert.equal((await peerOf(gw, { servername: 'localhost' })).fingerprint256, main.fingerprint256);

  // TLS 1.2 by default, not below; TLS 1.3 too.
  const v12 = await handshake(gw, { maxVersion: 'TLSv1.2' });
  assert.equal(v12.getProtocol(), 'TLSv1.2');
  v12.destroy();
  const v13 = await handshake(gw);
  assert.equal(v13.getProtocol(), 'TLSv1.3');
  v13.destroy();
  // The client offers TLS 1.1 (its own floor lowered): the gateway answers with the alert.
  await assert.rejects(handshake(gw, { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT:@SECLEVEL=0' }), { code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' });
  // The refused handshake was the client's only: the next one is served.
  assert.equal((await peerOf(gw)).fingerprint256, main.fingerprint256);
});

test('HTTPS: a second connection resumes the first one\'s session (TLS 1.2 ticket)', async (t) => {
  const gw = await startGateway(t, { overrides: { tls: { certFile: main.certFile, keyFile: main.keyFile } } });
  const first = await handshake(gw, { maxVersion: 'TLSv1.2' });
  const session = first.getSession();
  assert.ok(session !== undefined);
  assert.equal(first.isSessionReused(), false);
  first.destroy();
  const second = await handshake(gw, { maxVersion: 'TLSv1.2', session });
  assert.equal(second.isSessionReused(), true);
  second.destroy();
});

test('HTTPS: owner session and device cookies are Secure with the __Host- prefix; the session is read by that name', async (t) => {
  const gw = await startGateway(t, { overrides: { tls: { certFile: main.certFile, keyFile: main.keyFile } } });
  const base = gw.url.replace('127.0.0.1', 'localhost');
  const signIn = await https(`${base}/owner/v1/session`, { method: 'POST', body: { email: OWNERS.alice.email, password: OWNERS.alice.password } });
  assert.equal(signIn.status, 200, signIn.body);
  const cookies = (signIn.headers['set-cookie'] ?? []) as string[];
  const session = cookies.find((c) => c.startsWith('__Host-gw_session='));
  assert.ok(session !== undefined, JSON.stringify(cookies));
  assert.match(session, /; path=\//);
  assert.match(session, /; secure/i);
  assert.doesNotMatch(session, /domain=/i);
  assert.ok(cookies.some((c) => c.startsWith('__Host-gw_device=') && /; secure/i.test(c)), JSON.stringify(cookies));
  const me = await https(`${base}/owner/v1/session`, { headers: { cookie: session.split(';')[0]! } });
  assert.equal(me.status, 200, me.body);
  // The plain name is not the session over TLS (a sibling subdomain could set it).
  const plain = await https(`${base}/owner/v1/session`, { headers: { cookie: session.split(';')[0]!.replace('__Host-', '') } });
  assert.equal(plain.status, 401, plain.body);
});

test('HTTPS: the expiry metric per certificate, and a warning for one expiring within 14 days', async (t) => {
  const gw = await startGateway(t, {
    // No file watch: the month the clock moves below would be a million looks at the files.
    overrides: { tls: { certFile: main.certFile, keyFile: main.keyFile, watchIntervalMs: 0, certificates: [{ serverNames: ['soon.example.test'], certFile: soon.certFile, keyFile: soon.keyFile }] } },
  });
  const res = await https(`${gw.url.replace('127.0.0.1', 'localhost')}/metrics`);
  assert.equal(res.status, 200);
  const samples = parseMetrics(res.body);
  const mainLeft = valueOf(samples, 'gateway_tls_certificate_expiry_seconds', { certificate: main.certFile });
  const soonLeft = valueOf(samples, 'gateway_tls_certificate_expiry_seconds', { certificate: soon.certFile });
  assert.ok(mainLeft > 29 * 86_400 && mainLeft <= 30 * 86_400, String(mainLeft));
  assert.ok(soonLeft > 4 * 86_400 && soonLeft <= 5 * 86_400, String(soonLeft));
  const warned = logged(gw, 'TLS certificate expires within 14 days');
  assert.deepEqual(warned.map((line) => [line.certificate, line.daysLeft]), [[soon.certFile, 4]]);
  // A month on (the gateway's clock): both have expired, and the gauge says so.
  gw.clock.advance(31 * 86_400_000);
  const later = parseMetrics((await https(`${gw.url.replace('127.0.0.1', 'localhost')}/metrics`)).body);
  assert.ok(valueOf(later, 'gateway_tls_certificate_expiry_seconds', { certificate: main.certFile }) < 0);
});

test('HTTPS: a plain-HTTP request on the TLS port is answered 400 in the envelope (with its access line), not cut; HTTPS goes on', async (t) => {
  const gw = await startGateway(t, { overrides: { tls: { certFile: main.certFile, keyFile: main.keyFile } } });
  const { port } = new URL(gw.url);
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = createConnection(Number(port), '127.0.0.1', () => socket.write('GET /api/roles HTTP/1.1\r\nHost: localhost\r\n\r\n'));
    let data = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => { data += chunk; }).on('end', () => resolve(data)).on('error', reject);
  });
  assert.match(answer, /^HTTP\/1\.1 400 Bad Request\r\n/);
  const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { success: boolean; message: { code: string; description: string } };
  assert.deepEqual({ success: body.success, code: body.message.code }, { success: false, code: 'invalid_request' });
  assert.match(body.message.description, /https:\/\//);
  const requestId = /\r\nx-request-id: ([\w-]+)/i.exec(answer)?.[1];
  assert.ok(requestId !== undefined);
  assert.equal(logged(gw, 'request').filter((line) => line.requestId === requestId && line.status === 400).length, 1, 'one access line');
  // The same port still speaks TLS.
  assert.equal((await https(`${gw.url}/healthz`)).status, 200);
});

test('HTTPS: a connection past its handshake that sent no request is cut at close, not waited on until the deadline', { timeout: 60_000 }, async (t) => {
  const gw = await startGateway(t, { overrides: { tls: { certFile: main.certFile, keyFile: main.keyFile }, server: { shutdownTimeoutMs: 3_600_000 } } });
  const unused = await handshake(gw);
  t.after(() => unused.destroy());
  unused.on('error', () => {});
  // The client is done with the handshake before the gateway is; the gateway's session ticket
  // (TLS 1.3 sends it once the handshake is over) tells that its side is done too.
  await new Promise<void>((resolve) => unused.once('session', () => resolve()));
  const cut = new Promise<void>((resolve) => unused.once('close', () => resolve()));
  await gw.close();
  await cut;
  assert.equal(logged(gw, 'shutdown deadline passed: cut the connections still open').length, 0);
});

test('reload by the file watch: new handshakes get the new certificate, an open connection goes on; a bad file keeps the one in use', async (t) => {
  const live = filesOf(main, tempDir(t));
  const gw = await startGateway(t, { overrides: { tls: { certFile: live.certFile, keyFile: live.keyFile, watchIntervalMs: 1000 } } });
  const open = await handshake(gw);
  assert.equal(await statusOn(open, '/healthz'), 'HTTP/1.1 200 OK');

  filesOf(renewed, join(live.certFile, '..'));
  gw.clock.advance(1000);
  assert.equal(logged(gw, 'TLS certificates reloaded').length, 1);
  assert.equal((await peerOf(gw)).fingerprint256, renewed.fingerprint256);
  // The connection opened before goes on, with the certificate it was made with.
  assert.equal(await statusOn(open, '/healthz'), 'HTTP/1.1 200 OK');
  assert.equal(open.getPeerCertificate().fingerprint256, main.fingerprint256);
  open.destroy();

  // A half-written certificate: one error line, the renewed one stays.
  writeFileSync(live.certFile, '-----BEGIN CERTIFICATE-----\nnot yet\n');
  gw.clock.advance(1000);
  gw.clock.advance(1000);
  const errors = logged(gw, 'TLS certificates changed but cannot be used: still serving the previous ones');
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]!.problem), /live\.pem: is not a PEM certificate/);
  assert.doesNotMatch(JSON.stringify(gw.logs), /PRIVATE KEY/);
  assert.equal((await peerOf(gw)).fingerprint256, renewed.fingerprint256);
});

test('process: SIGHUP reloads the certificates (with the watch off)', async (t) => {
  const live = filesOf(main, tempDir(t));
  const gw = await startGatewayProcess(t, { TLS_CERT_FILE: live.certFile, TLS_KEY_FILE: live.keyFile, TLS_WATCH_INTERVAL_MS: '0' });
  assert.match(gw.url, /^https:/);
  const target = { url: gw.url } as TestGateway;
  assert.equal((await peerOf(target)).fingerprint256, main.fingerprint256);
  filesOf(renewed, join(live.certFile, '..'));
  gw.child.process.kill('SIGHUP');
  await waitForLog(gw.child, (line) => line.msg === 'TLS certificates reloaded');
  assert.equal((await peerOf(target)).fingerprint256, renewed.fingerprint256);
});

test('process: a missing, unreadable, non-PEM or mismatched certificate or key stops the start, naming the file', async (t) => {
  const dir = tempDir(t);
  const notPem = join(dir, 'not.pem');
  writeFileSync(notPem, 'hello\n');
  const folder = join(dir, 'folder.pem');
  mkdirSync(folder);
  const cases: [Record<string, string>, RegExp][] = [
    [{ TLS_CERT_FILE: join(dir, 'missing.pem'), TLS_KEY_FILE: main.keyFile }, /missing\.pem: cannot be read \(ENOENT\)/],
    [{ TLS_CERT_FILE: folder, TLS_KEY_FILE: main.keyFile }, /folder\.pem: cannot be read \(EISDIR\)/],
    [{ TLS_CERT_FILE: notPem, TLS_KEY_FILE: main.keyFile }, /not\.pem: is not a PEM certificate/],
    [{ TLS_CERT_FILE: main.certFile, TLS_KEY_FILE: notPem }, /not\.pem: is not a PEM private key/],
    [{ TLS_CERT_FILE: main.certFile, TLS_KEY_FILE: api.keyFile }, new RegExp(`api\\.key: is not the key of the certificate in ${main.certFile.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`)],
    [{ TLS_CERT_FILE: main.certFile }, /tls\.keyFile: give both tls\.certFile and tls\.keyFile/],
  ];
  const runs = await Promise.all(cases.map(async ([env]) => {
    const child = startNode(t, ['src/main.ts'], { env: gatewayEnv({ PORT: '0', ...env }) });
    return { exit: await exitWithin(child), stderr: child.stderr() };
  }));
  runs.forEach(({ exit, stderr }, i) => {
    assert.equal(exit.code, 1, `case ${i}: ${stderr}`);
    assert.match(stderr, cases[i]![1], `case ${i}`);
    assert.doesNotMatch(stderr, /\n\s+at /, `case ${i}: no stack trace`);
  });
});

test('config check: each certificate problem is an error naming its file, as at start-up', (t) => {
  const dir = tempDir(t);
  const notPem = join(dir, 'not.pem');
  writeFileSync(notPem, 'hello\n');
  const config = join(dir, 'gateway.json');
  writeFileSync(config, JSON.stringify({ tls: { certFile: main.certFile, keyFile: api.keyFile, certificates: [{ serverNames: ['api.example.test'], certFile: notPem, keyFile: api.keyFile }] } }));
  const report = checkConfiguration({ env: { GATEWAY_CONFIG: config } });
  const tls = report.errors.filter((e) => e.startsWith('TLS: '));
  assert.equal(tls.length, 2, JSON.stringify(report.errors));
  assert.match(tls[0]!, /api\.key: is not the key of the certificate in .*main\.pem/);
  assert.match(tls[1]!, /not\.pem: is not a PEM certificate/);
  const good = join(dir, 'good.json');
  writeFileSync(good, JSON.stringify({ tls: { certFile: main.certFile, keyFile: main.keyFile } }));
  assert.deepEqual(checkConfiguration({ env: { GATEWAY_CONFIG: good } }).errors.filter((e) => e.startsWith('TLS: ')), []);
});

test('the example of docs/tls.md ("HTTPS and SNI") is a valid configuration, its certificates read as at start-up', (t) => {
  const page = readFileSync(new URL('../../docs/tls.md', import.meta.url), 'utf8');
  const example = /## HTTPS and SNI\n\n```json\n([\s\S]*?)\n```/.exec(page)?.[1];
  assert.ok(example !== undefined, 'docs/tls.md has the example');
  const dir = tempDir(t);
  mkdirSync(join(dir, 'certs'));
  for (const [name, leaf] of [['gateway', main], ['api', api], ['apps', wild]] as const) {
    copyFileSync(leaf.certFile, join(dir, 'certs', `${name}.pem`));
    copyFileSync(leaf.keyFile, join(dir, 'certs', `${name}.key`));
  }
  writeFileSync(join(dir, 'gateway.json'), example);
  const report = checkConfiguration({ env: { GATEWAY_CONFIG: join(dir, 'gateway.json') } });
  assert.deepEqual(report.errors, []);
  assert.equal(JSON.parse(example).tls.certificates.length, 2);
});

/** A plain-HTTP request to the redirect listener, with the Host header given (not fetch's). */
function plain(url: string, { method = 'GET', host }: { method?: string; host?: string | undefined }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(url);
    const socket = createConnection({ host: '127.0.0.1', port: Number(port) }, () => {
      socket.end(`${method} /orders/7?x=1 HTTP/1.1\r\n${host === undefined ? '' : `Host: ${host}\r\n`}Connection: close\r\nContent-Length: 0\r\n\r\n`);
    });
    let data = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => { data += chunk; }).on('error', reject).on('end', () => {
      const [head = '', body = ''] = data.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
  });
}

test('redirect listener: 308 to the same URL over HTTPS, ACME challenges answered while set, each request an exchange', async (t) => {
  const gw = await startGateway(t, { overrides: { tls: { certFile: main.certFile, keyFile: main.keyFile, redirectPort: 0 } } });
  const redirectUrl = gw.running!.redirectUrl!;
  assert.match(redirectUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
  const httpsPort = new URL(gw.url).port;

  for (const method of ['GET', 'POST']) {
    const moved = await plain(redirectUrl, { method, host: 'api.example.test:8080' });
    assert.equal(moved.status, 308, `${method}: ${moved.body}`);
    assert.equal(moved.headers.location, `https://api.example.test:${httpsPort}/orders/7?x=1`);
    assert.equal(moved.headers['strict-transport-security'], undefined, 'HSTS is sent over HTTPS only');
  }
  for (const host of [undefined, 'evil.example/x', 'a b']) {
    const refused = await plain(redirectUrl, { host });
    assert.equal(refused.status, 400, `${host}: ${refused.body}`);
    assert.equal(JSON.parse(refused.body).message.code, 'invalid_request');
  }

  const token = 'tok_0123456789abcdefghijkl';
  const path = `${redirectUrl}/.well-known/acme-challenge/${token}`;
  const unknown = await fetch(path);
  assert.equal(unknown.status, 404);
  assert.equal(((await unknown.json()) as { message: { code: string } }).message.code, 'not_found');
  await gw.running!.challenges.set(token, `${token}.thumbprint`, 60_000);
  const answered = await fetch(path);
  assert.equal(answered.status, 200);
  assert.equal(answered.headers.get('content-type'), 'text/plain');
  assert.equal(await answered.text(), `${token}.thumbprint`);
  await gw.running!.challenges.delete(token);
  assert.equal((await fetch(path)).status, 404);
  // An answer its order never deleted lapses (the gateway's clock moves; the store's TTL passes).
  await gw.running!.challenges.set(token, `${token}.thumbprint`, 60_000);
  gw.clock.advance(60_001);
  assert.equal((await fetch(path)).status, 404);

  const lines = gw.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'request');
  assert.deepEqual(lines.map((line) => line.status), [308, 308, 400, 400, 400, 404, 200, 404, 404]);
});

test('redirect listener: the Location names the public HTTPS port, none for 443; it needs TLS', async (t) => {
  const gw = await startGateway(t, { overrides: { tls: { certFile: main.certFile, keyFile: main.keyFile, redirectPort: 0, publicHttpsPort: 443 } } });
  const moved = await plain(gw.running!.redirectUrl!, { host: 'api.example.test' });
  assert.equal(moved.headers.location, 'https://api.example.test/orders/7?x=1');
  const report = checkConfiguration({ env: { HTTP_REDIRECT_PORT: '8081' } });
  assert.ok(report.errors.some((e) => /^tls\.redirectPort .*: redirects to HTTPS/.test(e)), JSON.stringify(report.errors));
});
