/**
 * Rate limits counted in a real redis-server shared by two in-process gateway instances (one
 * signing key, one key prefix per pair, as two instances behind a load balancer):
 *
 *   - a limit of N across both instances admits exactly N, requests interleaved concurrently;
 *   - Redis killed: the failure policies (`memory` counts per instance, `open` admits,
 *     `closed` answers 503), the degraded warn line and gauge, and recovery once Redis is back;
 *   - Redis stalled (SIGSTOP): every answer comes within the limits' own store timeout, far
 *     below the Redis command timeout, and limiting goes on in memory.
 *
 * Redis windows run on real time (PTTL), so the windows here are long enough never to end
 * during a test; the memory fallback runs on each gateway's ManualClock, which never moves.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { until } from '../helpers/directory.js';
import { call, DEMO, logged, untilDataLossNoticed, metricsText, postJson, sha256Hex, show, signIn, startGateway, timed, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const KID = 'limits-shared-1';
const PEM = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const WRONG = sha256Hex('not the secret');
const ROOMY_SIGNIN = {
  perAddress: [{ limit: 10_000, seconds: 600 }],
  failuresPerKeyAndAddress: [{ limit: 10_000, seconds: 600 }],
  failuresPerAddress: [{ limit: 10_000, seconds: 600 }],
  failuresPerKey: [{ limit: 10_000, seconds: 600 }],
};
const DEGRADED = 'rate limit degraded: Redis unavailable, applying the failure policy';
const RECOVERED = 'rate limit counting in Redis again';
/** "Promptly" while Redis stalls: well under the 2 s Redis command timeout. */
const PROMPT_MS = 1000;

interface Instance {
  redisUrl: string;
  keyPrefix: string;
  limits: Record<string, unknown>;
  redis?: Record<string, unknown>;
  extra?: Record<string, unknown>;
}

/** One gateway instance on the shared Redis and signing key, limits enforced. */
function instance(t: TestContext, { redisUrl, keyPrefix, limits, redis = {}, extra = {} }: Instance): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      ...extra,
      redis: { url: redisUrl, keyPrefix, breakerCooldownMs: 200, ...redis },
      signing: { keys: [{ kid: KID, alg: 'EdDSA', pem: PEM }] },
      // A busy machine's Redis answers past the default 100 ms at times, and a count past its
      // timeout is kept in the instance's memory (limits.onStoreFailure): the tests of shared
      // counts wait for Redis; those of the fallback set their own timeout.
      limits: { mode: 'enforce', storeTimeoutMs: 5000, signIn: ROOMY_SIGNIN, ...limits },
    },
  });
}

const roles = (gw: TestGateway, token: string) => call(`${gw.url}/api/roles`, { token });
const wrongSignIn = (gw: TestGateway) => postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: WRONG });

function count(answers: JsonResponse[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const res of answers) out[res.status] = (out[res.status] ?? 0) + 1;
  return out;
}

function assertRateLimited(res: JsonResponse, what: string): void {
  assert.equal(res.status, 429, `${what}: ${show(res)}`);
  assert.deepEqual([res.body.success, res.body.message.code], [false, 'rate_limited'], what);
  assert.match(res.headers.get('retry-after') ?? '', /^[1-9]\d*$/, `${what}: Retry-After`);
}

