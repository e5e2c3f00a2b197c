/**
 * Rate counters: the contract (test/contracts/rate-counters.contract.ts) against memory and a
 * real redis-server, then what only one implementation promises: the memory counters' bound,
 * and Redis's atomicity across connections, one command per hit, and failing fast (own timeout,
 * own breaker) when Redis stops answering.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { BrokenCircuitError } from 'cockatiel';
import { Redis } from 'ioredis';
import { StoreUnavailable } from '../../src/errors/errors.js';
import type { RedisConnection } from '../../src/state/redis/client.js';
import { MemoryRateCounters } from '../../src/state/rate-counters/memory.js';
import { RedisRateCounters } from '../../src/state/rate-counters/redis.js';
import type { CounterWindow } from '../../src/state/rate-counters/store.js';
import { runRateCountersContract } from '../contracts/rate-counters.contract.js';
import { ManualClock } from '../helpers/clock.js';
import { connectedRedis, rawRedisClient, redisSettings, redisSuite, serverWithConnection, startRedis } from '../helpers/redis.js';

/** Generous for the contract: it checks behaviour, not timeouts (200 concurrent hits on a busy machine). */
const CONTRACT_SETTINGS = { timeoutMs: 2000, breakerFailures: 5, breakerCooldownMs: 1000 };

runRateCountersContract('memory', async () => {
  const clock = new ManualClock();
  const counters = new MemoryRateCounters({ clock, maxEntries: 10_000 });
  return {
    counters,
    elapse: async (ms) => clock.advance(ms),
    held: async () => counters.size,
    slackMs: 0,
    close: async () => {},
  };
});

runRateCountersContract('redis', async () => {
  const { redis, close } = await serverWithConnection();
  return {
    counters: new RedisRateCounters(redis, CONTRACT_SETTINGS),
    elapse: (ms) => sleep(ms),
    held: () => redis.run((c) => c.dbsize()),
    // PTTL runs down while the test runs: a timer late by this much on a busy machine still passes.
    slackMs: 250,
    close,
  };
}, redisSuite());

test('memory counters stay within maxEntries while 10x more subjects are hit, and keep the hammered one', async () => {
  const clock = new ManualClock();
  const maxEntries = 1000;
  const counters = new MemoryRateCounters({ clock, maxEntries });
  const windows: CounterWindow[] = [{ limit: 1_000_000, ms: 60_000 }, { limit: 1_000_000, ms: 3_600_000 }];
  let hammered = 0;
  let largest = 0;
  for (let i = 0; i < 10 * maxEntries; i++) {
    await counters.hit(`rotating:${i}`, windows, 1);
    const tally = await counters.hit('hammered', windows, 1);
    hammered++;
    assert.deepEqual(tally.counts, [hammered, hammered], `hit ${i}: the hammered subject keeps its count`);
    largest = Math.max(largest, counters.size);
  }
  assert.ok(largest <= maxEntries, `at most ${maxEntries} windows held, saw ${largest}`);
  assert.ok(counters.size >= maxEntries - 2, `the bound is used, not far undershot: ${counters.size}`);
  // The oldest rotating subjects were dropped (their count forgotten), the newest kept.
  assert.deepEqual((await counters.hit('rotating:0', windows, 1)).counts, [1, 1]);
  assert.deepEqual((await counters.hit(`rotating:${10 * maxEntries - 1}`, windows, 1)).counts, [2, 2]);
});

test('memory counters: a refused hit stores nothing', async () => {
  const counters = new MemoryRateCounters({ clock: new ManualClock(), maxEntries: 1000 });
  for (let i = 0; i < 50; i++) assert.equal((await counters.hit(`s${i}`, [{ limit: 1, ms: 60_000 }], 2)).admitted, false);
  assert.equal(counters.size, 0);
  await counters.refund('never', [{ limit: 1, ms: 60_000 }], 1);
  assert.equal(counters.size, 0, 'a refund stores nothing either');
});

