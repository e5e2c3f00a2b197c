/**
 * ACME end to end through the gateway itself, against Debian's pebble: pebble validates HTTP-01
 * by fetching the answer from the gateway's redirect listener (pebble's `httpPort` is that
 * listener's port), then a client that trusts only pebble's issuing root sees the ordered
 * certificate on the main listener. A real process (file state, pebble's own HTTPS trusted
 * through NODE_EXTRA_CA_CERTS, as an operator would), then two in-process instances on one
 * Redis (one orders, both serve it; the HTTP-01 answers shared), and the temporary
 * self-signed certificate served while no order has succeeded.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { request } from 'node:https';
import { connect, type PeerCertificate } from 'node:tls';
import acme from 'acme-client';
import { checkConfiguration } from '../../src/cli/config-check.js';
import { metricsText, startGateway, type TestGateway } from '../helpers/gateway.js';
import { pebbleSuite, startPebble, type Pebble } from '../helpers/pebble.js';
import { startGatewayProcess, tempDir, waitForLog } from '../helpers/process.js';
import { freePort, rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';
import { makeTestCa } from '../helpers/tls.js';

const IN_USE = 'acme: certificate in use';
/**
 * An order takes pebble a second or two, and acme-client polls it at 5 s at least: a loaded
 * machine (two cores, other suites) has made that half a minute. Process lifetimes and waits are
 * sized for that, not for the quiet case.
 */
const ORDER_LIMIT_MS = 90_000;

async function pebbleFor(t: TestContext, httpPort: number, tlsPort?: number): Promise<Pebble> {
  const pebble = await startPebble({ httpPort, ...(tlsPort === undefined ? {} : { tlsPort }) });
  t.after(() => pebble.stop());
  return pebble;
}

/** The certificate the main listener at `url` serves for `servername`, and whether `ca` verifies it. */
function peerOf(url: string, servername: string, ca?: string): Promise<{ peer: PeerCertificate; authorized: boolean; error: Error | null }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(port), servername, ...(ca === undefined ? {} : { ca }), rejectUnauthorized: false }, () => {
      resolve({ peer: socket.getPeerCertificate(), authorized: socket.authorized, error: socket.authorizationError });
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** A TLS handshake offering `protocols` (ALPN); the certificate served. */
function alpnHandshake(url: string, servername: string, protocols: string[], ca: string): Promise<PeerCertificate> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(port), servername, ca, ALPNProtocols: protocols }, () => {
      resolve(socket.getPeerCertificate());
      socket.destroy();
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before the handshake')));
  });
}

/** One GET over HTTPS to the gateway at `url`, asking for `servername`, trusting `ca`. */
function httpsGet(url: string, path: string, servername: string, ca: string): Promise<{ status: number; hsts: string | undefined }> {
  return new Promise((resolve, reject) => {
    request(`${url}${path}`, { servername, ca, agent: false }, (res) => {
      res.resume().on('end', () => resolve({ status: res.statusCode!, hsts: res.headers['strict-transport-security'] }));
    }).on('error', reject).end();
  });
}