function gauge(metrics: string, limit: string, policy: string): number | undefined {
  const line = metrics.split('\n').find((l) => l.startsWith(`gateway_rate_limit_degraded{limit="${limit}",policy="${policy}"} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

/** `n` sequential roles calls on `gw`; each must answer within PROMPT_MS when `prompt`. */
async function rolesCalls(gw: TestGateway, token: string, n: number, prompt = false): Promise<JsonResponse[]> {
  const answers: JsonResponse[] = [];
  for (let i = 0; i < n; i++) {
    const { res, ms } = await timed(() => roles(gw, token));
    if (prompt) assert.ok(ms < PROMPT_MS, `roles call #${i + 1} took ${Math.round(ms)} ms`);
    answers.push(res);
  }
  return answers;
}

test('rate limits shared by two instances on one Redis', redisSuite(), async (t) => {
  const redis = await startRedis(t);

  await t.test('a per-account quota of 20 admits exactly 20 of 60 concurrent calls split over A and B', async () => {
    const limits = { calls: { perAccount: [{ limit: 20, seconds: 600 }] } };
    const [a, b] = await Promise.all([1, 2].map(() => instance(t, { redisUrl: redis.url, keyPrefix: 'rl-quota', limits })));
    const { accessToken } = await signIn(a!);
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => roles(i % 2 === 0 ? a! : b!, accessToken)));
    assert.deepEqual(count(answers), { 200: 20, 429: 40 });
    for (const res of answers.filter((r) => r.status === 429)) assertRateLimited(res, 'a refused call');
    // What remains is shared: neither instance admits one more.
    assertRateLimited(await roles(a!, accessToken), 'one more on A');
    assertRateLimited(await roles(b!, accessToken), 'one more on B');
    // Another account has its own count in Redis.
    const bob = await signIn(b!, DEMO.bob);
    const bobs = await Promise.all(Array.from({ length: 30 }, (_, i) => roles(i % 2 === 0 ? b! : a!, bob.accessToken)));
    assert.deepEqual(count(bobs), { 200: 20, 429: 10 });
  });

  await t.test('sign-in failures: exactly the key+address limit across both instances', async () => {
    const limits = { signIn: { ...ROOMY_SIGNIN, failuresPerKeyAndAddress: [{ limit: 5, seconds: 600 }] } };
    const [a, b] = await Promise.all([1, 2].map(() => instance(t, { redisUrl: redis.url, keyPrefix: 'rl-signin', limits })));
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => wrongSignIn(i % 2 === 0 ? a! : b!)));
    assert.deepEqual(count(answers), { 401: 5, 429: 25 });
    for (const res of answers.filter((r) => r.status === 429)) assertRateLimited(res, 'a refused guess');
    // The lockout is shared: the right secret is refused on either instance.
    for (const gw of [a!, b!]) {
      assertRateLimited(await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) }), `the right secret on ${gw.url}`);
    }
    // Bob's key from the same address is not concerned.
    await signIn(b!, DEMO.bob);
  });

  await t.test('refresh duplicates across both instances spend nothing of the family limit', async () => {
    const limits = { refresh: { perFamily: [{ limit: 10, seconds: 600 }], perAddress: [{ limit: 1000, seconds: 600 }] } };
    const [a, b] = await Promise.all([1, 2].map(() => instance(t, { redisUrl: redis.url, keyPrefix: 'rl-refresh', limits })));
    const first = await signIn(a!);
    const refreshOn = (gw: TestGateway, refreshToken: string) => postJson(`${gw.url}/api/refresh`, { refreshToken });
    const tabs = await Promise.all(Array.from({ length: 10 }, (_, i) => refreshOn(i % 2 === 0 ? a! : b!, first.refreshToken)));
    assert.deepEqual(count(tabs), { 200: 10 });
    let pair = tabs[0]!.body.message;
    for (const res of tabs) assert.deepEqual(res.body.message, pair, 'one pair minted, every duplicate got it');
    for (let i = 1; i <= 9; i++) {
      const res = await refreshOn(i % 2 === 0 ? a! : b!, pair.refreshToken);
      assert.equal(res.status, 200, `refresh #${i} after the burst: ${show(res)}`);
      pair = res.body.message;
    }
    assertRateLimited(await refreshOn(a!, pair.refreshToken), 'the eleventh rotation');
  });
});

