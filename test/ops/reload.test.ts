/**
 * Reload without restart (docs/reload.md), against real gateway processes and real backends:
 * SIGHUP (and, with reload.watch, a change of the file) puts routes, limits, trusted proxies
 * and signing keys in force; a file that does not validate leaves the running configuration
 * with an error line; settings that need a restart are named and keep their values; a request
 * that started before a reload finishes on the route it started on. With WORKERS=2 the primary
 * passes SIGHUP on, and each worker reloads.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { decodeProtectedHeader } from 'jose';
import { startBackend, type Backend } from '../helpers/backend.js';
import { call, DEMO, signIn } from '../helpers/gateway.js';
import { LISTENING, startGatewayProcess, tempDir, waitForLog, type GatewayProcess, type LogLine } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const RELOADED = 'configuration reloaded';
const FAILED = 'configuration reload failed: the running configuration stays in force';
const NEEDS_RESTART = 'configuration reload: these settings changed but need a restart; they keep their running values';

interface Setup {
  dir: string;
  file: string;
  keyFile(kid: string): string;
  write(config: Record<string, unknown>): void;
}

function setup(t: TestContext): Setup {
  const dir = tempDir(t, 'gw-reload-');
  const file = join(dir, 'gateway.json');
  const keyFiles = new Map<string, string>();
  return {
    dir,
    file,
    keyFile(kid) {
      let path = keyFiles.get(kid);
      if (path === undefined) {
        path = join(dir, `${kid}.pem`);
        writeFileSync(path, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), { mode: 0o600 });
        keyFiles.set(kid, path);
      }
      return path;
    },
    write(config) {
      writeFileSync(file, JSON.stringify(config, null, 2));
    },
  };
}

/** Lines of one message, in order. */
function linesOf(gw: GatewayProcess, msg: string): LogLine[] {
  return gw.logs().filter((line) => line.msg === msg);
}