/** Resolves once `gw` has logged `msg` the `nth` time (its log is in memory; looked at every 25 ms, at most `limitMs`). */
async function untilLogged(gw: TestGateway, msg: string, nth = 1, limitMs = ORDER_LIMIT_MS): Promise<Record<string, unknown>> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const found = gw.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === msg)[nth - 1];
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`no "${msg}" within ${limitMs} ms:\n${gw.logs.join('\n')}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('ACME through the gateway, against pebble', pebbleSuite(), () => {
  test('process: HTTPS with the ordered certificate after HTTP-01 on the redirect listener; kept in the state file (0600) and served again after a restart without the CA', async (t) => {
    const redirectPort = await freePort();
    const pebble = await pebbleFor(t, redirectPort);
    const stateFile = join(tempDir(t), 'acme.json');
    const env = {
      ACME_DIRECTORY_URL: pebble.directoryUrl, ACME_DOMAINS: 'a.gateway.test,b.gateway.test', ACME_EMAIL: 'ops@example.com',
      HTTP_REDIRECT_PORT: String(redirectPort), ACME_STATE_FILE: stateFile, NODE_EXTRA_CA_CERTS: pebble.caFile,
    };
    const gw = await startGatewayProcess(t, env, { limitMs: ORDER_LIMIT_MS });
    assert.match(gw.url, /^https:/);
    const inUse = await waitForLog(gw.child, (line) => line.msg === IN_USE, ORDER_LIMIT_MS);
    assert.deepEqual(inUse.domains, ['a.gateway.test', 'b.gateway.test']);

    const root = await pebble.issuingRoot();
    const served = await peerOf(gw.url, 'b.gateway.test', root);
    assert.equal(served.authorized, true, String(served.error));
    assert.match(served.peer.subjectaltname ?? '', /DNS:a\.gateway\.test/);
    assert.match(served.peer.subjectaltname ?? '', /DNS:b\.gateway\.test/);
    // A client that trusts only the system's roots (and the test CA of pebble's own HTTPS) does not trust pebble's issue.
    assert.equal((await peerOf(gw.url, 'a.gateway.test')).authorized, false);

    assert.equal(statSync(stateFile).mode & 0o777, 0o600);
    const kept = JSON.parse(readFileSync(stateFile, 'utf8')) as { accountKey: string; certificate: { certPem: string } };
    assert.equal(new X509Certificate(kept.certificate.certPem).fingerprint256, served.peer.fingerprint256);
    assert.doesNotMatch(gw.child.stdout(), /PRIVATE KEY/, 'no key reaches the log');

    gw.child.process.kill('SIGTERM');
    await gw.child.exited;
    pebble.stop();
    const again = await startGatewayProcess(t, env, { limitMs: ORDER_LIMIT_MS });
    await waitForLog(again.child, (line) => line.msg === IN_USE, ORDER_LIMIT_MS);
    assert.equal((await peerOf(again.url, 'a.gateway.test', root)).peer.fingerprint256, served.peer.fingerprint256);
    assert.ok(!again.logs().some((line) => line.msg === 'acme: ordering a certificate'), 'the stored certificate is used, not ordered again');
  });

  test('until an order succeeds the main listener serves a temporary self-signed certificate for the first domain; a failed order is retried with backoff', async (t) => {
    // pebble validates on a port nothing listens on: every order fails.
    const pebble = await pebbleFor(t, await freePort());
    acme.axios.defaults.httpsAgent = pebble.agent;
    // A request timeout of 1 s bounds the handshake, and the wait for a first record, to 1 s.
    const gw = await startGateway(t, { overrides: { server: { requestTimeoutMs: 1000 }, management: { port: 0 }, acme: { directoryUrl: pebble.directoryUrl, domains: ['c.gateway.test'], stateFile: join(tempDir(t), 'acme.json') }, tls: { redirectPort: 0 } } });
    assert.match(gw.url, /^https:/);
    const failed = await untilLogged(gw, 'acme: no certificate obtained; retrying');
    assert.equal(failed.retryInMs, 60_000);
    gw.clock.advance(60_000);
    assert.equal((await untilLogged(gw, 'acme: no certificate obtained; retrying', 2)).retryInMs, 120_000);
    assert.match(await metricsText({ url: gw.managementUrl! }), /^gateway_acme_orders_total\{outcome="failed"\} 2$/m);
    const { peer, authorized } = await peerOf(gw.url, 'c.gateway.test', await pebble.issuingRoot());
    assert.equal(authorized, false);
    assert.equal(peer.subject.CN, 'c.gateway.test');
    assert.equal(peer.issuer.CN, 'c.gateway.test', 'self-signed');
    const res = await fetch(`${gw.url}/healthz`).catch((err: Error) => err);
    assert.ok(res instanceof Error, 'an ordinary client refuses the temporary certificate');
    // A connection that sends nothing, or half a record header, is closed by the gateway (the wait for the first record is bounded).
    for (const bytes of [Buffer.alloc(0), Buffer.from([0x16, 0x03])]) {
      const socket = createConnection(Number(new URL(gw.url).port), '127.0.0.1');
      socket.on('error', () => {});
      socket.write(bytes);
      let received = 0;
      socket.on('data', (chunk: Buffer) => { received += chunk.length; });
      await once(socket, 'close');
      assert.equal(received, 0);
    }
    assert.ok(gw.clock.pendingTimers() > 0, 'the retry waits on the clock');
    await gw.close();
    assert.equal(gw.clock.pendingTimers(), 0, 'closing the gateway stops the ACME manager\'s timer');
  });

  test('TLS-ALPN-01 on the main listener (no redirect listener): pebble validates by an acme-tls/1 handshake; ordinary clients are served by the HTTPS server as before', async (t) => {
    const mainPort = await freePort();
    // HTTP-01 would fail: nothing listens on pebble's HTTP port.
    const pebble = await pebbleFor(t, await freePort(), mainPort);
    acme.axios.defaults.httpsAgent = pebble.agent;
    const gw = await startGateway(t, { overrides: { server: { port: mainPort }, acme: { directoryUrl: pebble.directoryUrl, domains: ['alpn.gateway.test'], stateFile: join(tempDir(t), 'acme.json') } } });
    assert.equal(gw.running!.redirectUrl, undefined);
    await untilLogged(gw, IN_USE);
    const root = await pebble.issuingRoot();
    const served = await peerOf(gw.url, 'alpn.gateway.test', root);
    assert.equal(served.authorized, true, String(served.error));

    // An ordinary request, and a client offering acme-tls/1 among others, reach the HTTPS server.
    const health = await httpsGet(gw.url, '/healthz', 'alpn.gateway.test', root);
    assert.equal(health.status, 200);
    assert.equal(health.hsts, 'max-age=31536000');
    const mixed = await alpnHandshake(gw.url, 'alpn.gateway.test', ['http/1.1', 'acme-tls/1'], root);
    assert.equal(mixed.fingerprint256, served.peer.fingerprint256);
    // acme-tls/1 alone, with no challenge waiting for the name: the handshake fails, the gateway goes on.
    await assert.rejects(alpnHandshake(gw.url, 'alpn.gateway.test', ['acme-tls/1'], root));
    // Bytes that are not TLS are the HTTPS server's to refuse, as before.
    const plain = await fetch(gw.url.replace('https:', 'http:') + '/healthz').catch((err: Error) => err);
    assert.ok(plain instanceof Error || plain.status === 400, 'plain HTTP is not served on the HTTPS port');
    assert.equal((await httpsGet(gw.url, '/healthz', 'alpn.gateway.test', root)).status, 200);

    // 30 days before it expires (on the gateway's clock) it is renewed, and the new one served.
    gw.clock.advance(Date.parse(served.peer.valid_to) - 30 * 86_400_000 - gw.clock.now() + 1000);
    await untilLogged(gw, IN_USE, 2);
    const renewed = await peerOf(gw.url, 'alpn.gateway.test', root);
    assert.equal(renewed.authorized, true, String(renewed.error));
    assert.notEqual(renewed.peer.fingerprint256, served.peer.fingerprint256);
  });

  test('process, WORKERS=2 on Redis: one worker orders, both serve the certificate; the CA may reach either on the shared redirect port', redisSuite(), async (t) => {
    const redis = await startRedis(t);
    const redirectPort = await freePort();
    const pebble = await pebbleFor(t, redirectPort);
    const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const gw = await startGatewayProcess(t, {
      WORKERS: '2', REDIS_URL: redis.url, SIGNING_KEYS: JSON.stringify([{ kid: 'acme-workers', alg: 'EdDSA', pem }]),
      ACME_DIRECTORY_URL: pebble.directoryUrl, ACME_DOMAINS: 'workers.gateway.test', HTTP_REDIRECT_PORT: String(redirectPort), NODE_EXTRA_CA_CERTS: pebble.caFile,
    }, { limitMs: ORDER_LIMIT_MS });
    for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === IN_USE && line.worker === worker, ORDER_LIMIT_MS);
    assert.equal(gw.logs().filter((line) => line.msg === 'acme: ordering a certificate').length, 1, 'one worker ordered');
    const root = await pebble.issuingRoot();
    const seen = new Set<string>();
    // Fresh connections, handed to the workers in turn.
    for (let i = 0; i < 6; i++) {
      const { peer, authorized, error } = await peerOf(gw.url, 'workers.gateway.test', root);
      assert.equal(authorized, true, String(error));
      seen.add(peer.fingerprint256);
    }
    assert.equal(seen.size, 1, 'every worker serves the same certificate');
  });

  test('Redis: two instances, one order, both serve the certificate; the HTTP-01 answers are shared, the lock released', redisSuite(), async (t) => {
    const redis = await startRedis(t);
    const redirectPort = await freePort();
    const pebble = await pebbleFor(t, redirectPort);
    acme.axios.defaults.httpsAgent = pebble.agent;
    const acmeSettings = { directoryUrl: pebble.directoryUrl, domains: ['shared.gateway.test'] };
    const [b, a] = await Promise.all([
      startGateway(t, { overrides: { redis: { url: redis.url }, management: { port: 0 }, acme: acmeSettings, tls: { redirectPort } } }),
      startGateway(t, { overrides: { redis: { url: redis.url }, management: { port: 0 }, acme: acmeSettings, tls: { redirectPort: 0 } } }),
    ]);
    await Promise.all([untilLogged(a, IN_USE), untilLogged(b, IN_USE)]);
    const orders = [a, b].flatMap((gw) => gw.logs.filter((line) => line.includes('"acme: ordering a certificate"')));
    assert.equal(orders.length, 1, 'one instance ordered');
    const issued = await Promise.all([a, b].map(async (gw) => /^gateway_acme_orders_total\{outcome="issued"\} (\d+)$/m.exec(await metricsText({ url: gw.managementUrl! }))?.[1] ?? '0'));
    assert.deepEqual(issued.sort(), ['0', '1'], 'the metric counts the one order where it was made');
    const root = await pebble.issuingRoot();
    const [fromA, fromB] = await Promise.all([peerOf(a.url, 'shared.gateway.test', root), peerOf(b.url, 'shared.gateway.test', root)]);
    assert.equal(fromA.authorized, true, String(fromA.error));
    assert.equal(fromB.peer.fingerprint256, fromA.peer.fingerprint256);

    const raw = await rawRedisClient(t, redis);
    assert.equal(await raw.exists('gw:acme:lock'), 0, 'the lock was released');
    const ttl = await raw.pttl('gw:acme:cert');
    assert.ok(ttl > 0 && Math.abs(Date.now() + ttl - Date.parse(fromA.peer.valid_to)) < 60_000, `the certificate's key lives until it expires (PTTL ${ttl})`);

    // An answer set by one instance is served by the other's redirect listener.
    const token = 'tok_shared_0123456789abcdef';
    await a.running!.challenges.set(token, `${token}.thumbprint`, 60_000);
    const answered = await fetch(`${b.running!.redirectUrl}/.well-known/acme-challenge/${token}`);
    assert.equal(answered.status, 200);
    assert.equal(await answered.text(), `${token}.thumbprint`);
  });
});

