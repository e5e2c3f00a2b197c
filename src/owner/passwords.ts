/**
 * Owner passwords: argon2id (@node-rs/argon2) with OWASP's first recommended setting, 19 MiB
 * of memory (memoryCost 19456 KiB), 2 passes, 1 lane, a 16-byte random salt and a 32-byte
 * output, kept as a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`) that names its
 * own parameters, so hashes made with other settings still verify and are replaced on the next
 * sign-in (`needsRehash`).
 *
 * Each hash holds a core and 19 MiB while it runs on libuv's thread pool, so a cockatiel bulkhead
 * lets only a few run at once (`owner.passwordHashConcurrency`; by default one core fewer than
 * the machine has, and one thread fewer than the pool, so the event loop, the proxy and file and
 * DNS work always keep a core and a thread) and only `owner.passwordHashQueue` wait: past that a
 * check is refused at once with 503 `overloaded` rather than queued without bound, since a queued
 * sign-in that answers after its client gave up only adds to the flood. The sign-in throttle
 * (limits/rate-limits.ts, `ownerSignIn`) refuses throttled attempts before they reach here.
 *
 * A hashing budget (`owner.passwordHashBudget`, a fraction of a core; 0: none) bounds how much
 * of the machine a flood of sign-ins from browsers without a device cookie can take: their checks
 * are admitted only while the hashing time of the last second or so (every hash counted, the
 * reserved ones too) is within the budget, and answered 503 `overloaded` without hashing past
 * it. Checks that are not budgeted (a sign-in with a valid device cookie for its email, new
 * hashes of an owner who is signed in or being created) are never refused by it: the owners'
 * own browsers keep signing in during a flood, and the queue stays short, since the budget keeps
 * the flood's share below what one slot hashes.
 * An unknown email is checked against a dummy hash made with the same parameters, so it costs
 * what a wrong password costs and the two cannot be told apart by their timing.
 * test/unit/owner-passwords.test.ts holds the bound and the queue.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism, setPriority } from 'node:os';
import { hash, parseOptions, verify, type Options } from '@node-rs/argon2';
import { bulkhead, BulkheadRejectedError, type BulkheadPolicy } from 'cockatiel';
import { randomBase62 } from '../domain/random.js';
import { Overloaded } from '../errors/errors.js';

/** Argon2id's value in @node-rs/argon2's `Algorithm` (a const enum, which isolatedModules cannot read). */
const ARGON2ID = 2;

export const PASSWORD_PARAMS = { memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

/** libuv's thread pool, which @node-rs/argon2 runs on (4 unless UV_THREADPOOL_SIZE says). */
function threadPoolSize(): number {
  const size = Number.parseInt(process.env.UV_THREADPOOL_SIZE ?? '', 10);
  return Number.isInteger(size) && size > 0 ? size : 4;
}

/** Hashes at once when `owner.passwordHashConcurrency` is 0: a core and a pool thread left free, at least one. */
export function defaultHashConcurrency(): number {
  return Math.max(1, Math.min(availableParallelism() - 1, threadPoolSize() - 1));
}

export interface HashingLimits {
  /** Hashes running at once; 0: defaultHashConcurrency(). */
  concurrency: number;
  /** Checks waiting for a slot; past it one is refused (Overloaded). */
  queue: number;
  /** Cores' worth of hashing the budgeted checks may keep busy; 0 (or absent): no budget. */
  budget?: number;
  /** The clock the budget's allowance grows with, in ms (the gateway's; tests move it). */
  now?: () => number;
  /** Nice value for libuv's pool threads, where the hashes run (Linux); 0: left as they are. */
  nice?: number;
}

/** The budget's window: the hashing of about the last second counts. */
const BUDGET_WINDOW_MS = 1000;

/** NIST SP 800-63B rev 4: at least 15 characters without a second factor; no composition rules. */
export const PASSWORD_MIN = 15;
export const PASSWORD_MAX = 256;

const options: Options = { ...PASSWORD_PARAMS, algorithm: ARGON2ID };
const DEFAULT_QUEUE = 64;
let slots: BulkheadPolicy = bulkhead(defaultHashConcurrency(), DEFAULT_QUEUE);
let applied = `0/${DEFAULT_QUEUE}/0`;
/**
 * The budget as a bucket of hashing time (ms): it fills at `share` ms per ms of the clock, up to
 * a window's worth; a budgeted check is admitted while it holds any, and each hash takes out the
 * real time it ran (performance.now(): what the pool thread spent, whatever the clock says).
 * A budgeted check takes out the mean of recent hashes when admitted, corrected when it ends,
 * so that a burst queued at once cannot overdraw it by more than its own length.
 */
const budget = { share: 0, level: 0, at: 0, now: Date.now as () => number, typicalMs: 0 };
const load = { running: 0, waiting: 0 };
let started = 0;
let budgetRefusals = 0;
let dummy: Promise<string> | undefined;

/**
 * Sets the bound on hashing in this process (the thread pool is the process's). Hashes already
 * running or queued finish under the bound they came in with; the same limits again change nothing.
 */
export function limitHashing({ concurrency, queue, budget: share = 0, now = Date.now, nice = 0 }: HashingLimits): void {
  budget.now = now;
  poolNice.wanted = nice;
  if (`${concurrency}/${queue}/${share}` === applied) return;
  if (share !== budget.share) Object.assign(budget, { share, level: share * BUDGET_WINDOW_MS, at: now() });
  applied = `${concurrency}/${queue}/${share}`;
  slots = bulkhead(concurrency === 0 ? defaultHashConcurrency() : concurrency, queue);
}

/**
 * The nice value asked for libuv's pool threads, and the one they have. The pool starts its
 * threads together at its first use, so after a hash has run they are all there to be found
 * (Linux names them `libuv-worker`; setpriority on a thread id sets that thread's alone).
 */
const poolNice = { wanted: 0, applied: 0 };

function renicePool(): void {
  if (poolNice.wanted === poolNice.applied || process.platform !== 'linux') return;
  poolNice.applied = poolNice.wanted;
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      if (readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() === 'libuv-worker') setPriority(Number(tid), poolNice.wanted);
    }
  } catch {
    // No /proc, or a lower nice value not allowed: the threads keep theirs.
  }
}