/** Sends SIGHUP and waits for the outcome's line (one more "reloaded" or "failed" than before). */
async function sighup(gw: GatewayProcess, outcome: typeof RELOADED | typeof FAILED = RELOADED): Promise<LogLine> {
  const before = linesOf(gw, outcome).length;
  assert.ok(gw.child.process.kill('SIGHUP'));
  for (let waited = 0; waited < 20_000; waited += 20) {
    const line = linesOf(gw, outcome)[before];
    if (line !== undefined) return line;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.fail(`no "${outcome}" line after SIGHUP\nstdout:\n${gw.child.stdout()}\nstderr:\n${gw.child.stderr()}`);
}

const signing = (s: Setup, kids: string[], activeKid: string) => ({
  keys: kids.map((kid) => ({ kid, alg: 'EdDSA', pemFile: s.keyFile(kid) })),
  activeKid,
});

async function kidsOfJwks(gw: GatewayProcess): Promise<string[]> {
  const res = await call(`${gw.url}/.well-known/jwks.json`);
  assert.equal(res.status, 200);
  return (res.body.keys as { kid: string }[]).map((k) => k.kid).sort();
}

test('SIGHUP: a route is added to a gateway started without any, limits and trusted proxies change, a bad file changes nothing', async (t) => {
  const s = setup(t);
  const backend = await startBackend(t);
  const base = { signing: signing(s, ['k1'], 'k1') };
  s.write({ ...base });
  // The test environment turns limits off (helpers/process.ts); the environment wins over the file.
  const gw = await startGatewayProcess(t, { GATEWAY_CONFIG: s.file, LOG_LEVEL: 'info', RATE_LIMITS: 'enforce' });

  const before = await call(`${gw.url}/pub/items`);
  assert.equal(before.status, 404, 'no route yet');
  assert.equal(backend.received.length, 0);

  await t.test('a route and its quota are added', async () => {
    const route = { name: 'pub', prefix: '/pub', targets: [backend.url], auth: 'public' };
    s.write({ ...base, routes: [route], limits: { public: { perAddress: [{ limit: 2, seconds: 600 }] } } });
    const line = await sighup(gw);
    assert.equal(line.trigger, 'SIGHUP');
    assert.deepEqual(line.reloaded, ['limits.public.perAddress', 'routes']);

    for (let i = 0; i < 2; i++) {
      const res = await call(`${gw.url}/pub/items`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.url, '/pub/items', 'the backend got the request');
      assert.match(res.headers.get('ratelimit-policy') ?? '', /;q=2;w=600/);
    }
    const refused = await call(`${gw.url}/pub/items`);
    assert.equal(refused.status, 429, 'the reloaded quota is enforced');
    assert.equal(refused.body.message.code, 'rate_limited');
  });

  await t.test('a trusted proxy is added: its X-Forwarded-For is kept and extended, and names the address the limits count', async () => {
    const route = { name: 'pub', prefix: '/pub', targets: [backend.url], auth: 'public' };
    const headers = { 'x-forwarded-for': '203.0.113.7' };
    const untrusted = await call(`${gw.url}/pub/who`, { headers });
    assert.equal(untrusted.status, 429, 'not trusted yet: the address counted is still 127.0.0.1, over its quota');

    s.write({ ...base, routes: [route], limits: { public: { perAddress: [{ limit: 2, seconds: 600 }] } }, proxy: { trustedProxies: ['127.0.0.1'] } });
    const line = await sighup(gw);
    assert.deepEqual(line.reloaded, ['proxy.trustedProxies']);
    const trusted = await call(`${gw.url}/pub/who`, { headers });
    assert.equal(trusted.status, 200, 'trusted now: 203.0.113.7 is counted, and has its quota');
    assert.deepEqual(trusted.body.headers['x-forwarded-for'], ['203.0.113.7, 127.0.0.1'], 'trusted now: extended');
  });

  await t.test('the quota changes, and the counts made before the reload stay', async () => {
    const route = { name: 'pub', prefix: '/pub', targets: [backend.url], auth: 'public' };
    s.write({ ...base, routes: [route], limits: { public: { perAddress: [{ limit: 4, seconds: 600 }] } }, proxy: { trustedProxies: ['127.0.0.1'] } });
    const line = await sighup(gw);
    assert.deepEqual(line.reloaded, ['limits.public.perAddress']);
    // 127.0.0.1 (no X-Forwarded-For) has 2 calls counted: 2 more fit in the new quota of 4.
    for (let i = 0; i < 2; i++) {
      const res = await call(`${gw.url}/pub/items`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match(res.headers.get('ratelimit-policy') ?? '', /;q=4;w=600/);
    }
    assert.equal((await call(`${gw.url}/pub/items`)).status, 429);
  });

  await t.test('a file that is not JSON, then one that does not validate: an error line each, and the running configuration stays', async () => {
    const served = backend.received.length;
    writeFileSync(s.file, '{"signing": {"keys": [ sk_not_json');
    const notJson = await sighup(gw, FAILED);
    assert.equal(notJson.level, 50, 'an error line');
    assert.match(String(notJson.problems), /not valid JSON/);
    assert.doesNotMatch(JSON.stringify(notJson), /sk_not_json/, 'the file is not quoted in the log');

    s.write({ ...base, routes: [{ prefix: 'no-slash', targets: [backend.url] }] });
    const invalid = await sighup(gw, FAILED);
    assert.match(String(invalid.problems), /routes\.0\.prefix/);

    s.write({ ...base, routes: [{ prefix: '/pub', targets: [backend.url], auth: 'public' }], signing: { keys: [{ kid: 'gone', alg: 'EdDSA', pemFile: join(s.dir, 'missing.pem') }], activeKid: 'gone' } });
    const badKey = await sighup(gw, FAILED);
    assert.match(String(badKey.problems), /cannot read pemFile/);

    const res = await call(`${gw.url}/pub/items`, { headers: { 'x-forwarded-for': '198.51.100.20' } });
    assert.equal(res.status, 200, 'the route, quota and trusted proxies of the running configuration still serve');
    assert.equal(backend.received.length, served + 1);
    assert.deepEqual(await kidsOfJwks(gw), ['k1'], 'and its keys');
  });

  await t.test('a setting that needs a restart is named, and keeps its running value', async () => {
    const route = { name: 'pub', prefix: '/pub', targets: [backend.url], auth: 'public' };
    s.write({ ...base, routes: [route], server: { bodyLimitBytes: 64 }, limits: { public: { perAddress: [{ limit: 4, seconds: 600 }] } }, proxy: { trustedProxies: ['127.0.0.1'] } });
    const warned = waitForLog(gw.child, (line) => line.msg === NEEDS_RESTART, 20_000);
    await sighup(gw);
    const line = await warned;
    assert.equal(line.level, 40);
    assert.deepEqual(line.settings, ['server.bodyLimitBytes']);
    // 64 bytes would refuse this sign-in body with 413; the running limit (4096) takes it.
    await signIn(gw, DEMO.alice);
  });
});

test('SIGHUP rotates signing keys: old tokens verify while their key is listed, new ones carry the new kid, the JWKS follows', async (t) => {
  const s = setup(t);
  s.write({ signing: signing(s, ['old'], 'old') });
  const gw = await startGatewayProcess(t, { GATEWAY_CONFIG: s.file, LOG_LEVEL: 'info' });
  const before = await signIn(gw, DEMO.alice);
  assert.equal(decodeProtectedHeader(before.accessToken).kid, 'old');
  assert.deepEqual(await kidsOfJwks(gw), ['old']);

  s.write({ signing: signing(s, ['old', 'new'], 'new') });
  assert.deepEqual((await sighup(gw)).reloaded, ['signing.keys', 'signing.activeKid']);
  assert.deepEqual(await kidsOfJwks(gw), ['new', 'old'], 'both published while the old one verifies');
  const after = await signIn(gw, DEMO.alice);
  assert.equal(decodeProtectedHeader(after.accessToken).kid, 'new', 'new tokens are signed with the new active key');
  for (const [token, what] of [[before.accessToken, 'a token of the old key'], [after.accessToken, 'a token of the new key']] as const) {
    const res = await call(`${gw.url}/api/roles`, { token });
    assert.equal(res.status, 200, `${what}: ${JSON.stringify(res.body)}`);
  }

  s.write({ signing: signing(s, ['new'], 'new') });
  assert.deepEqual((await sighup(gw)).reloaded, ['signing.keys']);
  assert.deepEqual(await kidsOfJwks(gw), ['new']);
  const retired = await call(`${gw.url}/api/roles`, { token: before.accessToken });
  assert.equal(retired.status, 401, 'the old key is gone: its tokens stop verifying');
  assert.equal(retired.body.message.code, 'invalid_token');
  assert.equal((await call(`${gw.url}/api/roles`, { token: after.accessToken })).status, 200);
});

test('a request in flight when a reload moves its route finishes on the backend it started on', async (t) => {
  const s = setup(t);
  let held: ServerResponse | undefined;
  let onHeld: (() => void) | undefined;
  const old = await startBackend(t, (_req, res) => {
    held = res;
    onHeld?.();
  });
  const moved = await startBackend(t, (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('new backend'));
  const route = (backend: Backend) => ({ name: 'slow', prefix: '/slow', targets: [backend.url], auth: 'public' });
  s.write({ signing: signing(s, ['k1'], 'k1'), routes: [route(old)] });
  const gw = await startGatewayProcess(t, { GATEWAY_CONFIG: s.file, LOG_LEVEL: 'info' });

  const isHeld = new Promise<void>((resolve) => { onHeld = resolve; });
  const inFlight = fetch(`${gw.url}/slow/report`).then(async (res) => ({ status: res.status, body: await res.text() }));
  await isHeld;

  s.write({ signing: signing(s, ['k1'], 'k1'), routes: [route(moved)] });
  assert.deepEqual((await sighup(gw)).reloaded, ['routes']);
  const fresh = await fetch(`${gw.url}/slow/report`);
  assert.equal(await fresh.text(), 'new backend', 'a request after the reload goes to the new target');

  held!.writeHead(200, { 'content-type': 'text/plain' }).end('old backend');
  assert.deepEqual(await inFlight, { status: 200, body: 'old backend' }, 'the request from before the reload finished where it started');
  assert.equal(old.received.length, 1);
  assert.equal(moved.received.length, 1);
});

test('reload.watch: a change of the file is reloaded without a signal', async (t) => {
  const s = setup(t);
  const backend = await startBackend(t);
  const base = { signing: signing(s, ['k1'], 'k1'), reload: { watch: true, watchIntervalMs: 100 } };
  s.write(base);
  const gw = await startGatewayProcess(t, { GATEWAY_CONFIG: s.file, LOG_LEVEL: 'info' });
  assert.equal((await call(`${gw.url}/watched/x`)).status, 404);

  s.write({ ...base, routes: [{ prefix: '/watched', targets: [backend.url], auth: 'public' }] });
  const line = await waitForLog(gw.child, (l) => l.msg === RELOADED, 20_000);
  assert.equal(line.trigger, 'file changed');
  assert.deepEqual(line.reloaded, ['routes']);
  const res = await call(`${gw.url}/watched/x`);
  assert.equal(res.status, 200);
  assert.equal(res.body.url, '/watched/x');
});

test('WORKERS=2: the primary passes SIGHUP on and every worker reloads', redisSuite(), async (t) => {
  const s = setup(t);
  const redis = await startRedis(t);
  const backend = await startBackend(t);
  const base = { signing: signing(s, ['k1'], 'k1') };
  s.write(base);
  const gw = await startGatewayProcess(t, { GATEWAY_CONFIG: s.file, LOG_LEVEL: 'info', WORKERS: '2', REDIS_URL: redis.url });
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => LISTENING(line) && line.worker === worker, 20_000);

  s.write({ ...base, routes: [{ prefix: '/both', targets: [backend.url], auth: 'public' }] });
  assert.ok(gw.child.process.kill('SIGHUP'));
  for (const worker of [1, 2]) await waitForLog(gw.child, (line) => line.msg === RELOADED && line.worker === worker, 20_000);
  // Each request on its own connection: the primary hands connections to the workers in turn.
  for (let i = 0; i < 6; i++) {
    const res = await fetch(`${gw.url}/both/${i}`, { headers: { connection: 'close' } });
    assert.equal(res.status, 200, `request ${i}`);
    await res.arrayBuffer();
  }
  assert.equal(backend.received.length, 6);
});
