/**
 * createLimiter (src/limits/limiter.ts): one verdict over every check of a request, the 429 and
 * its headers, refunds of a refused request, dry-run, and the failure policies while the shared
 * store fails, with their log lines and metrics.
 *
 * The memory counters are the real ones, on a ManualClock. The shared store of the failure
 * tests is `SwitchableStore`: real memory counters of their own (standing for the counts in
 * Redis) behind a switch that makes every call throw StoreUnavailable, as RedisRateCounters
 * does when Redis is gone, times out or its breaker is open.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StoreUnavailable, TooManyRequests } from '../../src/errors/errors.js';
import { createLimiter, type Check, type Limit } from '../../src/limits/limiter.js';
import type { StoreFailurePolicy } from '../../src/config/schema.js';
import { MemoryRateCounters } from '../../src/state/rate-counters/memory.js';
import type { CounterWindow, RateCounters, Tally } from '../../src/state/rate-counters/store.js';
import { createLogger } from '../../src/telemetry/log.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { ManualClock } from '../helpers/clock.js';

/** A shared store that works (counting in memory of its own) until `down` is set; then every call throws. */
class SwitchableStore implements RateCounters {
  down = false;
  calls = 0;
  readonly inner: MemoryRateCounters;
  constructor(clock: ManualClock) {
    this.inner = new MemoryRateCounters({ clock, maxEntries: 10_000 });
  }
  #check(): void {
    this.calls++;
    if (this.down) throw new StoreUnavailable(new Error('Connection is closed.'));
  }
  async hit(subject: string, windows: readonly CounterWindow[], cost: number): Promise<Tally> {
    this.#check();
    return this.inner.hit(subject, windows, cost);
  }
  async refund(subject: string, windows: readonly CounterWindow[], cost: number): Promise<void> {
    this.#check();
    return this.inner.refund(subject, windows, cost);
  }
  async clear(subject: string, windows: readonly CounterWindow[]): Promise<void> {
    this.#check();
    return this.inner.clear(subject, windows);
  }
}

interface Setup {
  clock: ManualClock;
  memory: MemoryRateCounters;
  limiter: ReturnType<typeof createLimiter>;
  metrics: ReturnType<typeof createMetrics>;
  /** Log lines so far, parsed. */
  lines(): Record<string, unknown>[];
  /** Lines with this message. */
  logged(msg: string): Record<string, unknown>[];
  /** The Prometheus text of the limiter's registry. */
  text(): Promise<string>;
}

/** A limiter on memory counters alone (no Redis), or with `shared` as the store it counts in first. */
function setup(shared?: (clock: ManualClock) => RateCounters): Setup & { shared: RateCounters } {
  const clock = new ManualClock();
  const memory = new MemoryRateCounters({ clock, maxEntries: 10_000 });
  const counters = shared === undefined ? memory : shared(clock);
  const raw: string[] = [];
  const log = createLogger('info', { write: (line: string) => void raw.push(line) });
  const metrics = createMetrics({ processMetrics: false });
  const limiter = createLimiter({ counters, memory, log, metrics, clock });
  const lines = () => raw.map((line) => JSON.parse(line) as Record<string, unknown>);
  return {
    clock, memory, limiter, metrics, shared: counters, lines,
    logged: (msg) => lines().filter((l) => l.msg === msg),
    text: () => metrics.registry.metrics(),
  };
}

function switchable(): Setup & { store: SwitchableStore } {
  let store: SwitchableStore | undefined;
  const s = setup((clock) => (store = new SwitchableStore(clock)));
  return { ...s, store: store! };
}

function limit(name: string, windows: { limit: number; seconds: number }[], extra: { policy?: StoreFailurePolicy; dryRun?: boolean } = {}): Limit {
  return { name, windows: windows.map((w) => ({ limit: w.limit, ms: w.seconds * 1000 })), policy: extra.policy ?? 'memory', dryRun: extra.dryRun ?? false };
}

function check(l: Limit, subject: string, cost = 1): Check {
  return { limit: l, subject, cost };
}

/** Runs `fn`, which must throw TooManyRequests; returns it. */
async function refusal(fn: () => Promise<unknown>): Promise<TooManyRequests> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof TooManyRequests, `expected TooManyRequests, got ${String(err)}`);
    return err;
  }
  assert.fail('expected TooManyRequests, the request was admitted');
}