test('config: ACME needs its domains, EAB both halves, host names without wildcards; the EAB key is redacted', () => {
  const base = { ACME_DIRECTORY_URL: 'https://acme-staging-v02.api.letsencrypt.org/directory', ACME_DOMAINS: 'api.example.com,www.example.com', HTTP_REDIRECT_PORT: '80' };
  const valid = checkConfiguration({ env: { ...base, ACME_EAB_KID: 'kid-1', ACME_EAB_HMAC_KEY: 'zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W' } });
  assert.deepEqual(valid.errors, []);
  assert.doesNotMatch(JSON.stringify(valid.settings), /zWNDZM6e/, 'the EAB HMAC key is not shown');
  const cases: [Record<string, string | undefined>, RegExp][] = [
    [{ ACME_DOMAINS: undefined }, /^acme\.domains\b.*set acme\.domains/],
    [{ ACME_EAB_KID: 'kid-1' }, /^acme\.eabHmacKey\b.*give both/],
    [{ ACME_DOMAINS: '*.example.com' }, /^acme\.domains\.0\b.*wildcard/],
    [{ ACME_DIRECTORY_URL: undefined }, /^acme\.directoryUrl\b.*set acme\.directoryUrl/],
  ];
  for (const [change, expected] of cases) {
    const env = Object.fromEntries(Object.entries({ ...base, ...change }).filter((entry): entry is [string, string] => entry[1] !== undefined));
    const report = checkConfiguration({ env });
    assert.ok(report.errors.some((e) => expected.test(e)), `${JSON.stringify(change)}: ${JSON.stringify(report.errors)}`);
  }
});