/** The bucket filled up to now. */
function refill(): void {
  const now = budget.now();
  budget.level = Math.min(budget.share * BUDGET_WINDOW_MS, budget.level + budget.share * Math.max(0, now - budget.at));
  budget.at = now;
}

/** Whose hash it is: `budgeted` checks are refused past the budget, `reserved` ones never by it. */
export type HashShare = 'budgeted' | 'reserved';

/** Runs one argon2 computation when a slot is free; Overloaded when the queue is full or (budgeted) the budget spent. */
async function inSlot<T>(work: () => Promise<T>, share: HashShare): Promise<T> {
  let charged = 0;
  if (budget.share > 0) {
    refill();
    if (share === 'budgeted') {
      if (budget.level <= 0) {
        budgetRefusals += 1;
        // Retry-After: when the bucket holds some again.
        throw new Overloaded(Math.max(1, Math.ceil((-budget.level / budget.share + 1) / 1000)));
      }
      charged = budget.typicalMs;
      budget.level -= charged;
    }
  }
  load.waiting += 1;
  let queued = true;
  try {
    return await slots.execute(async () => {
      queued = false;
      load.waiting -= 1;
      load.running += 1;
      started += 1;
      const began = performance.now();
      try {
        return await work();
      } finally {
        load.running -= 1;
        renicePool();
        const tookMs = performance.now() - began;
        budget.typicalMs = budget.typicalMs === 0 ? tookMs : 0.8 * budget.typicalMs + 0.2 * tookMs;
        if (budget.share > 0) {
          refill();
          budget.level -= tookMs - charged;
          charged = 0;
        }
      }
    });
  } catch (err) {
    if (err instanceof BulkheadRejectedError) throw new Overloaded();
    throw err;
  } finally {
    if (queued) load.waiting -= 1;
    // Refused by the queue: what it was charged goes back.
    if (charged > 0) budget.level += charged;
  }
}

/** How many argon2 computations run and wait now (for tests and metrics). */
export function hashLoad(): { running: number; waiting: number } {
  return { ...load };
}

/**
 * Runs `work` in a hashing slot, as a hash would (tests: holding the only slot shows what a full
 * queue answers, without racing a real hash).
 */
export function inHashSlot<T>(work: () => Promise<T>, share: HashShare = 'reserved'): Promise<T> {
  return inSlot(work, share);
}

/** How many budgeted checks the budget refused in this process (tests, and the bench's checks). */
export function budgetRefused(): number {
  return budgetRefusals;
}

/** How many argon2 computations have started in this process (tests: a throttled attempt adds none). */
export function hashesStarted(): number {
  return started;
}

/** The PHC string of a new password. */
export function hashPassword(password: string): Promise<string> {
  return inSlot(() => hash(password, options), 'reserved');
}

/**
 * Whether `password` is the one `phc` was made from; a malformed PHC string is a mismatch.
 * `budgeted`: a sign-in from a browser without a device cookie for the email, refused past the budget.
 */
export function verifyPassword(phc: string, password: string, share: HashShare = 'reserved'): Promise<boolean> {
  return inSlot(async () => {
    try {
      return await verify(phc, password);
    } catch {
      return false;
    }
  }, share);
}

/** The hash unknown emails are checked against, made once per process. */
function dummyHash(): Promise<string> {
  dummy ??= hashPassword(randomBase62(32));
  return dummy;
}

/**
 * Makes the dummy hash now (at start-up), so that not even the first unknown email pays for
 * making it: that one answer would take twice as long as a wrong password's.
 */
export function prepareDummyHash(): void {
  dummyHash().catch(() => {
    dummy = undefined;
  });
}

/** As verifyPassword for an owner who does not exist: the same work, always false. */
export async function verifyNobody(password: string, share: HashShare = 'reserved'): Promise<false> {
  await verifyPassword(await dummyHash(), password, share);
  return false;
}

/** The hash was made with other parameters (or another algorithm) than a new one would be. */
export function needsRehash(phc: string): boolean {
  try {
    const used = parseOptions(phc);
    return used.algorithm !== ARGON2ID || used.memoryCost !== PASSWORD_PARAMS.memoryCost
      || used.timeCost !== PASSWORD_PARAMS.timeCost || used.parallelism !== PASSWORD_PARAMS.parallelism;
  } catch {
    return true;
  }
}
