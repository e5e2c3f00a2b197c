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
 * An unknown email is checked against a dummy hash made with the same parameters, so it costs
 * what a wrong password costs and the two cannot be told apart by their timing.
 * test/unit/owner-passwords.test.ts holds the bound and the queue.
 */
import { availableParallelism } from 'node:os';
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
}

/** NIST SP 800-63B rev 4: at least 15 characters without a second factor; no composition rules. */
export const PASSWORD_MIN = 15;
export const PASSWORD_MAX = 256;

const options: Options = { ...PASSWORD_PARAMS, algorithm: ARGON2ID };
const DEFAULT_QUEUE = 64;
let slots: BulkheadPolicy = bulkhead(defaultHashConcurrency(), DEFAULT_QUEUE);
let applied = `0/${DEFAULT_QUEUE}`;
const load = { running: 0, waiting: 0 };
let started = 0;
let dummy: Promise<string> | undefined;

/**
 * Sets the bound on hashing in this process (the thread pool is the process's). Hashes already
 * running or queued finish under the bound they came in with; the same limits again change nothing.
 */
export function limitHashing({ concurrency, queue }: HashingLimits): void {
  if (`${concurrency}/${queue}` === applied) return;
  applied = `${concurrency}/${queue}`;
  slots = bulkhead(concurrency === 0 ? defaultHashConcurrency() : concurrency, queue);
}

/** Runs one argon2 computation when a slot is free; Overloaded when the queue is full. */
async function inSlot<T>(work: () => Promise<T>): Promise<T> {
  load.waiting += 1;
  let queued = true;
  try {
    return await slots.execute(async () => {
      queued = false;
      load.waiting -= 1;
      load.running += 1;
      started += 1;
      try {
        return await work();
      } finally {
        load.running -= 1;
      }
    });
  } catch (err) {
    if (err instanceof BulkheadRejectedError) throw new Overloaded();
    throw err;
  } finally {
    if (queued) load.waiting -= 1;
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
export function inHashSlot<T>(work: () => Promise<T>): Promise<T> {
  return inSlot(work);
}

/** How many argon2 computations have started in this process (tests: a throttled attempt adds none). */
export function hashesStarted(): number {
  return started;
}

/** The PHC string of a new password. */
export function hashPassword(password: string): Promise<string> {
  return inSlot(() => hash(password, options));
}

/** Whether `password` is the one `phc` was made from; a malformed PHC string is a mismatch. */
export function verifyPassword(phc: string, password: string): Promise<boolean> {
  return inSlot(async () => {
    try {
      return await verify(phc, password);
    } catch {
      return false;
    }
  });
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
export async function verifyNobody(password: string): Promise<false> {
  await verifyPassword(await dummyHash(), password);
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
