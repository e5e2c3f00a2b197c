/**
 * ACME end to end against Debian's pebble, with real HTTP-01 validation: pebble resolves the
 * ordered names through pebble-challtestsrv's DNS (every name → 127.0.0.1) and fetches the
 * challenge from a small responder this file starts on the port pebble is told to use.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import acme from 'acme-client';
import { createAcmeManager, createFileAcmeStore, temporaryCertificate, type AcmeCertificate, type AcmeChallenges } from '../../src/tls/acme.js';
import { ManualClock } from '../helpers/clock.js';
import { freePort, silentLog } from '../helpers/redis.js';
import { makeTestCa } from '../helpers/tls.js';

const pebbleInstalled = spawnSync('pebble', ['-h'], { stdio: 'ignore' }).error === undefined;
const skip = !pebbleInstalled && !process.env.CI ? 'pebble is not installed (apt-get install pebble): ACME tests SKIPPED' : false;
if (skip) console.warn(`\n*** ${skip} ***\n`);

const DAY_MS = 24 * 3600 * 1000;

describe('ACME against pebble', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-acme-'));
  const children: ChildProcess[] = [];
  const answers = new Map<string, string>();
  const challenges: AcmeChallenges = { set: (t, k) => void answers.set(t, k), delete: (t) => void answers.delete(t) };
  let responder: Server;
  let directoryUrl = '';
  let pebbleCa = '';

  before(async () => {
    const ca = makeTestCa();
    const leaf = ca.leaf('pebble', ['localhost', '127.0.0.1']);
    const [httpPort, acmePort, mgmtPort, dnsPort, challMgmt] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
    responder = createServer((req, res) => {
      const token = req.url?.replace('/.well-known/acme-challenge/', '') ?? '';
      const answer = answers.get(token);
      res.writeHead(answer === undefined ? 404 : 200).end(answer ?? '');
    });
    responder.listen(httpPort, '127.0.0.1');
    await once(responder, 'listening');
    const dns = spawn('pebble-challtestsrv', ['-dns01', `127.0.0.1:${dnsPort}`, '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${challMgmt}`, '-defaultIPv4', '127.0.0.1', '-defaultIPv6', ''], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(dns);
    const config = join(dir, 'pebble.json');
    writeFileSync(config, JSON.stringify({ pebble: { listenAddress: `127.0.0.1:${acmePort}`, managementListenAddress: `127.0.0.1:${mgmtPort}`, certificate: leaf.certFile, privateKey: leaf.keyFile, httpPort, tlsPort: 5001, ocspResponderURL: '', externalAccountBindingRequired: false } }));
    const pebble = spawn('pebble', ['-config', config, '-dnsserver', `127.0.0.1:${dnsPort}`], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0' } });
    children.push(pebble);
    let out = '';
    pebble.stdout!.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      pebble.stdout!.on('data', (chunk: string) => { out += chunk; if (out.includes('ACME directory available')) resolve(); });
      pebble.once('exit', (code) => reject(new Error(`pebble exited ${code}: ${out}`)));
    });
    pebble.stdout!.on("data", (c: string) => { if (process.env.ACME_DEBUG) process.stderr.write(c); });
    directoryUrl = `https://127.0.0.1:${acmePort}/dir`;
    pebbleCa = ca.caPem;
    acme.axios.defaults.httpsAgent = new (await import('node:https')).Agent({ ca: pebbleCa });
  });

  after(() => {
    for (const child of children) child.kill();
    responder?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function sinkWaiting() {
    const got: AcmeCertificate[] = [];
    let wake: (() => void) | undefined;
    return {
      got,
      sink: { setCertificate: (_id: string, c: AcmeCertificate) => { got.push(c); wake?.(); } },
      next: (n: number) => new Promise<void>((resolve) => { wake = () => { if (got.length >= n) resolve(); }; if (got.length >= n) resolve(); }),
    };
  }

  const settings = (domains: string[]) => ({ directoryUrl, domains, email: 'ops@example.com', renewBeforeDays: 30 });

  test('orders by HTTP-01, stores the certificate (0600), serves it after a restart, renews 30 days before expiry', async () => {
    const file = join(dir, 'acme-state.json');
    const store = createFileAcmeStore(file);
    const clock = new ManualClock(Date.now());
    const { got, sink, next } = sinkWaiting();
    const manager = createAcmeManager({ settings: settings(["a.gateway.test", "b.gateway.test"]), store, sink, challenges, skipChallengeVerification: true, scheduler: clock, log: silentLog });
    await manager.start();
    assert.equal(got.length, 1);
    const info = acme.crypto.readCertificateInfo(got[0]!.certPem);
    assert.deepEqual([...info.domains.altNames].sort(), ['a.gateway.test', 'b.gateway.test']);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(readFileSync(file, 'utf8').includes(got[0]!.certPem.split('\n')[1]!));

    const restarted = sinkWaiting();
    const second = createAcmeManager({ settings: settings(['a.gateway.test', 'b.gateway.test']), store: createFileAcmeStore(file), sink: restarted.sink, challenges: { set: () => assert.fail('a restart must not order'), delete: () => {} }, scheduler: new ManualClock(Date.now()), log: silentLog });
    await second.start();
    assert.equal(restarted.got[0]!.certPem, got[0]!.certPem);
    second.stop();

    clock.advance(info.notAfter.getTime() - 30 * DAY_MS - clock.now() + 1000);
    await next(2);
    assert.notEqual(got[1]!.certPem, got[0]!.certPem);
    manager.stop();
  });

  test('an order pebble refuses (challenge not answered) is logged and retried with backoff; the certificate in use is kept', async () => {
    const clock = new ManualClock(Date.now());
    const { got, sink, next } = sinkWaiting();
    const errors: unknown[] = [];
    const log = { ...silentLog, error: (o: unknown) => void errors.push(o), info: () => {} } as unknown as typeof silentLog;
    const mute: AcmeChallenges = { set: () => {}, delete: () => {} };
    const manager = createAcmeManager({ settings: settings(['c.gateway.test']), store: createFileAcmeStore(join(dir, 'refused.json')), sink, challenges: mute, skipChallengeVerification: true, scheduler: clock, log });
    await manager.start();
    assert.equal(got.length, 0);
    assert.equal(errors.length, 1);
    assert.equal((errors[0] as { retryInMs: number }).retryInMs, 60_000);
    clock.advance(60_000);
    await new Promise<void>((resolve) => { const poll = () => (errors.length >= 2 ? resolve() : setImmediate(poll)); poll(); });
    assert.equal((errors[1] as { retryInMs: number }).retryInMs, 120_000);
    assert.doesNotMatch(JSON.stringify(errors), /PRIVATE KEY/);
    void next;
    manager.stop();
  });

  test('the temporary certificate is self-signed for the first domain', async () => {
    const temp = await temporaryCertificate(['a.gateway.test']);
    assert.equal(acme.crypto.readCertificateInfo(temp.certPem).domains.commonName, 'a.gateway.test');
    assert.match(temp.keyPem, /PRIVATE KEY/);
  });
});
