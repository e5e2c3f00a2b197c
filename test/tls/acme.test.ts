/**
 * ACME end to end against Debian's pebble, with real HTTP-01 validation: pebble resolves the
 * ordered names through pebble-challtestsrv's DNS (every name → 127.0.0.1) and fetches the
 * challenge from a small responder this file starts on the port pebble is told to use.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { Agent } from 'node:https';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import acme from 'acme-client';
import { createFileAcmeStore } from '../../src/state/acme/file.js';
import { createAcmeManager, temporaryCertificate, type AcmeCertificate, type ChallengeStore } from '../../src/tls/acme.js';
import { ManualClock } from '../helpers/clock.js';
import { pebbleSuite, startPebble, type Pebble } from '../helpers/pebble.js';
import { freePort, silentLog } from '../helpers/redis.js';

const DAY_MS = 24 * 3600 * 1000;

describe('ACME against pebble', pebbleSuite(), () => {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-acme-'));
  const answers = new Map<string, string>();
  const challenges: ChallengeStore = { set: async (t, k) => void answers.set(t, k), delete: async (t) => void answers.delete(t), get: async (t) => answers.get(t) };
  let responder: Server;
  let pebble: Pebble | undefined;
  let directoryUrl = '';
  let httpPort = 0;

  before(async () => {
    httpPort = await freePort();
    responder = createServer((req, res) => {
      const token = req.url?.replace('/.well-known/acme-challenge/', '') ?? '';
      const answer = answers.get(token);
      res.writeHead(answer === undefined ? 404 : 200).end(answer ?? '');
    });
    responder.listen(httpPort, '127.0.0.1');
    await once(responder, 'listening');
    pebble = await startPebble({ httpPort });
    directoryUrl = pebble.directoryUrl;
    acme.axios.defaults.httpsAgent = pebble.agent;
  });

  after(() => {
    pebble?.stop();
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

  const settings = (domains: string[]) => ({ directoryUrl, domains, email: 'ops@example.com', renewBeforeDays: 30, challengeTypes: ['http-01' as const] });

  test('orders by HTTP-01, stores the certificate (0600), serves it after a restart, renews 30 days before expiry, orders again for changed names', async () => {
    const file = join(dir, 'acme-state.json');
    const clock = new ManualClock(Date.now());
    const store = createFileAcmeStore(file, clock);
    const { got, sink, next } = sinkWaiting();
    // Failures kept, so that an assertion on a missing certificate says why the order failed.
    const failures: unknown[] = [];
    let onFailure: (() => void) | undefined;
    const log = { ...silentLog, error: (o: unknown) => { failures.push(o); onFailure?.(); }, info: () => {} } as unknown as typeof silentLog;
    const manager = createAcmeManager({ settings: settings(['a.gateway.test', 'b.gateway.test']), store, sink, challenges, scheduler: clock, log });
    await manager.start();
    assert.equal(got.length, 1, JSON.stringify(failures));
    const info = acme.crypto.readCertificateInfo(got[0]!.certPem);
    assert.deepEqual([...info.domains.altNames].sort(), ['a.gateway.test', 'b.gateway.test']);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(readFileSync(file, 'utf8').includes(got[0]!.certPem.split('\n')[1]!));

    const restarted = sinkWaiting();
    const second = createAcmeManager({ settings: settings(['a.gateway.test', 'b.gateway.test']), store: createFileAcmeStore(file, clock), sink: restarted.sink, challenges: { set: async () => assert.fail('a restart must not order'), delete: async () => {}, get: async () => undefined }, scheduler: new ManualClock(Date.now()), log: silentLog });
    await second.start();
    assert.equal(restarted.got[0]!.certPem, got[0]!.certPem);
    second.stop();

    clock.advance(info.notAfter.getTime() - 30 * DAY_MS - clock.now() + 1000);
    // The renewal's certificate, or its failure (retried only when the clock moves again).
    await new Promise<void>((resolve) => { onFailure = resolve; void next(2).then(resolve); });
    assert.equal(got.length, 2, JSON.stringify(failures));
    assert.notEqual(got[1]!.certPem, got[0]!.certPem);
    manager.stop();

    // A stored certificate the certificate set refuses (a key that is not its own, say) is replaced by an order.
    const refusing = sinkWaiting();
    const stale = (await createFileAcmeStore(file, clock).certificate())!.certPem;
    const picky = { setCertificate: (id: string, c: AcmeCertificate) => { if (c.certPem === stale) throw new Error('TLS: acme (key): is not the key of the certificate in acme'); refusing.sink.setCertificate(id, c); } };
    const fourth = createAcmeManager({ settings: settings(['a.gateway.test', 'b.gateway.test']), store: createFileAcmeStore(file, clock), sink: picky, challenges, scheduler: clock, log });
    await fourth.start();
    fourth.stop();
    assert.equal(refusing.got.length, 1, JSON.stringify(failures));
    assert.notEqual(refusing.got[0]!.certPem, stale);

    // Names changed since: the stored certificate does not cover them, so a start orders.
    const widened = sinkWaiting();
    const third = createAcmeManager({ settings: settings(['a.gateway.test', 'b.gateway.test', 'c.gateway.test']), store: createFileAcmeStore(file, clock), sink: widened.sink, challenges, scheduler: clock, log });
    await third.start();
    third.stop();
    assert.equal(widened.got.length, 1, JSON.stringify(failures));
    assert.deepEqual([...acme.crypto.readCertificateInfo(widened.got[0]!.certPem).domains.altNames].sort(), ['a.gateway.test', 'b.gateway.test', 'c.gateway.test']);
  });

  test('an order pebble refuses (challenge not answered) is logged and retried with backoff; a stored certificate still valid is served meanwhile', async () => {
    const clock = new ManualClock(Date.now());
    const { got, sink, next } = sinkWaiting();
    const errors: unknown[] = [];
    const log = { ...silentLog, error: (o: unknown) => void errors.push(o), info: () => {} } as unknown as typeof silentLog;
    const mute: ChallengeStore = { set: async () => {}, delete: async () => {}, get: async () => undefined };
    const manager = createAcmeManager({ settings: settings(['c.gateway.test']), store: createFileAcmeStore(join(dir, 'refused.json'), clock), sink, challenges: mute, scheduler: clock, log });
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

    // A restart inside the renewal window, orders failing: the stored certificate, still valid,
    // is served meanwhile (the one the first test stored: the tests of this suite run in order).
    const file = join(dir, 'acme-state.json');
    const kept = await createFileAcmeStore(file, clock).certificate();
    const expiresAt = acme.crypto.readCertificateInfo(kept!.certPem).notAfter.getTime();
    const late = new ManualClock(expiresAt - 10 * DAY_MS);
    const restarted = sinkWaiting();
    const inWindow = createAcmeManager({ settings: settings(kept!.serverNames), store: createFileAcmeStore(file, late), sink: restarted.sink, challenges: mute, scheduler: late, log });
    await inWindow.start();
    inWindow.stop();
    assert.equal(restarted.got.length, 1);
    assert.equal(restarted.got[0]!.certPem, kept!.certPem);
    assert.equal(errors.length, 3, 'and the failed order is logged');
  });

  test('external account binding: a CA that requires it refuses an account without, and orders with the key id and HMAC key it gave', async (t) => {
    const hmacKey = 'zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W';
    const eabPebble = await startPebble({ httpPort, eabKeys: { 'kid-1': hmacKey } });
    t.after(() => eabPebble.stop());
    const previous = acme.axios.defaults.httpsAgent;
    acme.axios.defaults.httpsAgent = new Agent({ ca: [eabPebble.caPem, pebble!.caPem] });
    t.after(() => { acme.axios.defaults.httpsAgent = previous; });
    const errors: { err: string }[] = [];
    const log = { ...silentLog, error: (o: { err: string }) => void errors.push(o), info: () => {} } as unknown as typeof silentLog;
    const clock = new ManualClock(Date.now());
    const base = { ...settings(['eab.gateway.test']), directoryUrl: eabPebble.directoryUrl };

    const without = sinkWaiting();
    const refused = createAcmeManager({ settings: base, store: createFileAcmeStore(join(dir, 'eab-none.json'), clock), sink: without.sink, challenges, scheduler: clock, log });
    await refused.start();
    refused.stop();
    assert.equal(without.got.length, 0);
    assert.match(errors[0]?.err ?? '', /externalAccountBinding/, JSON.stringify(errors));

    const bound = sinkWaiting();
    const manager = createAcmeManager({ settings: { ...base, eabKid: 'kid-1', eabHmacKey: hmacKey }, store: createFileAcmeStore(join(dir, 'eab.json'), clock), sink: bound.sink, challenges, scheduler: clock, log });
    await manager.start();
    manager.stop();
    assert.equal(bound.got.length, 1, JSON.stringify(errors));
    assert.deepEqual(acme.crypto.readCertificateInfo(bound.got[0]!.certPem).domains.altNames, ['eab.gateway.test']);
    assert.doesNotMatch(JSON.stringify(errors), new RegExp(hmacKey), 'the HMAC key is never logged');
  });

  test('a CA that accepts and never answers fails the order after the request timeout, retried with backoff', async (t) => {
    const silent = createNetServer((socket) => { socket.on('error', () => {}); t.after(() => socket.destroy()); });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    t.after(() => silent.close());
    const clock = new ManualClock(Date.now());
    const errors: { err: string; retryInMs: number }[] = [];
    const log = { ...silentLog, error: (o: { err: string; retryInMs: number }) => void errors.push(o), info: () => {} } as unknown as typeof silentLog;
    const { got, sink } = sinkWaiting();
    const base = settings(['slow.gateway.test']);
    const manager = createAcmeManager({ settings: { ...base, directoryUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/dir` }, store: createFileAcmeStore(join(dir, 'slow.json'), clock), sink, challenges, scheduler: clock, log, requestTimeoutMs: 200 });
    t.after(() => { acme.axios.defaults.timeout = 30_000; });
    await manager.start();
    manager.stop();
    assert.equal(got.length, 0);
    assert.match(errors[0]?.err ?? '', /^no answer from the ACME CA at http:\/\/127\.0\.0\.1:\d+\/dir/, JSON.stringify(errors));
    assert.equal(errors[0]?.retryInMs, 60_000);
  });

  test('the temporary certificate is self-signed for the first domain', async () => {
    const temp = await temporaryCertificate(['a.gateway.test']);
    assert.equal(acme.crypto.readCertificateInfo(temp.certPem).domains.commonName, 'a.gateway.test');
    assert.match(temp.keyPem, /PRIVATE KEY/);
  });
});
