/**
 * The client against the real deployment shape: two gateway processes (`node --import tsx
 * src/main.ts`) sharing one real redis-server and one signing key, API keys and settings tokens
 * in Redis (KEY_SOURCE=redis), rate limits enforced and counted in Redis, a proxied route (/echo)
 * to a real backend, and each GatewayClient talking to them through a round-robin load balancer
 * (helpers/balancer.ts), so that consecutive requests of one client land on different instances.
 *
 * Access tokens live 4 s (ACCESS_TOKEN_TTL_SECONDS), so the client's default renewal point
 * (half the lifetime for so short a token) comes 2 s after each pair arrives. What a client did
 * is read from two sides: the balancer's record of where each request went and what it got, and
 * the gateways' own access logs ("request" lines with path and status).
 *
 * The subtests run in order on the one pair of processes; the last two stop Redis, then the
 * balancer.
 */
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AuthenticationError, GatewayClient, NetworkError, RateLimitError, ServerError, type RateLimitInfo, type RolesPage,
} from '../../packages/client/src/index.js';
import { startBackend } from '../helpers/backend.js';
import { startBalancer, type Balancer, type Forwarded } from '../helpers/balancer.js';
import { call, show } from '../helpers/gateway.js';
import { makeAdminToken } from '../helpers/owner-api.js';
import { startGatewayProcess, tempDir, type GatewayProcess, type LogLine } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

/** Every process of the suite is killed after this long, whatever happens. */
const SUITE_LIMIT_MS = 120_000;
const TTL_SECONDS = 4;
/** The client's default renewal point for a 4 s token: min(lifetime / 2, max(5 s, 10 %)). */
const RENEW_BEFORE_MS = 2000;
/** Sleeping this long after a pair arrived makes its access token due, and leaves it unexpired. */
const DUE_AFTER_MS = TTL_SECONDS * 1000 - RENEW_BEFORE_MS + 150;
/** A reset or a revocation must reach every instance within this. */
const REACH_MS = 1000;
/** Bound on waiting for a gateway's access-log line of an answer already received. */
const LOG_WAIT_MS = 5000;
// A window of 5 s: its three admitted calls must fall in one window, which starts at the first;
// a loaded 2-core machine once took over 2 s between two of them.
const LIMITED = { account: 'acct_limited', quota: 3, seconds: 5 };
const ROOMY = (limit: number, seconds: number) => [{ limit, seconds }];

interface Key { apiKey: string; apiSecret: string }

/** What the client's fetch saw: one entry per request, pushed when it is sent. */
interface Sent { path: string; sentAt: number; status?: number; retryAfter?: string | null; answeredAt?: number }

function recordingFetch(log: Sent[]): typeof fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const entry: Sent = { path: url.pathname, sentAt: Date.now() };
    log.push(entry);
    const res = await fetch(input, init);
    Object.assign(entry, { status: res.status, retryAfter: res.headers.get('retry-after'), answeredAt: Date.now() });
    return res;
  };
}

const TOKEN_PATHS = new Set(['/api/signin', '/api/refresh']);
const pathOf = (f: Forwarded) => f.path.split('?')[0]!;
/** `[upstream, path, status]` of the balancer's records since `from`: a readable trace. */
const trace = (lb: Balancer, from: number) => lb.forwarded.slice(from).map((f) => [f.upstream, pathOf(f), f.status] as const);

function accessLines(gws: GatewayProcess[], path: string, status?: number): LogLine[] {
  return gws.flatMap((gw) => gw.logs()).filter((l) => l.msg === 'request' && l.path === path && (status === undefined || l.status === status));
}

/** Waits (bounded) until both gateways have logged at least `n` answers on `path`, and returns them. */
async function loggedAtLeast(gws: GatewayProcess[], path: string, n: number, status?: number): Promise<LogLine[]> {
  const deadline = Date.now() + LOG_WAIT_MS;
  for (;;) {
    const lines = accessLines(gws, path, status);
    if (lines.length >= n) return lines;
    if (Date.now() > deadline) assert.fail(`${lines.length} access-log lines for ${path} ${status ?? ''} after ${LOG_WAIT_MS} ms, expected ${n}`);
    await sleep(20);
  }
}

function assertRolesPage(page: RolesPage, what: string): void {
  assert.equal(typeof page.pages, 'string', what);
  assert.ok(Array.isArray(page.items), what);
  assert.equal(typeof page.total, 'number', what);
}

