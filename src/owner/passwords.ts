/**
 * Owner passwords: argon2id (@node-rs/argon2) with OWASP's first recommended setting, 19 MiB
 * of memory (memoryCost 19456 KiB), 2 passes, 1 lane, a 16-byte random salt and a 32-byte
 * output, kept as a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`) that names its
 * own parameters, so hashes made with other settings still verify and are replaced on the next
 * sign-in (`needsRehash`).
 *
 * Each hash holds its 19 MiB while it runs, so at most HASH_CONCURRENCY run at once in the
 * process (a cockatiel bulkhead); a flood of sign-ins waits in the bulkhead's queue instead of
 * taking memory (the sign-in limits bound how many one address can queue). An unknown email is
 * checked against a dummy hash made with the same parameters, so it costs what a wrong password
 * costs and the two cannot be told apart by their timing.
 */
import { hash, parseOptions, verify, type Options } from '@node-rs/argon2';
import { bulkhead } from 'cockatiel';
import { randomBase62 } from '../domain/random.js';

/** Argon2id's value in @node-rs/argon2's `Algorithm` (a const enum, which isolatedModules cannot read). */
const ARGON2ID = 2;

export const PASSWORD_PARAMS = { memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

/** Hashes running at once in this process: 4 × 19 MiB at most. */
export const HASH_CONCURRENCY = 4;

/** NIST SP 800-63B rev 4: at least 15 characters without a second factor; no composition rules. */
export const PASSWORD_MIN = 15;
export const PASSWORD_MAX = 256;

const options: Options = { ...PASSWORD_PARAMS, algorithm: ARGON2ID };
const slots = bulkhead(HASH_CONCURRENCY, Number.POSITIVE_INFINITY);
const load = { running: 0, waiting: 0 };
let dummy: Promise<string> | undefined;

/** Runs one argon2 computation when a slot is free. */
async function inSlot<T>(work: () => Promise<T>): Promise<T> {
  load.waiting += 1;
  return slots.execute(async () => {
    load.waiting -= 1;
    load.running += 1;
    try {
      return await work();
    } finally {
      load.running -= 1;
    }
  });
}

/** How many argon2 computations run and wait now (for tests and metrics). */
export function hashLoad(): { running: number; waiting: number } {
  return { ...load };
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
