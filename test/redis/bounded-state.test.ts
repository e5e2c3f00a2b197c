/**
 * What clients without credentials can leave behind in Redis (issue 13): refused sign-ins with
 * made-up API keys and refreshes with made-up tokens must not grow Redis with their number.
 * Failures are counted (that is the brute-force protection), so the bound is what the
 * per-address failure limits admit; everything refused beyond them leaves nothing, and no key
 * is longer than a bound, however long the apiKey sent.
 *
 * And a made-up key gets exactly the answers a real key with a wrong secret gets, lockout
 * included, so the limits cannot be used to find out which keys exist.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { DEMO, postJson, sha256Hex, startGateway, type JsonResponse, type TokenPair } from '../helpers/gateway.js';
import { startGatewayProcess } from '../helpers/process.js';
import { rawRedisClient, redisSuite, startRedis } from '../helpers/redis.js';
import { refreshHandleOf } from '../helpers/refresh-token.js';

const WRONG = sha256Hex('not the secret');
/** Longest key the gateway may write for one of these requests (prefix `gw`). */
const MAX_KEY_LENGTH = 200;
const FAILURES_PER_ADDRESS = 10;
const REFRESHES_PER_ADDRESS = 10;

function randomText(length: number): string {
  return randomBytes(length).toString('base64url').slice(0, length);
}

/** A well-formed refresh token naming a family nobody ever started. */
function madeUpRefreshToken(): string {
  const handle = Buffer.from(JSON.stringify(['acct_alice', 'key_alice_1', randomText(22), randomText(22)])).toString('base64url');
  return `${handle}.${randomText(43)}`;
}

/** Runs `make` `n` times, `width` at a time; returns every answer. */
async function inBatches(n: number, width: number, make: () => Promise<JsonResponse>): Promise<JsonResponse[]> {
  const out: JsonResponse[] = [];
  for (let done = 0; done < n; done += width) {
    out.push(...await Promise.all(Array.from({ length: Math.min(width, n - done) }, make)));
  }
  return out;
}

test('refused sign-ins and refreshes with made-up credentials leave a bounded number of short keys in Redis', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startGateway(t, {
    overrides: {
      redis: { url: redis.url },
      limits: {
        mode: 'enforce',
        // Counted in Redis however loaded the machine: a slow answer would be counted in memory.
        storeTimeoutMs: 5000,
        signIn: {
          perAddress: [{ limit: 100_000, seconds: 600 }],
          failuresPerAddress: [{ limit: FAILURES_PER_ADDRESS, seconds: 600 }],
          // failuresPerKeyAndAddress (3 windows) and failuresPerKey (1) keep their defaults.
        },
        refresh: { perAddress: [{ limit: REFRESHES_PER_ADDRESS, seconds: 600 }] },
      },
    },
  });
  const raw = new Redis(redis.url);
  t.after(() => raw.disconnect());
  const before = await raw.dbsize();

  const n = 150;
  const signIns = await inBatches(n, 10, () => postJson(`${gw.url}/api/signin`, { apiKey: randomText(256), apiSecret: WRONG }));
  const statuses = signIns.map((r) => r.status);
  assert.ok(statuses.every((s) => s === 401 || s === 429), `sign-ins answer 401 or 429: ${[...new Set(statuses)]}`);
  assert.equal(statuses.filter((s) => s === 401).length, FAILURES_PER_ADDRESS, 'the per-address failure limit still locks the address out');

  const refreshes = await inBatches(n, 10, () => postJson(`${gw.url}/api/refresh`, { refreshToken: madeUpRefreshToken() }));
  const refreshStatuses = refreshes.map((r) => r.status);
  assert.ok(refreshStatuses.every((s) => s === 401 || s === 429), `refreshes answer 401 or 429: ${[...new Set(refreshStatuses)]}`);
  assert.equal(refreshStatuses.filter((s) => s === 401).length, REFRESHES_PER_ADDRESS, 'the per-address refresh limit still applies');

  // What the admitted failures may hold: per sign-in failure its key+address windows (3) and
  // its key's (1); the address's own windows; per admitted refresh its family's window.
  const bound = FAILURES_PER_ADDRESS * 4 + 2 + REFRESHES_PER_ADDRESS + 1;
  const grown = (await raw.dbsize()) - before;
  assert.ok(grown <= bound, `Redis grew by ${grown} keys for ${2 * n} refused requests; at most ${bound} expected`);

  const keys = await raw.keys('*');
  const longest = keys.reduce((a, k) => (k.length > a.length ? k : a), '');
  assert.ok(longest.length <= MAX_KEY_LENGTH, `a key of ${longest.length} characters: ${longest}`);
});