/** Calls GET /api/roles on `gw` with `token` until it is refused; how long after `since` that came. */
async function refusedAfter(gw: GatewayProcess, token: string, since: number): Promise<number | undefined> {
  while (Date.now() - since < REACH_MS * 3) {
    const res = await call(`${gw.url}/api/roles`, { token });
    if (res.status === 401) {
      assert.equal(res.body.message.code, 'invalid_token', show(res));
      return Date.now() - since;
    }
    assert.equal(res.status, 200, show(res));
    await sleep(20);
  }
  return undefined;
}

async function assertRefusedOnBoth(a: GatewayProcess, b: GatewayProcess, token: string, since: number, what: string): Promise<void> {
  const [onA, onB] = await Promise.all([refusedAfter(a, token, since), refusedAfter(b, token, since)]);
  assert.ok(onA !== undefined && onA <= REACH_MS, `${what}: refused on A after ${onA} ms`);
  assert.ok(onB !== undefined && onB <= REACH_MS, `${what}: refused on B after ${onB} ms`);
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
/** What the backend streams down for GET /echo/download: 1 MiB in 64 KiB chunks. */
const DOWNLOAD = Array.from({ length: 16 }, () => randomBytes(64 * 1024));

test('the client against two gateway instances on one Redis, through a round-robin balancer', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  // The proxied route's backend: hashes what it is sent as it arrives, and streams DOWNLOAD.
  const backend = await startBackend(t, (req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      pipeline(Readable.from(DOWNLOAD), res).catch(() => res.destroy());
      return;
    }
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => { hash.update(chunk); bytes += chunk.length; });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ bytes, sha256: hash.digest('hex'), account: req.headers['x-account-id'] ?? null }));
    });
  }, { readBody: false });
  const admin = makeAdminToken();
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const configFile = join(tempDir(t, 'client-redis-'), 'gateway.json');
  writeFileSync(configFile, JSON.stringify({
    limits: {
      // Room everywhere but one account's roles quota: only that subtest meets a limit.
      signIn: { perAddress: ROOMY(10_000, 600), failuresPerKeyAndAddress: ROOMY(10_000, 600), failuresPerAddress: ROOMY(10_000, 600), failuresPerKey: ROOMY(10_000, 600) },
      refresh: { perFamily: ROOMY(10_000, 60), perAddress: ROOMY(10_000, 60) },
      calls: { perAccount: ROOMY(10_000, 1) },
      public: { perAddress: ROOMY(10_000, 1) },
      rules: [{ route: 'roles', account: LIMITED.account, perAccount: ROOMY(LIMITED.quota, LIMITED.seconds) }],
    },
  }));
  const env = {
    GATEWAY_CONFIG: configFile,
    REDIS_URL: redis.url,
    KEY_SOURCE: 'redis',
    SIGNING_KEYS: JSON.stringify([{ kid: 'client-redis-1', alg: 'EdDSA', pem }]),
    ACCESS_TOKEN_TTL_SECONDS: String(TTL_SECONDS),
    OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([admin.digest]),
    RATE_LIMITS: 'enforce',
    LOG_LEVEL: 'info',
    ROUTES: JSON.stringify([{ name: 'echo', prefix: '/echo', targets: [backend.url] }]),
  };
  const [a, b] = await Promise.all([1, 2].map(() => startGatewayProcess(t, env, { limitMs: SUITE_LIMIT_MS })));
  const gws = [a!, b!];
  const lb = await startBalancer(t, gws.map((gw) => gw.url));

  const adminHeaders = { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' };
  const owner = async (gw: GatewayProcess, method: string, path: string, body?: unknown) => {
    const res = await call(`${gw.url}/owner/v1${path}`, { method, headers: adminHeaders, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    assert.ok(res.status === 200 || res.status === 201, `${method} ${path}: ${show(res)}`);
    return res.body.message;
  };
  const newKey = async (accountId: string): Promise<Key> => {
    await owner(a!, 'POST', '/accounts', { id: accountId, name: accountId });
    const { key, apiSecret } = await owner(a!, 'POST', `/accounts/${accountId}/keys`, { name: 'client' });
    return { apiKey: key.apiKey, apiSecret };
  };
  const key = await newKey('acct_client');
  const limitedKey = await newKey(LIMITED.account);
  const client = new GatewayClient({ baseUrl: lb.url, credentials: key });

  await t.test('renewal across instances: a refresh token minted by one instance is refreshed on the other, no 401 anywhere', async () => {
    const from = lb.forwarded.length;
    const mints = () => lb.forwarded.slice(from).filter((f) => TOKEN_PATHS.has(pathOf(f)));
    assertRolesPage(await client.roles(), 'the first call (signs in)');
    for (let round = 1; round <= 3; round++) {
      await sleep(DUE_AFTER_MS);
      // Other traffic takes a turn when the balancer would send the renewal back to the
      // instance that minted the pair: the refresh must land on the other one.
      if (lb.next === mints().at(-1)!.upstream) assert.equal((await fetch(`${lb.url}/healthz`)).status, 200);
      // The first call renews (the token is due) and is served by the other instance than the
      // refresh; the second by the refreshing one: both accept the new token.
      for (let i = 0; i < 2; i++) assertRolesPage(await client.roles(), `round ${round}, call ${i + 1}`);
    }
    const seen = mints();
    assert.deepEqual(seen.map((f) => [pathOf(f), f.status]), [['/api/signin', 200], ['/api/refresh', 200], ['/api/refresh', 200], ['/api/refresh', 200]], JSON.stringify(trace(lb, from)));
    for (let i = 1; i < seen.length; i++) {
      assert.notEqual(seen[i]!.upstream, seen[i - 1]!.upstream, `refresh #${i} ran on the other instance than the one that minted its token`);
    }
    const roles = lb.forwarded.slice(from).filter((f) => pathOf(f) === '/api/roles');
    assert.equal(roles.length, 7);
    assert.deepEqual(new Set(roles.map((f) => f.upstream)), new Set([0, 1]), 'both instances served the calls');
    assert.ok(lb.forwarded.slice(from).every((f) => f.status === 200), `nothing but 200s: ${JSON.stringify(trace(lb, from))}`);
    // The gateways' side: no 401 was answered to anything of this client.
    const refused = gws.flatMap((gw) => gw.logs()).filter((l) => l.msg === 'request' && l.status === 401);
    assert.deepEqual(refused, []);
  });

  await t.test('100 concurrent calls while the token is due: exactly one /api/refresh over both instances', async () => {
    await sleep(DUE_AFTER_MS);
    const from = lb.forwarded.length;
    // The counts before, once every answer sent so far is in the logs.
    const forwardedOn = (path: string) => lb.forwarded.filter((f) => pathOf(f) === path).length;
    const refreshesBefore = (await loggedAtLeast(gws, '/api/refresh', forwardedOn('/api/refresh'))).length;
    const signInsBefore = (await loggedAtLeast(gws, '/api/signin', forwardedOn('/api/signin'))).length;
    const rolesBefore = (await loggedAtLeast(gws, '/api/roles', forwardedOn('/api/roles'))).length;

    const pages = await Promise.all(Array.from({ length: 100 }, () => client.roles()));
    pages.forEach((page, i) => assertRolesPage(page, `call #${i}`));

    // Every one of the 100 is in the access logs; the refresh they waited for was logged before them.
    const rolesLines = (await loggedAtLeast(gws, '/api/roles', rolesBefore + 100)).slice(rolesBefore);
    assert.ok(rolesLines.every((l) => l.status === 200));
    assert.equal(accessLines(gws, '/api/refresh').length - refreshesBefore, 1, 'one refresh, summed over both access logs');
    assert.equal(accessLines(gws, '/api/signin').length - signInsBefore, 0, 'no sign-in');
    assert.deepEqual(lb.forwarded.slice(from).filter((f) => TOKEN_PATHS.has(pathOf(f))).map((f) => [pathOf(f), f.status]), [['/api/refresh', 200]]);
    assert.deepEqual(new Set(lb.forwarded.slice(from).map((f) => f.upstream)), new Set([0, 1]), 'the calls went to both instances');
  });

  await t.test('a reset through the other instance mid-use: the next call renews once (refresh refused, sign-in) and succeeds', async () => {
    // Renewal 0.5 s before expiry: the token stays fresh through the reset and its propagation,
    // so the client learns of the reset from a 401 rather than at its next renewal.
    const user = new GatewayClient({ baseUrl: lb.url, credentials: key, renewBeforeMs: 500 });
    assertRolesPage(await user.roles(), 'before the reset');
    const minted = lb.forwarded.filter((f) => TOKEN_PATHS.has(pathOf(f))).at(-1)!;
    const [mintedOn, other] = minted.upstream === 0 ? [a!, b!] : [b!, a!];
    const held = await user.accessToken();
    for (const gw of gws) assert.equal((await call(`${gw.url}/api/roles`, { token: held })).status, 200, 'both instances accept (and cache) the token');

    // The reset is the client's own method, sent straight to the instance that did not mint the pair.
    const since = Date.now();
    const reset = await new GatewayClient({ baseUrl: other.url, credentials: key }).reset({ scope: 'key' });
    assert.equal(reset.scope, 'key');
    assert.equal(reset.accountId, 'acct_client');
    await assertRefusedOnBoth(mintedOn, other, held, since, 'the reset access token');

    const from = lb.forwarded.length;
    assertRolesPage(await user.roles(), 'the first call after the reset');
    const after = trace(lb, from);
    const renewal = [['/api/refresh', 401], ['/api/signin', 200], ['/api/roles', 200]];
    const shape = after.map(([, p, s]) => [p, s]);
    if (shape.length === 4) {
      assert.deepEqual(shape, [['/api/roles', 401], ...renewal], JSON.stringify(after));
    } else {
      // Only if the machine was so slow that the token came due before the call: renewed first.
      t.diagnostic(`the token was due before the call: ${JSON.stringify(after)}`);
      assert.deepEqual(shape, renewal, JSON.stringify(after));
    }
    assert.equal((await loggedAtLeast(gws, '/api/refresh', 1, 401)).length, 1, 'the dead refresh token was presented once');

    // The calls after it go on with the new pair, nothing renewed.
    const next = lb.forwarded.length;
    for (let i = 0; i < 4; i++) assertRolesPage(await user.roles(), `call ${i + 1} after the recovery`);
    assert.deepEqual(trace(lb, next).map(([, p, s]) => [p, s]), Array.from({ length: 4 }, () => ['/api/roles', 200]));
  });

  await t.test('a revoked API settings token: refused on both instances within a second, AuthenticationError at once', async () => {
    const { settingsToken, token } = await owner(a!, 'POST', '/accounts/acct_client/settings-tokens', { name: 'client-test' });
    const sent: Sent[] = [];
    const st = new GatewayClient({ baseUrl: lb.url, credentials: { settingsToken: token }, fetch: recordingFetch(sent) });
    const before = lb.forwarded.length;
    for (let i = 0; i < 2; i++) assertRolesPage(await st.roles(), `settings-token call ${i + 1}`);
    assert.deepEqual(new Set(lb.forwarded.slice(before).map((f) => f.upstream)), new Set([0, 1]), 'accepted (and cached) on both instances');

    const since = Date.now();
    const revoked = await owner(a!, 'DELETE', `/accounts/acct_client/settings-tokens/${settingsToken.id}`);
    assert.equal(revoked.status, 'revoked');
    await assertRefusedOnBoth(a!, b!, token, since, 'the revoked settings token');

    const from = lb.forwarded.length;
    sent.length = 0;
    for (let i = 0; i < 2; i++) {
      await assert.rejects(st.roles(), (err: unknown) => {
        assert.ok(err instanceof AuthenticationError, String(err));
        assert.deepEqual([err.code, err.status], ['invalid_token', 401]);
        assert.equal(typeof err.requestId, 'string');
        return true;
      });
    }
    // One request per call, nothing retried, nothing renewed; one refusal from each instance.
    assert.deepEqual(sent.map((s) => [s.path, s.status]), [['/api/roles', 401], ['/api/roles', 401]]);
    assert.deepEqual(trace(lb, from).map(([u, p, s]) => [p, s, u]).sort(), [['/api/roles', 401, 0], ['/api/roles', 401, 1]]);
  });

  await t.test('client.fetch on a proxied route through both instances: a streamed upload and a streamed download arrive whole', async () => {
    // Renewal 0.5 s before expiry: a slow machine may still need one mid-test, which shifts the turns.
    const streamer = new GatewayClient({ baseUrl: lb.url, credentials: key, renewBeforeMs: 500 });
    await streamer.signIn();
    const from = lb.forwarded.length;
    for (let i = 0; i < 2; i++) {
      const chunks = Array.from({ length: 16 }, () => randomBytes(64 * 1024));
      const queue = [...chunks];
      const body = new ReadableStream<Uint8Array>({ pull(controller) { const next = queue.shift(); if (next === undefined) controller.close(); else controller.enqueue(next); } });
      const res = await streamer.fetch('/echo/upload', { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(await res.json(), { bytes: 16 * 64 * 1024, sha256: sha256(Buffer.concat(chunks)), account: 'acct_client' }, `upload ${i + 1}`);
    }
    for (let i = 0; i < 2; i++) {
      const res = await streamer.fetch('/echo/download');
      assert.equal(res.status, 200);
      const got = Buffer.from(await res.arrayBuffer());
      assert.equal(got.length, 16 * 64 * 1024, `download ${i + 1}`);
      assert.equal(sha256(got), sha256(Buffer.concat(DOWNLOAD)), `download ${i + 1}`);
    }
    const proxied = trace(lb, from).filter(([, p]) => p.startsWith('/echo/'));
    assert.deepEqual(proxied.map(([, p, s]) => [p, s]), [['/echo/upload', 200], ['/echo/upload', 200], ['/echo/download', 200], ['/echo/download', 200]]);
    assert.deepEqual(new Set(proxied.map(([u]) => u)), new Set([0, 1]), `both instances proxied: ${JSON.stringify(trace(lb, from))}`);
    assert.ok(trace(lb, from).every(([, p, s]) => p.startsWith('/echo/') || (p === '/api/refresh' && s === 200)), JSON.stringify(trace(lb, from)));
  });

  await t.test('429 from a quota counted in Redis for both instances: Retry-After honoured, then RateLimitError past maxRetryAfterMs', async () => {
    const sent: Sent[] = [];
    const seen: RateLimitInfo[] = [];
    const limited = new GatewayClient({ baseUrl: lb.url, credentials: limitedKey, fetch: recordingFetch(sent), onRateLimit: (info) => seen.push(info) });
    await limited.signIn();
    const from = lb.forwarded.length;
    for (let i = 0; i < LIMITED.quota; i++) assertRolesPage(await limited.roles(), `admitted call ${i + 1}`);
    assert.equal(limited.rateLimit?.tightest.remaining, 0, JSON.stringify(limited.rateLimit));
    assert.equal(limited.rateLimit?.tightest.quota, LIMITED.quota);
    assert.equal(seen.length, LIMITED.quota, 'onRateLimit saw every answer');

    // The next call is refused by whichever instance gets it, though that one admitted fewer
    // than the quota itself: the count is shared. The client waits Retry-After and succeeds.
    const admitted = trace(lb, from);
    const refusingUpstream = lb.next;
    assert.ok(admitted.filter(([u]) => u === refusingUpstream).length < LIMITED.quota, JSON.stringify(admitted));
    sent.length = 0;
    assertRolesPage(await limited.roles(), 'the call refused once, then retried');
    // The wait may outlast the renewal point of the 4 s token: the retry then renews first.
    assert.ok(sent.filter((s) => s.path !== '/api/roles').every((s) => s.path === '/api/refresh' && s.status === 200), JSON.stringify(sent));
    const calls = sent.filter((s) => s.path === '/api/roles');
    assert.deepEqual(calls.map((s) => [s.path, s.status]), [['/api/roles', 429], ['/api/roles', 200]]);
    const [refusal, retry] = calls as [Sent, Sent];
    assert.match(refusal.retryAfter ?? '', /^[1-9]\d*$/);
    const waited = retry.sentAt - refusal.answeredAt!;
    assert.ok(waited >= Number(refusal.retryAfter) * 1000, `retried ${waited} ms after a Retry-After of ${refusal.retryAfter} s`);
    const rolesTrace = trace(lb, from).filter(([, p]) => p === '/api/roles');
    assert.deepEqual(rolesTrace.slice(-2).map(([, p, s]) => [p, s]), [['/api/roles', 429], ['/api/roles', 200]]);
    assert.equal(rolesTrace.at(-2)![0], refusingUpstream);
    const logged = await loggedAtLeast(gws, '/api/roles', 1, 429);
    assert.equal(logged.length, 1, 'the gateways answered one 429');

    // A Retry-After longer than the policy allows is not waited for: the error comes at once.
    sent.length = 0;
    let err: unknown;
    for (let i = 0; i <= LIMITED.quota && err === undefined; i++) {
      err = await limited.roles({}, { retry: { maxRetryAfterMs: 100 } }).then(() => undefined, (e: unknown) => e);
    }
    assert.ok(err instanceof RateLimitError, `a RateLimitError within ${LIMITED.quota + 1} calls: ${String(err)}`);
    assert.deepEqual([err.code, err.status], ['rate_limited', 429]);
    assert.ok(err.retryAfterMs !== undefined && err.retryAfterMs >= 1000, `retryAfterMs ${err.retryAfterMs}`);
    assert.equal(err.rateLimit?.tightest.remaining, 0);
    assert.equal(sent.filter((s) => s.status === 429).length, 1, 'the refused call was sent once');
    assert.deepEqual(sent.at(-1)!.status, 429);
  });

  await t.test('Redis stopped: valid tokens keep working; sign-in is retried per Retry-After, then ServerError store_unavailable', async (t) => {
    const fresh = new GatewayClient({ baseUrl: lb.url, credentials: key, renewBeforeMs: 500 });
    // Renews 100 ms after it got its token, which stays valid for 4 s: due, not expired. Its
    // renewal does not wait out the 503s' Retry-After (1 s, three tries): on a busy machine
    // those 2 s and more could outlast the token, and the fallback under test would not apply.
    const due = new GatewayClient({ baseUrl: lb.url, credentials: key, renewBeforeMs: TTL_SECONDS * 1000 - 100, retry: { maxRetryAfterMs: 100 } });
    await Promise.all([fresh.signIn(), due.signIn()]);
    await sleep(150);
    await redis.kill();

    await t.test('calls with a fresh access token are served by both instances', async () => {
      const from = lb.forwarded.length;
      for (let i = 0; i < 4; i++) assertRolesPage(await fresh.roles(), `call ${i + 1} with Redis down`);
      assert.deepEqual(trace(lb, from).map(([u, p, s]) => [p, s, u]).sort(), [['/api/roles', 200, 0], ['/api/roles', 200, 0], ['/api/roles', 200, 1], ['/api/roles', 200, 1]]);
    });

    await t.test('a token due for renewal but still valid is used when the renewal fails for want of the store', async () => {
      const from = lb.forwarded.length;
      const page = await due.roles().catch((err: unknown) => err);
      const seen = JSON.stringify(trace(lb, from));
      assert.ok(!(page instanceof Error), `the call failed (${String(page)}) though its access token was still valid; requests: ${seen}`);
      assertRolesPage(page as RolesPage, 'the call');
      assert.ok(trace(lb, from).some(([, p, s]) => p === '/api/refresh' && s === 503), `the renewal was tried: ${seen}`);
    });

    await t.test('a sign-in is tried three times, Retry-After apart, then ServerError store_unavailable', async () => {
      const sent: Sent[] = [];
      const newcomer = new GatewayClient({ baseUrl: lb.url, credentials: key, fetch: recordingFetch(sent) });
      const err = await newcomer.roles().then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof ServerError, `a ServerError, not a time-out or an authentication error: ${String(err)}`);
      assert.deepEqual([err.code, err.status, err.retryAfterMs], ['store_unavailable', 503, 1000]);
      assert.equal(typeof err.requestId, 'string');
      // The default policy: the first attempt and two retries, each after the Retry-After.
      assert.deepEqual(sent.map((s) => [s.path, s.status, s.retryAfter]), Array.from({ length: 3 }, () => ['/api/signin', 503, '1']));
      for (let i = 1; i < sent.length; i++) {
        const waited = sent[i]!.sentAt - sent[i - 1]!.answeredAt!;
        assert.ok(waited >= 1000, `retry ${i} sent ${waited} ms after the 503`);
      }
    });
  });

  await t.test('the balancer gone: a sign-in that gets no answer is tried three times in all, then NetworkError', async () => {
    await lb.close();
    const sent: Sent[] = [];
    const orphan = new GatewayClient({ baseUrl: lb.url, credentials: key, fetch: recordingFetch(sent), retry: { baseDelayMs: 10, maxDelayMs: 20 } });
    const err = await orphan.roles().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof NetworkError, String(err));
    assert.equal(err.code, 'network_error');
    // The renewal retries its own request (twice); the call must not retry the whole renewal on top.
    assert.deepEqual(sent.map((s) => s.path), ['/api/signin', '/api/signin', '/api/signin'], `${sent.length} requests`);
  });
});