test('Redis killed: the failure policies, the degraded signals, and recovery', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const limits = (policy: string) => ({ onStoreFailure: policy, storeTimeoutMs: 100, calls: { perAccount: [{ limit: 3, seconds: 600 }] } });
  const [memA, memB, open, closed] = await Promise.all([
    instance(t, { redisUrl: redis.url, keyPrefix: 'rl-memory', limits: limits('memory') }),
    instance(t, { redisUrl: redis.url, keyPrefix: 'rl-memory', limits: limits('memory') }),
    instance(t, { redisUrl: redis.url, keyPrefix: 'rl-open', limits: limits('open') }),
    instance(t, { redisUrl: redis.url, keyPrefix: 'rl-closed', limits: limits('closed') }),
  ]);
  // Sign-in keeps its tokens in Redis: the tokens are obtained before it goes. Each key prefix
  // is a deployment of its own, with its own reset epoch, so each signs its own token in (memA
  // and memB share one).
  let [{ accessToken }, { accessToken: openToken }, { accessToken: closedToken }] = await Promise.all([signIn(memA), signIn(open), signIn(closed)]);
  const tokenOf = (gw: TestGateway) => (gw === open ? openToken : gw === closed ? closedToken : accessToken);
  await redis.kill();

  await t.test('memory: each instance admits the limit on its own', async () => {
    for (const gw of [memA, memB]) {
      const answers = await rolesCalls(gw, accessToken, 5);
      assert.deepEqual(answers.map((r) => r.status), [200, 200, 200, 429, 429], `${gw.url}: ${answers.map(show).join(' | ')}`);
      assertRateLimited(answers[3]!, 'over the limit in memory');
      assert.equal(answers[0]!.headers.get('ratelimit'), '"roles-account-600s";r=2;t=600', 'memory counts send headers too');
      // The sign-ins before the kill may have found Redis slower than the 100 ms timeout on a
      // busy machine, degrading their own limits for a moment: this limit's lines are counted.
      const warned = logged(gw, DEGRADED).filter((line) => line.limit === 'roles-account');
      assert.equal(warned.length, 1, `one warn line: ${JSON.stringify(warned)}`);
      assert.equal(warned[0]!.level, 40);
      assert.equal(warned[0]!.limit, 'roles-account');
      assert.equal(warned[0]!.policy, 'memory');
      const metrics = await metricsText(gw);
      assert.equal(gauge(metrics, 'roles-account', 'memory'), 1, 'the degraded gauge');
      assert.match(metrics, /^gateway_rate_limit_store_failures_total\{limit="roles-account",policy="memory"\} [1-9]\d*$/m);
    }
  });

  await t.test('open: everything is admitted', async () => {
    const answers = await rolesCalls(open, openToken, 8);
    assert.deepEqual(count(answers), { 200: 8 });
    assert.equal(answers[7]!.headers.get('ratelimit'), null, 'nothing counted, nothing to report');
    assert.equal(logged(open, DEGRADED)[0]?.policy, 'open');
    assert.equal(gauge(await metricsText(open), 'roles-account', 'open'), 1);
  });

  await t.test('closed: 503 store_unavailable', async () => {
    for (const res of await rolesCalls(closed, closedToken, 3)) {
      assert.equal(res.status, 503, show(res));
      assert.deepEqual([res.body.success, res.body.message.code], [false, 'store_unavailable']);
      assert.equal(res.headers.get('retry-after'), '1');
      assert.equal(res.headers.get('www-authenticate'), null);
    }
    assert.equal(logged(closed, DEGRADED)[0]?.policy, 'closed');
    assert.equal(gauge(await metricsText(closed), 'roles-account', 'closed'), 1);
  });

  await t.test('Redis back: counting in Redis again, the gauge 0, the closed policy serves', async () => {
    // An epoch is known by the time its record was made: the instances' frozen clocks move on,
    // as real ones do, so that the new record is told from the old.
    for (const gw of [memA, memB, open, closed]) gw.clock.advance(1000);
    await redis.restart();
    // The restarted Redis is empty: a new epoch, which refuses every earlier access token once
    // an instance notices it. Each does, then signs in anew (a token signed before it noticed
    // would carry the old epoch).
    for (const gw of [memA, memB, open, closed]) await untilDataLossNoticed(gw);
    [{ accessToken }, { accessToken: openToken }, { accessToken: closedToken }] = await Promise.all([signIn(memA), signIn(open), signIn(closed)]);
    for (const [gw, policy] of [[memA, 'memory'], [memB, 'memory'], [open, 'open'], [closed, 'closed']] as const) {
      const recovered = () => logged(gw, RECOVERED).filter((line) => line.limit === 'roles-account');
      await until(`${policy}: counting in Redis again`, async () => {
        await roles(gw, tokenOf(gw));
        return recovered().length > 0;
      });
      const line = recovered()[0]!;
      assert.equal(line.level, 30);
      assert.equal(line.limit, 'roles-account');
      assert.equal(gauge(await metricsText(gw), 'roles-account', policy), 0, `${policy}: the gauge`);
    }
    // Shared again: the restarted (empty) Redis counts for both instances, so the two admit
    // the limit of 3 between them (less what the recovery polls spent), not 3 each.
    const shared = await Promise.all(Array.from({ length: 10 }, (_, i) => roles(i % 2 === 0 ? memA : memB, accessToken)));
    const tally = count(shared);
    assert.ok((tally[200] ?? 0) <= 3 && (tally[200] ?? 0) + (tally[429] ?? 0) === 10, JSON.stringify(tally));
    const closedNow = await roles(closed, closedToken);
    assert.ok(closedNow.status === 200 || closedNow.status === 429, `closed after recovery: ${show(closedNow)}`);
  });
});