test('a made-up API key gets exactly the answers of a real key with a wrong secret, lockout included', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startGateway(t, {
    overrides: {
      redis: { url: redis.url },
      proxy: { trustedProxies: ['127.0.0.1'] },
      limits: {
        mode: 'enforce',
        signIn: {
          perAddress: [{ limit: 100_000, seconds: 600 }],
          failuresPerKeyAndAddress: [{ limit: 3, seconds: 60 }, { limit: 5, seconds: 600 }],
          failuresPerAddress: [{ limit: 1000, seconds: 600 }],
          failuresPerKey: [{ limit: 4, seconds: 3600 }],
        },
      },
    },
  });
  /** What a client can see of an answer: status, body, and every header but the per-request ones. */
  const seen = (res: JsonResponse) => {
    const headers = [...res.headers].filter(([name]) => !['date', 'x-request-id', 'content-length'].includes(name));
    return { status: res.status, body: res.body, headers };
  };
  const attempts = async (apiKey: string, address: string) => {
    const out = [];
    for (let i = 0; i < 5; i++) {
      out.push(seen(await postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: WRONG }, { headers: { 'x-forwarded-for': address } })));
    }
    return out;
  };
  const real = await attempts(DEMO.alice.apiKey, '198.51.100.1');
  const madeUp = await attempts(`ak_${randomText(20)}`, '198.51.100.2');
  assert.deepEqual(real.map((a) => a.status), [401, 401, 401, 429, 429], 'the real key is locked out after 3 failures');
  assert.deepEqual(madeUp, real, 'the same answers, headers included');
});

test('each consumed refresh token leaves a small record for its family\'s lifetime, not its successor pair', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const raw = await rawRedisClient(t, redis);
  const gw = await startGatewayProcess(t, { REDIS_URL: redis.url, RATE_LIMITS: 'off' });
  const refresh = async (refreshToken: string) => {
    const res = await postJson(`${gw.url}/api/refresh`, { refreshToken });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.message as TokenPair;
  };
  const signedIn = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
  assert.equal(signedIn.status, 200);
  const chain: TokenPair[] = [signedIn.body.message as TokenPair];
  const n = 30;
  for (let i = 0; i < n; i++) chain.push(await refresh(chain.at(-1)!.refreshToken));

  // Each consumed token's record: what recognises a reuse for the family's lifetime.
  const { accountId } = refreshHandleOf(chain[0]!.refreshToken);
  const consumed = chain.slice(0, n).map((pair) => `gw:rt:{${accountId}}:${refreshHandleOf(pair.refreshToken).tokenId}`);
  const sizes = await Promise.all(consumed.map(async (key) => Number(await raw.call('MEMORY', 'USAGE', key))));
  assert.ok(sizes.every((bytes) => bytes > 0), 'every consumed token is still recognised');
  const ttls = await Promise.all(consumed.map((key) => raw.ttl(key)));
  assert.ok(ttls.every((s) => s > 14 * 86400), 'kept until the family ends');
  const largest = Math.max(...sizes);
  // Ids, a digest and two times take under 300 bytes (Redis 7, listpack); a sealed pair with its
  // access token took 1.8 KB.
  assert.ok(largest <= 600, `a consumed token's record takes ${largest} bytes in Redis, ${n} of them ${sizes.reduce((a, b) => a + b, 0)}: it keeps its successor pair for 30 days, not 10 s`);

  // The grace window still answers a duplicate with the same pair, and only the newest one.
  assert.deepEqual(await refresh(chain.at(-2)!.refreshToken), chain.at(-1));
  const reused = await postJson(`${gw.url}/api/refresh`, { refreshToken: chain.at(-3)!.refreshToken });
  assert.equal(reused.status, 401, 'a token two rotations back is a reuse');
});