test('a certificate set by ACME is served for its names beside the files\' ones, survives a reload of the files, and a pair that does not match is refused whole', async (t) => {
  const ca = makeTestCa();
  const files = ca.leaf('files', ['localhost', '127.0.0.1']);
  const ordered = ca.leaf('ordered', ['ordered.example.test']);
  const other = ca.leaf('other', ['ordered.example.test']);
  const gw = await startGateway(t, { overrides: { tls: { certFile: files.certFile, keyFile: files.keyFile } } });
  const certificates = gw.running!.certificates!;
  const pair = (leaf: typeof ordered, key = leaf) => ({ serverNames: ['ordered.example.test'], certPem: readFileSync(leaf.certFile, 'utf8'), keyPem: readFileSync(key.keyFile, 'utf8') });
  certificates.setCertificate('acme', pair(ordered));
  assert.equal((await peerOf(gw.url, 'ordered.example.test', ca.caPem)).peer.fingerprint256, ordered.fingerprint256);
  assert.equal((await peerOf(gw.url, 'localhost', ca.caPem)).peer.fingerprint256, files.fingerprint256, 'the files\' pair stays the default');

  assert.equal(certificates.reload('test'), true);
  assert.equal((await peerOf(gw.url, 'ordered.example.test', ca.caPem)).peer.fingerprint256, ordered.fingerprint256, 'kept across the reload');

  assert.throws(() => certificates.setCertificate('acme', pair(other, ordered)), { name: 'CertificateError' });
  assert.equal((await peerOf(gw.url, 'ordered.example.test', ca.caPem)).peer.fingerprint256, ordered.fingerprint256, 'the refused pair changed nothing');
  assert.doesNotMatch(gw.logs.join('\n'), /PRIVATE KEY/);
});

test('redirect listener with Redis: a challenge looked up while Redis is down is a 503 in the envelope, not a 500', redisSuite(), async (t) => {
  const ca = makeTestCa();
  const files = ca.leaf('files', ['localhost']);
  const redis = await startRedis(t);
  const gw = await startGateway(t, { overrides: { redis: { url: redis.url, commandTimeoutMs: 500 }, tls: { certFile: files.certFile, keyFile: files.keyFile, redirectPort: 0 } } });
  const token = 'tok_down_0123456789abcdefgh';
  await gw.running!.challenges.set(token, `${token}.thumbprint`, 60_000);
  const path = `${gw.running!.redirectUrl}/.well-known/acme-challenge/${token}`;
  assert.equal((await fetch(path)).status, 200);
  await redis.kill();
  const down = await fetch(path);
  assert.equal(down.status, 503);
  assert.equal(((await down.json()) as { message: { code: string } }).message.code, 'store_unavailable');
});