/** The value of one sample in the Prometheus text, or undefined when it is not there. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const inside = line.slice(name.length + 1, line.indexOf('}'));
    const have = inside.split(',');
    if (wanted.length === have.length && wanted.every((w) => have.includes(w))) return Number(line.slice(line.indexOf('}') + 2));
  }
  return undefined;
}

const DEGRADED = 'rate limit degraded: Redis unavailable, applying the failure policy';
const RECOVERED = 'rate limit counting in Redis again';
const DRY_RUN = 'rate limit would refuse (dry run)';

test('no checks: nothing counted, no headers', async () => {
  const { limiter, memory } = setup();
  assert.equal(await limiter.take([]), undefined);
  assert.equal(memory.size, 0);
});

test('admitted: RateLimit-Policy and RateLimit name every window of every enforced check', async () => {
  const { limiter, clock } = setup();
  const account = limit('calls-account', [{ limit: 2, seconds: 1 }, { limit: 10, seconds: 60 }]);
  const key = limit('calls-key', [{ limit: 5, seconds: 3600 }]);
  const first = await limiter.take([check(account, 'a'), check(key, 'k')]);
  assert.deepEqual(first, {
    'RateLimit-Policy': '"calls-account-1s";q=2;w=1, "calls-account-60s";q=10;w=60, "calls-key-3600s";q=5;w=3600',
    RateLimit: '"calls-account-1s";r=1;t=1, "calls-account-60s";r=9;t=60, "calls-key-3600s";r=4;t=3600',
  });
  clock.advance(400);
  const second = await limiter.take([check(account, 'a'), check(key, 'k', 2)]);
  assert.equal(second?.RateLimit, '"calls-account-1s";r=0;t=1, "calls-account-60s";r=8;t=60, "calls-key-3600s";r=2;t=3600', 't is rounded up: 600 ms and 59.6 s');
});

test('refused: TooManyRequests 429 rate_limited, Retry-After the refusing window in whole seconds up, exact headers', async () => {
  const { limiter, clock } = setup();
  const l = limit('roles-account', [{ limit: 2, seconds: 10 }, { limit: 100, seconds: 3600 }]);
  await limiter.take([check(l, 'acct')]);
  await limiter.take([check(l, 'acct')]);
  clock.advance(2500);
  const err = await refusal(() => limiter.take([check(l, 'acct')]));
  assert.equal(err.status, 429);
  assert.equal(err.code, 'rate_limited');
  assert.equal(err.expose, true);
  assert.match(err.message, /try again in 8 s/);
  assert.deepEqual(err.headers, {
    'RateLimit-Policy': '"roles-account-10s";q=2;w=10, "roles-account-3600s";q=100;w=3600',
    RateLimit: '"roles-account-10s";r=0;t=8, "roles-account-3600s";r=98;t=3598',
    'Retry-After': '8',
  });
  // Once the window is over, admitted again.
  clock.advance(7500);
  assert.equal((await limiter.take([check(l, 'acct')]))?.RateLimit, '"roles-account-10s";r=1;t=10, "roles-account-3600s";r=97;t=3590');
});

test('Retry-After is that of the window that refused, not of a longer window with room', async () => {
  const { limiter } = setup();
  const burst = limit('burst', [{ limit: 1, seconds: 5 }, { limit: 100, seconds: 86_400 }]);
  const other = limit('other', [{ limit: 100, seconds: 3600 }]);
  await limiter.take([check(burst, 's'), check(other, 's')]);
  const err = await refusal(() => limiter.take([check(burst, 's'), check(other, 's')]));
  assert.equal(err.headers['Retry-After'], '5');
});

test('Retry-After is the longest of the windows that refused, and at least 1 s', async () => {
  const { limiter, clock } = setup();
  const a = limit('a', [{ limit: 1, seconds: 1 }, { limit: 1, seconds: 120 }]);
  const b = limit('b', [{ limit: 1, seconds: 30 }]);
  await limiter.take([check(a, 's'), check(b, 's')]);
  assert.equal((await refusal(() => limiter.take([check(a, 's'), check(b, 's')]))).headers['Retry-After'], '120');
  // A window with under a millisecond left still says 1 s, never 0.
  // (A subject of its own: the counters key a window by subject and length, not by limit name.)
  const c = limit('c', [{ limit: 1, seconds: 1 }]);
  await limiter.take([check(c, 'other')]);
  clock.advance(999);
  assert.equal((await refusal(() => limiter.take([check(c, 'other')]))).headers['Retry-After'], '1');
});

test('a cost larger than what is left is refused; the headers say what remains', async () => {
  const { limiter } = setup();
  const l = limit('costly', [{ limit: 10, seconds: 60 }]);
  await limiter.take([check(l, 's', 7)]);
  const err = await refusal(() => limiter.take([check(l, 's', 4)]));
  assert.equal(err.headers.RateLimit, '"costly-60s";r=3;t=60');
  assert.equal((await limiter.take([check(l, 's', 3)]))?.RateLimit, '"costly-60s";r=0;t=60', 'the refused cost was not counted');
});

test('a refused request spends nothing: what its admitted checks took is given back', async () => {
  const { limiter } = setup();
  const roomy = limit('roomy', [{ limit: 5, seconds: 60 }, { limit: 50, seconds: 3600 }]);
  const tight = limit('tight', [{ limit: 1, seconds: 60 }]);
  assert.equal((await limiter.take([check(roomy, 'r'), check(tight, 't')]))?.RateLimit,
    '"roomy-60s";r=4;t=60, "roomy-3600s";r=49;t=3600, "tight-60s";r=0;t=60');
  for (let i = 0; i < 3; i++) await refusal(() => limiter.take([check(roomy, 'r', 2), check(tight, 't')]));
  // roomy still holds 1 in each window: the three refused requests were refunded.
  assert.equal((await limiter.take([check(roomy, 'r')]))?.RateLimit, '"roomy-60s";r=3;t=60, "roomy-3600s";r=48;t=3600');
});

test('dry-run: never throws, logs the would-be refusal, counts would_refuse, sends no headers of its own', async () => {
  const s = setup();
  const dry = limit('dry', [{ limit: 1, seconds: 60 }], { dryRun: true });
  const enforced = limit('enforced', [{ limit: 10, seconds: 60 }]);
  assert.equal(await s.limiter.take([check(dry, 'd')]), undefined, 'only dry-run limits: no headers');
  assert.deepEqual(s.logged(DRY_RUN), []);
  for (let i = 0; i < 3; i++) assert.equal(await s.limiter.take([check(dry, 'd')]), undefined);
  const lines = s.logged(DRY_RUN);
  assert.equal(lines.length, 3);
  assert.equal(lines[0]!.level, 30, 'info');
  assert.equal(lines[0]!.limit, 'dry');
  assert.equal(lines[0]!.retryAfterMs, 60_000);
  // With an enforced limit beside it, only the enforced one is in the headers.
  assert.deepEqual(await s.limiter.take([check(dry, 'd'), check(enforced, 'e')]), {
    'RateLimit-Policy': '"enforced-60s";q=10;w=60',
    RateLimit: '"enforced-60s";r=9;t=60',
  });
  const text = await s.text();
  assert.equal(sample(text, 'gateway_rate_limit_decisions_total', { limit: 'dry', outcome: 'would_refuse' }), 4);
  assert.equal(sample(text, 'gateway_rate_limit_decisions_total', { limit: 'dry', outcome: 'admitted' }), 1);
  assert.equal(sample(text, 'gateway_rate_limit_decisions_total', { limit: 'dry', outcome: 'refused' }), undefined);
  assert.equal(sample(text, 'gateway_rate_limit_decisions_total', { limit: 'enforced', outcome: 'admitted' }), 1);
});

test('dry-run beside an enforced refusal: the 429 names only the enforced limit', async () => {
  const s = setup();
  const dry = limit('dry', [{ limit: 100, seconds: 60 }], { dryRun: true });
  const enforced = limit('enforced', [{ limit: 1, seconds: 60 }]);
  await s.limiter.take([check(dry, 'd'), check(enforced, 'e')]);
  const err = await refusal(() => s.limiter.take([check(dry, 'd'), check(enforced, 'e')]));
  assert.deepEqual(err.headers, { 'RateLimit-Policy': '"enforced-60s";q=1;w=60', RateLimit: '"enforced-60s";r=0;t=60', 'Retry-After': '60' });
  assert.deepEqual(s.logged(DRY_RUN), []);
});

test('metrics: admitted and refused per limit in the registry text', async () => {
  const s = setup();
  const l = limit('sign-account', [{ limit: 2, seconds: 60 }]);
  for (let i = 0; i < 5; i++) await s.limiter.take([check(l, 'a')]).catch(() => {});
  const text = await s.text();
  assert.match(text, /# TYPE gateway_rate_limit_decisions_total counter/);
  assert.equal(sample(text, 'gateway_rate_limit_decisions_total', { limit: 'sign-account', outcome: 'admitted' }), 2);
  assert.equal(sample(text, 'gateway_rate_limit_decisions_total', { limit: 'sign-account', outcome: 'refused' }), 3);
  assert.doesNotMatch(text, /process_cpu|nodejs_/, 'processMetrics: false');
});

test('refund and clear work on the counters; a refund never takes more than was counted', async () => {
  const { limiter } = setup();
  const l = limit('failures', [{ limit: 2, seconds: 60 }]);
  await limiter.take([check(l, 'k')]);
  await limiter.take([check(l, 'k')]);
  await refusal(() => limiter.take([check(l, 'k')]));
  await limiter.refund(check(l, 'k'));
  assert.equal((await limiter.take([check(l, 'k')]))?.RateLimit, '"failures-60s";r=0;t=60');
  await limiter.clear(check(l, 'k'));
  assert.equal((await limiter.take([check(l, 'k')]))?.RateLimit, '"failures-60s";r=1;t=60');
});

test('store failure, policy memory: counts in memory, admits up to the limit, then refuses', async () => {
  const s = switchable();
  const l = limit('calls-account', [{ limit: 3, seconds: 60 }], { policy: 'memory' });
  s.store.down = true;
  for (let i = 1; i <= 3; i++) {
    assert.equal((await s.limiter.take([check(l, 'a')]))?.RateLimit, `"calls-account-60s";r=${3 - i};t=60`, `take ${i}`);
  }
  const err = await refusal(() => s.limiter.take([check(l, 'a')]));
  assert.equal(err.status, 429);
  assert.equal(err.headers['Retry-After'], '60');
  assert.equal(s.memory.size, 1, 'the count is in this process');
  assert.equal(s.store.inner.size, 0, 'and not in the shared store');
  // Corrections while degraded reach memory too, and never throw.
  await s.limiter.refund(check(l, 'a'));
  assert.equal((await s.limiter.take([check(l, 'a')]))?.RateLimit, '"calls-account-60s";r=0;t=60');
  await s.limiter.clear(check(l, 'a'));
  assert.equal((await s.limiter.take([check(l, 'a')]))?.RateLimit, '"calls-account-60s";r=2;t=60');
});

test('store failure, policy open: admits uncounted, with no headers', async () => {
  const s = switchable();
  const l = limit('public-address', [{ limit: 1, seconds: 60 }], { policy: 'open' });
  s.store.down = true;
  for (let i = 0; i < 5; i++) assert.equal(await s.limiter.take([check(l, 'ip')]), undefined);
  assert.equal(s.memory.size, 0, 'nothing counted in memory');
  const text = await s.text();
  assert.equal(sample(text, 'gateway_rate_limit_decisions_total', { limit: 'public-address', outcome: 'admitted' }), 5);
  assert.equal(sample(text, 'gateway_rate_limit_store_failures_total', { limit: 'public-address', policy: 'open' }), 5);
});

test('store failure, policy closed: StoreUnavailable 503; what other checks took is given back', async () => {
  const s = switchable();
  const closed = limit('signin-address', [{ limit: 100, seconds: 60 }], { policy: 'closed' });
  const counted = limit('counted', [{ limit: 2, seconds: 60 }], { policy: 'memory' });
  s.store.down = true;
  for (let i = 0; i < 3; i++) {
    await assert.rejects(s.limiter.take([check(closed, 'ip'), check(counted, 'c')]), (err: unknown) => {
      assert.ok(err instanceof StoreUnavailable, String(err));
      assert.equal(err.status, 503);
      assert.equal(err.code, 'store_unavailable');
      assert.equal(err.headers['Retry-After'], '1');
      return true;
    });
  }
  // The memory-policy check beside it was refunded each time: still room for 2.
  assert.equal((await s.limiter.take([check(counted, 'c')]))?.RateLimit, '"counted-60s";r=1;t=60');
});

test('store failure, policy closed but the limit in dry-run: admitted', async () => {
  const s = switchable();
  const l = limit('closed-dry', [{ limit: 1, seconds: 60 }], { policy: 'closed', dryRun: true });
  s.store.down = true;
  assert.equal(await s.limiter.take([check(l, 'x')]), undefined);
});

test('store failure, policy closed beside a refusal: the 429 wins', async () => {
  const s = switchable();
  const closed = limit('closed', [{ limit: 100, seconds: 60 }], { policy: 'closed' });
  const tight = limit('tight', [{ limit: 1, seconds: 60 }], { policy: 'memory' });
  s.store.down = true;
  await assert.rejects(s.limiter.take([check(closed, 'x'), check(tight, 't')]), StoreUnavailable);
  // tight was refunded above; fill it, then the next request is refused by it.
  await assert.rejects(s.limiter.take([check(tight, 't')]).then(() => s.limiter.take([check(closed, 'x'), check(tight, 't')])), TooManyRequests);
});

test('degraded: one warn line and gauge 1 when it starts, a reminder after a minute, then an info line and gauge 0 on recovery', async () => {
  const s = switchable();
  const l = limit('refresh-family', [{ limit: 100, seconds: 60 }], { policy: 'memory' });
  assert.ok(await s.limiter.take([check(l, 'f')]));
  assert.deepEqual(s.logged(DEGRADED), []);
  assert.equal(sample(await s.text(), 'gateway_rate_limit_degraded', { limit: 'refresh-family', policy: 'memory' }), undefined);

  s.store.down = true;
  for (let i = 0; i < 4; i++) await s.limiter.take([check(l, 'f')]);
  const warned = s.logged(DEGRADED);
  assert.equal(warned.length, 1, 'once, not per request');
  assert.equal(warned[0]!.level, 40, 'warn');
  assert.equal(warned[0]!.limit, 'refresh-family');
  assert.equal(warned[0]!.policy, 'memory');
  assert.equal(warned[0]!.cause, 'Connection is closed.');
  let text = await s.text();
  assert.equal(sample(text, 'gateway_rate_limit_degraded', { limit: 'refresh-family', policy: 'memory' }), 1);
  assert.equal(sample(text, 'gateway_rate_limit_store_failures_total', { limit: 'refresh-family', policy: 'memory' }), 4);

  s.clock.advance(60_000);
  await s.limiter.take([check(l, 'f')]);
  await s.limiter.take([check(l, 'f')]);
  const reminded = s.logged('rate limit still degraded: Redis unavailable');
  assert.equal(reminded.length, 1);
  assert.equal(reminded[0]!.forMs, 60_000);
  assert.equal(s.logged(DEGRADED).length, 1);

  s.store.down = false;
  for (let i = 0; i < 3; i++) await s.limiter.take([check(l, 'f')]);
  const back = s.logged(RECOVERED);
  assert.equal(back.length, 1, 'once');
  assert.equal(back[0]!.level, 30, 'info');
  assert.equal(back[0]!.limit, 'refresh-family');
  assert.equal(back[0]!.forMs, 60_000);
  text = await s.text();
  assert.equal(sample(text, 'gateway_rate_limit_degraded', { limit: 'refresh-family', policy: 'memory' }), 0);
  assert.equal(sample(text, 'gateway_rate_limit_store_failures_total', { limit: 'refresh-family', policy: 'memory' }), 6);

  // Failing again is a new episode: a new warn line, the gauge back to 1.
  s.store.down = true;
  await s.limiter.take([check(l, 'f')]);
  assert.equal(s.logged(DEGRADED).length, 2);
  assert.equal(sample(await s.text(), 'gateway_rate_limit_degraded', { limit: 'refresh-family', policy: 'memory' }), 1);
});

test('degraded is per limit: a limit that never failed logs no recovery', async () => {
  const s = switchable();
  const failing = limit('failing', [{ limit: 100, seconds: 60 }], { policy: 'open' });
  const healthy = limit('healthy', [{ limit: 100, seconds: 60 }], { policy: 'open' });
  s.store.down = true;
  await s.limiter.take([check(failing, 'x')]);
  s.store.down = false;
  await s.limiter.take([check(healthy, 'x')]);
  assert.deepEqual(s.logged(RECOVERED), [], 'healthy was never degraded');
  assert.equal(sample(await s.text(), 'gateway_rate_limit_degraded', { limit: 'failing', policy: 'open' }), 1, 'failing has not been counted in Redis since');
  await s.limiter.take([check(failing, 'x')]);
  assert.equal(s.logged(RECOVERED).length, 1);
  assert.equal(sample(await s.text(), 'gateway_rate_limit_degraded', { limit: 'failing', policy: 'open' }), 0);
});

test('with the store working, counts go to the shared store, not memory', async () => {
  const s = switchable();
  const l = limit('shared', [{ limit: 2, seconds: 60 }]);
  await s.limiter.take([check(l, 'x')]);
  await s.limiter.take([check(l, 'x')]);
  await refusal(() => s.limiter.take([check(l, 'x')]));
  assert.equal(s.memory.size, 0);
  assert.equal(s.store.inner.size, 1);
  assert.deepEqual(s.logged(DEGRADED), []);
});

test('refund and clear never throw while the store is down', async () => {
  const s = switchable();
  const l = limit('any', [{ limit: 2, seconds: 60 }], { policy: 'closed' });
  s.store.down = true;
  await s.limiter.refund(check(l, 'x'));
  await s.limiter.clear(check(l, 'x'));
  assert.ok(s.store.calls >= 2, 'they did try the store');
});