test('Redis stalled (SIGSTOP): answered promptly, limited in memory, recovered after SIGCONT', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const backend = await startBackend(t);
  const settings = {
    redisUrl: redis.url,
    keyPrefix: 'rl-stall',
    limits: { onStoreFailure: 'memory', storeTimeoutMs: 100, calls: { perAccount: [{ limit: 3, seconds: 600 }] }, public: { perAddress: [{ limit: 3, seconds: 600 }] } },
    redis: { commandTimeoutMs: 2000, breakerCooldownMs: 300 },
    extra: { routes: [{ prefix: '/open', targets: [backend.url], auth: 'public' }] },
  };
  const [a, b] = await Promise.all([instance(t, settings), instance(t, settings)]);
  const { accessToken } = await signIn(a);
  // Each instance reads the account's resets once while Redis answers (a call on another
  // route, which spends nothing of the roles quota): then bearer checks need no Redis.
  for (const gw of [a, b]) assert.equal((await call(`${gw.url}/api/sign?address=0x52908400098527886E0F7030069857D2E4169EE7`, { token: accessToken })).status, 200);

  // Only what is logged from the stall on: a sign call above may have met the 100 ms limit on a
  // loaded machine before it (its first script load), and said so for sign-account.
  const mark = new Map([a, b].map((gw) => [gw, gw.logs.length]));
  redis.pause();
  let resumed = false;
  t.after(() => { if (!resumed) redis.resume(); });

  await t.test('every answer within 1 s; each instance limits on its own', async () => {
    for (const gw of [a, b]) {
      const answers = await rolesCalls(gw, accessToken, 5, true);
      assert.deepEqual(answers.map((r) => r.status), [200, 200, 200, 429, 429], answers.map(show).join(' | '));
      for (let i = 1; i <= 4; i++) {
        const { res, ms } = await timed(() => call(`${gw.url}/open/page`));
        assert.ok(ms < PROMPT_MS, `public call #${i} took ${Math.round(ms)} ms`);
        assert.equal(res.status, i <= 3 ? 200 : 429, `public call #${i}: ${show(res)}`);
      }
      const warned = gw.logs.slice(mark.get(gw)).map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === DEGRADED);
      assert.deepEqual(warned.map((l) => l.limit).sort(), ['/open-address', 'roles-account']);
      const metrics = await metricsText(gw);
      assert.equal(gauge(metrics, 'roles-account', 'memory'), 1);
      assert.equal(gauge(metrics, '/open-address', 'memory'), 1);
    }
    assert.ok(backend.received.length <= 6, `refused public calls never reached the backend: ${backend.received.length}`);
  });

  await t.test('after SIGCONT: counting in Redis again, the gauge 0', async () => {
    redis.resume();
    resumed = true;
    for (const gw of [a, b]) {
      await until('counting in Redis again', async () => {
        await roles(gw, accessToken);
        return logged(gw, RECOVERED).some((l) => l.limit === 'roles-account');
      });
      assert.equal(gauge(await metricsText(gw), 'roles-account', 'memory'), 0);
    }
    // Shared again: both instances admit the limit of 3 between them, not 3 each. (Less than
    // 3 in fact: the hits that timed out during the stall were executed by Redis once it woke,
    // on top of the memory counts that stood in for them.)
    const shared = await Promise.all(Array.from({ length: 10 }, (_, i) => roles(i % 2 === 0 ? a : b, accessToken)));
    assert.ok((count(shared)[200] ?? 0) <= 3, `at most the shared 3: ${JSON.stringify(count(shared))}`);
    assert.ok((count(shared)[429] ?? 0) >= 7, JSON.stringify(count(shared)));
  });
});
