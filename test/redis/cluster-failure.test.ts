/**
 * A Redis Cluster (3 primaries, no replicas) with a primary killed: every call to its slots
 * fails within redis.commandTimeoutMs, as StoreUnavailable (503 with Retry-After), while the
 * other primaries keep answering. ioredis's failover retries (100 ms apart, up to 16, its
 * command timeout starting only at the first send to a node) once made such calls fail 600 to
 * 700 ms after they began against a 500 ms timeout; the gateway's own deadline on Cluster calls
 * (state/redis/client.ts) bounds them now.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Command, Redis } from 'ioredis';
import { StoreUnavailable } from '../../src/errors/errors.js';
import { RedisRateCounters } from '../../src/state/rate-counters/redis.js';
import { connectRedis } from '../../src/state/redis/client.js';
import { logged, postJson, sha256Hex, show, startGateway, storedDigest } from '../helpers/gateway.js';
import { redisSettings, redisSuite, silentLog } from '../helpers/redis.js';
import { redisCli, startRedisCluster } from '../helpers/redis-topologies.js';

test('Cluster with a primary killed: every call to its slots fails within commandTimeoutMs, the others still answer', redisSuite(), async (t) => {
  const cluster = await startRedisCluster(t);
  // Short enough that ioredis's retries (16 redirections, 100 ms apart) would outlast it
  // without the gateway's deadline: before it, calls failed only after the timeout, which
  // started late.
  const COMMAND_TIMEOUT_MS = 500;
  // A call that fails after the timeout must fail with it: at most this long after a timer of
  // the same length started with the call fired (a loaded machine delays both alike). Without
  // the gateway's deadline a re-sent command fails about 100 ms after it, on its own timeout
  // (later still under load), so 75 ms tells the two apart; 40 failed on a loaded CI (55 ms).
  const AFTER_TIMER_MS = 75;
  const redis = connectRedis(redisSettings('redis://unused', { url: undefined, clusterNodes: cluster.nodes, commandTimeoutMs: COMMAND_TIMEOUT_MS, breakerFailures: 1000 }), silentLog);
  t.after(() => redis.close());
  assert.equal(await redis.waitUntilReady(10_000), true);
  // Keys spread over every primary: {0} … {29} land in many slots.
  const keys = Array.from({ length: 30 }, (_, i) => `gwtimeout:{${i}}`);
  for (const key of keys) await redis.run((c) => c.set(key, 'v'));

  await cluster.killNode(cluster.ports[0]!);
  let failed = 0;
  let answered = 0;
  for (let round = 0; round < 5; round++) {
    await Promise.all(keys.map(async (key) => {
      const started = performance.now();
      let timerFiredAt = Number.POSITIVE_INFINITY;
      const timer = setTimeout(() => { timerFiredAt = performance.now(); }, COMMAND_TIMEOUT_MS);
      try {
        await redis.run((c) => c.set(key, 'v'));
        answered++;
      } catch (err) {
        const at = performance.now();
        assert.ok(err instanceof StoreUnavailable, `a failure is StoreUnavailable: ${String(err)}`);
        assert.ok(at - started < COMMAND_TIMEOUT_MS || at - timerFiredAt < AFTER_TIMER_MS,
          `${key} failed after ${Math.round(at - started)} ms, ${Math.round(at - timerFiredAt)} ms after its ${COMMAND_TIMEOUT_MS} ms timer: not within commandTimeoutMs (${String(err.cause)})`);
        failed++;
      } finally {
        clearTimeout(timer);
      }
    }));
  }
  assert.ok(failed > 0, 'some keys live on the killed primary');
  assert.ok(answered > 0, 'the live primaries still answer');
});

// One circuit breaker covered the whole Cluster: three calls to the killed primary's slots
// opened it, and every account then got 503 for the cooldown, not only the third whose slots
// that primary held. The breakers are per node now.
test('Cluster with a primary killed: accounts on the other primaries keep signing in; only those on the killed one get 503', redisSuite(), async (t) => {
  const cluster = await startRedisCluster(t);
  // The live primaries keep serving their slots once the killed one is marked failed (else
  // the whole Cluster refuses after cluster-node-timeout, whatever the gateway does).
  for (const port of cluster.ports) await redisCli(port, ['config', 'set', 'cluster-require-full-coverage', 'no']);
  const dir = await mkdtemp(join(tmpdir(), 'gw-cluster-shards-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const accounts = Array.from({ length: 12 }, (_, i) => ({ id: `acct_shard_${i}`, apiKey: `ak_shard_${i}`, secret: `sk_shard_${i}_secret` }));
  const file = join(dir, 'data.json');
  await writeFile(file, JSON.stringify({
    accounts: accounts.map((a, i) => ({ id: a.id, name: a.id, apiKeys: [{ id: `key_shard_${i}`, apiKey: a.apiKey, secretDigest: storedDigest(a.secret) }] })),
  }));
  // A cooldown far longer than the test: one breaker for the Cluster would stay open throughout.
  // A command timeout well above what a busy machine takes, so a live primary's call never times out.
  const gw = await startGateway(t, { overrides: { data: { file }, redis: { clusterNodes: cluster.nodes, breakerFailures: 3, breakerCooldownMs: 120_000, commandTimeoutMs: 2000 } } });
  const signIn = (a: (typeof accounts)[number]) => postJson(`${gw.url}/api/signin`, { apiKey: a.apiKey, apiSecret: sha256Hex(a.secret) });
  for (const a of accounts) assert.equal((await signIn(a)).status, 200, `${a.id} signs in before`);

  // Which primary holds each account's slot (its token state is tagged {<accountId>}).
  const killed = cluster.ports[0]!;
  const node = new Redis({ host: '127.0.0.1', port: cluster.ports[1]! });
  const ranges = await node.cluster('SLOTS');
  node.disconnect();
  const portOf = (slot: number) => ranges.find(([start, end]) => slot >= start && slot <= end)?.[2]?.[1];
  const onKilled = (a: (typeof accounts)[number]) => portOf(new Command('get', [`{${a.id}}`]).getSlot()!) === killed;
  const healthy = accounts.filter((a) => !onKilled(a));
  const lost = accounts.filter(onKilled);
  assert.ok(healthy.length > 0 && lost.length > 0, `accounts on both sides: ${lost.length} on the killed primary`);

  await cluster.killNode(killed);
  for (let round = 0; round < 4; round++) {
    const answers = await Promise.all(accounts.map(async (a) => ({ a, res: await signIn(a) })));
    for (const { a, res } of answers) {
      if (onKilled(a)) assert.equal(res.status, 503, `round ${round}: ${a.id} (killed primary): ${show(res)}`);
      else assert.equal(res.status, 200, `round ${round}: ${a.id} (a live primary) signs in: ${show(res)}`);
    }
  }
  assert.equal(logged(gw, `redis node 127.0.0.1:${killed} circuit breaker open: calls fail at once`).length, 1, 'the killed primary\'s breaker opened');
  assert.equal(logged(gw, 'redis circuit breaker open: calls fail at once').length, 0, 'no breaker for the whole Cluster opened');
});

// The rate counters keep a breaker of their own (a Redis too slow for limits may be fine for
// sign-in): it too covered the whole Cluster, so a lost shard sent every limit to its failure
// policy. It is per primary too now: subjects on the live primaries stay counted in Redis.
test('Cluster with a primary killed: rate counters of subjects on the other primaries keep counting in Redis', redisSuite(), async (t) => {
  const cluster = await startRedisCluster(t);
  for (const port of cluster.ports) await redisCli(port, ['config', 'set', 'cluster-require-full-coverage', 'no']);
  const redis = connectRedis(redisSettings('redis://unused', { url: undefined, clusterNodes: cluster.nodes, commandTimeoutMs: 2000 }), silentLog);
  t.after(() => redis.close());
  assert.equal(await redis.waitUntilReady(10_000), true);
  const counters = new RedisRateCounters(redis, { timeoutMs: 2000, breakerFailures: 3, breakerCooldownMs: 120_000 });
  const window = [{ limit: 1000, ms: 60_000 }];
  const node = new Redis({ host: '127.0.0.1', port: cluster.ports[1]! });
  const ranges = await node.cluster('SLOTS');
  node.disconnect();
  const killed = cluster.ports[0]!;
  const onKilled = (subject: string) => {
    const slot = new Command('get', [redis.keys.rateWindow(subject, 60_000)]).getSlot()!;
    return ranges.find(([start, end]) => slot >= start && slot <= end)?.[2]?.[1] === killed;
  };
  const subjects = Array.from({ length: 12 }, (_, i) => `signin:ak_subject_${i}`);
  const lost = subjects.filter(onKilled);
  const healthy = subjects.filter((s) => !onKilled(s));
  assert.ok(lost.length > 0 && healthy.length > 0, `subjects on both sides: ${lost.length} on the killed primary`);

  await cluster.killNode(killed);
  for (let round = 1; round <= 4; round++) {
    for (const subject of lost) await assert.rejects(counters.hit(subject, window, 1), StoreUnavailable);
    for (const subject of healthy) assert.equal((await counters.hit(subject, window, 1)).counts[0], round, `round ${round}: ${subject} counted in Redis`);
  }
});