test('redis counters', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const settings = redisSettings(server.url);
  const connections: RedisConnection[] = [];
  t.after(async () => {
    for (const c of connections) await c.close();
  });
  const connect = async () => {
    const c = await connectedRedis(settings);
    connections.push(c);
    return c;
  };

  await t.test('two instances on two connections admit exactly N between them under interleaved concurrent hits', async () => {
    const a = new RedisRateCounters(await connect(), CONTRACT_SETTINGS);
    const b = new RedisRateCounters(await connect(), CONTRACT_SETTINGS);
    const windows = [{ limit: 50, ms: 60_000 }, { limit: 70, ms: 3_600_000 }];
    const tallies = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).hit('shared-subject', windows, 1)));
    const admitted = tallies.filter((x) => x.admitted);
    assert.equal(admitted.length, 50);
    assert.deepEqual(admitted.map((x) => x.counts[0]).sort((p, q) => p! - q!), Array.from({ length: 50 }, (_, i) => i + 1));
    // Each instance sees the other's counts: the next hit from either is refused at 50.
    assert.deepEqual((await a.hit('shared-subject', windows, 1)).counts, [50, 50]);
    assert.deepEqual((await b.hit('shared-subject', [windows[1]!], 1)).counts, [51]);
  });

  await t.test('one Redis command per hit, whatever the number of windows', async () => {
    const counters = new RedisRateCounters(await connect(), CONTRACT_SETTINGS);
    // The first call of a script on a fresh server is EVALSHA, NOSCRIPT, then EVAL: load it first.
    await counters.hit('warm-up', [{ limit: 1, ms: 1000 }], 1);

    const monitor = new Redis(server.url, { lazyConnect: true });
    t.after(() => monitor.disconnect());
    const probe = await rawRedisClient(t, server);
    const seen: { args: string[]; source: string }[] = [];
    const watching = await monitor.monitor();
    watching.on('monitor', (_time: string, args: string[], source: string) => seen.push({ args, source }));
    /** Runs `fn`, then returns the commands clients sent meanwhile (those a script ran excluded). */
    const commandsOf = async (fn: () => Promise<void>): Promise<string[]> => {
      seen.length = 0;
      await fn();
      // Redis executes one command at a time and feeds MONITOR in that order: once the
      // marker is seen, everything before it is too.
      const marker = `marker-${Math.random()}`;
      await probe.echo(marker);
      const deadline = Date.now() + 5000;
      while (!seen.some((c) => c.args[1] === marker)) {
        assert.ok(Date.now() < deadline, 'MONITOR saw the marker');
        await sleep(5);
      }
      return seen.filter((c) => c.source !== 'lua' && c.args[1] !== marker).map((c) => c.args[0]!.toLowerCase());
    };

    for (const n of [1, 3, 8]) {
      const windows = Array.from({ length: n }, (_, i) => ({ limit: 2, ms: (i + 1) * 60_000 }));
      const commands = await commandsOf(async () => {
        for (let i = 0; i < 4; i++) await counters.hit(`per-hit-${n}`, windows, 1);
      });
      assert.deepEqual(commands, ['evalsha', 'evalsha', 'evalsha', 'evalsha'], `${n} window(s): one EVALSHA per hit (2 admitted, 2 refused)`);
    }
    const refund = await commandsOf(() => counters.refund('per-hit-3', [{ limit: 2, ms: 60_000 }, { limit: 2, ms: 120_000 }], 1));
    assert.deepEqual(refund, ['evalsha'], 'a refund is one command too');
    await watching.disconnect();
  });

  await t.test('a stalled Redis: hit fails with StoreUnavailable within about timeoutMs, then at once with the breaker open', async () => {
    // The connection's own breaker and command timeout are kept out of the way, so that what is
    // measured is the counters' own timeout and breaker.
    const stalled = await startRedis(t);
    const redis = await connectedRedis(redisSettings(stalled.url, { commandTimeoutMs: 10_000, breakerFailures: 1000 }));
    connections.push(redis);
    const counters = new RedisRateCounters(redis, { timeoutMs: 100, breakerFailures: 2, breakerCooldownMs: 60_000 });
    const windows = [{ limit: 5, ms: 60_000 }];
    assert.equal((await counters.hit('stall', windows, 1)).admitted, true, 'answers while Redis is up');

    stalled.pause();
    try {
      for (let i = 0; i < 2; i++) {
        const started = performance.now();
        await assert.rejects(counters.hit('stall', windows, 1), StoreUnavailable);
        const ms = performance.now() - started;
        assert.ok(ms >= 90, `failure ${i + 1} waited for the timeout: ${ms.toFixed(0)} ms`);
        assert.ok(ms < 1000, `failure ${i + 1} within about timeoutMs (100): ${ms.toFixed(0)} ms`);
      }
      // Two failures in a row: the breaker is open, nothing waits on Redis.
      // Refused by the open breaker itself, not by a timeout: no call waits on Redis (asserted on
      // the cause rather than on a duration, which a busy machine stretches).
      for (const call of [() => counters.hit('stall', windows, 1), () => counters.refund('stall', windows, 1), () => counters.clear('stall', windows)]) {
        await assert.rejects(call(), (err: unknown) => {
          assert.ok(err instanceof StoreUnavailable);
          assert.equal(err.status, 503);
          assert.equal(err.code, 'store_unavailable');
          assert.ok(err.cause instanceof BrokenCircuitError, `with the breaker open a call is refused by it: ${String(err.cause)}`);
          return true;
        });
      }
    } finally {
      stalled.resume();
    }
  });

  await t.test('a burst larger than one script call takes admits exactly `limit` between its calls', async () => {
    const { redis, close } = await serverWithConnection();
    t.after(close);
    const counters = new RedisRateCounters(redis, CONTRACT_SETTINGS);
    const windows = [{ limit: 500, ms: 60_000 }, { limit: 700, ms: 3_600_000 }];
    const tallies = await Promise.all(Array.from({ length: 900 }, () => counters.hit('burst', windows, 1)));
    assert.equal(tallies.filter((x) => x.admitted).length, 500);
    assert.deepEqual((await counters.hit('burst', [windows[1]!], 1)).counts, [501]);
  });

  await t.test('a stalled Redis: every hit of a batch fails with StoreUnavailable by the one timeout, one breaker failure for the batch', async () => {
    const stalled = await startRedis(t);
    const redis = await connectedRedis(redisSettings(stalled.url, { commandTimeoutMs: 10_000, breakerFailures: 1000 }));
    connections.push(redis);
    const counters = new RedisRateCounters(redis, { timeoutMs: 100, breakerFailures: 2, breakerCooldownMs: 60_000 });
    const windows = [{ limit: 5, ms: 60_000 }, { limit: 50, ms: 3_600_000 }];
    assert.equal((await counters.hit('batch-a', windows, 1)).admitted, true, 'answers while Redis is up');

    stalled.pause();
    try {
      // Five hits in one turn: one script call, so one timeout and one breaker failure.
      const outcomes = await Promise.allSettled(['batch-a', 'batch-b', 'batch-a', 'batch-c', 'batch-b'].map((s) => counters.hit(s, windows, 1)));
      for (const outcome of outcomes) {
        assert.equal(outcome.status, 'rejected');
        assert.ok(outcome.reason instanceof StoreUnavailable, String(outcome.reason));
        assert.ok(!(outcome.reason.cause instanceof BrokenCircuitError), 'failed by the timeout, not the breaker');
      }
      // One failure so far (of two to open): the next batch still waits for Redis, and opens it.
      await assert.rejects(counters.hit('batch-a', windows, 1), (err: unknown) => err instanceof StoreUnavailable && !(err.cause instanceof BrokenCircuitError));
      await assert.rejects(counters.hit('batch-a', windows, 1), (err: unknown) => err instanceof StoreUnavailable && err.cause instanceof BrokenCircuitError);
    } finally {
      stalled.resume();
    }
  });

  await t.test('a killed Redis: hit fails with StoreUnavailable at once, and counts again when the breaker lets a call through', async () => {
    const killed = await startRedis(t);
    const redis = await connectedRedis(redisSettings(killed.url, { commandTimeoutMs: 10_000, breakerFailures: 1000 }));
    connections.push(redis);
    const counters = new RedisRateCounters(redis, { timeoutMs: 100, breakerFailures: 1, breakerCooldownMs: 300 });
    const windows = [{ limit: 5, ms: 60_000 }];
    assert.equal((await counters.hit('kill', windows, 1)).admitted, true);
    await killed.kill();
    const started = performance.now();
    await assert.rejects(counters.hit('kill', windows, 1), StoreUnavailable);
    assert.ok(performance.now() - started < 1000, 'no connection: no wait beyond the timeout');
    await killed.restart();
    // The client reconnects by itself; once the cooldown is over, a trial call goes through.
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        const tally = await counters.hit('kill', windows, 1);
        assert.deepEqual([tally.admitted, tally.counts], [true, [1]], 'a new, empty server counts from 0');
        break;
      } catch (err) {
        assert.ok(err instanceof StoreUnavailable, String(err));
        assert.ok(Date.now() < deadline, 'the counters recover once Redis is back');
        await sleep(50);
      }
    }
  });
});
