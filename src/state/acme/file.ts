/**
 * ACME's state for a gateway alone: one JSON file (acme.stateFile), mode 0600 as it holds
 * private keys, written as the data file is: a temporary file, synced, renamed over. Each
 * operation waits for the one before it, so that two of this process never interleave a read
 * and a write. The lock and the HTTP-01 answers stay in this process: without Redis there is
 * one process (several workers need Redis, config/schema.ts), so no one else to keep out or to
 * answer for; the lock still lapses after its TTL on the gateway's clock, as Redis's does.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { writePrivateFile } from '../../util/private-file.js';
import type { Clock } from '../../util/clock.js';
import type { AcmeCertificate, AcmeStore, ChallengeStore } from './store.js';

interface Kept {
  accountKey?: string;
  certificate?: AcmeCertificate;
}

export function createFileAcmeStore(file: string, clock: Clock): AcmeStore {
  let held: { token: string; until: number } | undefined;
  let last: Promise<unknown> = Promise.resolve();
  /** Runs `step` after every operation begun before it, failed or not. */
  const inTurn = <T>(step: () => Promise<T>): Promise<T> => {
    const result = last.then(step, step);
    last = result.catch(() => undefined);
    return result;
  };
  // A file that is not JSON is left as it is (it may hold the account key an operator wants
  // back): every look fails, naming it, until it is moved aside.
  const readAll = async (): Promise<Kept> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
    try {
      return JSON.parse(text) as Kept;
    } catch {
      throw new Error(`acme.stateFile ${file} is not JSON: move it aside to start afresh`);
    }
  };
  const write = async (change: Kept) => writePrivateFile(file, `${JSON.stringify({ ...(await readAll()), ...change }, null, 2)}\n`);
  return {
    accountKey: (make) => inTurn(async () => {
      const kept = (await readAll()).accountKey;
      if (kept !== undefined) return kept;
      const accountKey = await make();
      await write({ accountKey });
      return accountKey;
    }),
    certificate: () => inTurn(async () => (await readAll()).certificate),
    saveCertificate: (certificate) => inTurn(() => write({ certificate })),
    async lockOrder(ttlMs) {
      if (held !== undefined && held.until > clock.now()) return undefined;
      held = { token: randomBytes(16).toString('hex'), until: clock.now() + ttlMs };
      return held.token;
    },
    async unlockOrder(token) {
      if (held?.token === token) held = undefined;
    },
    onCertificateSaved() {},
  };
}

/** The HTTP-01 answers in this process: each is deleted by its order, or lapses after its TTL. */
export function createMemoryChallengeStore(clock: Clock): ChallengeStore {
  const now = () => clock.now();
  const answers = new Map<string, { keyAuthorization: string; until: number }>();
  return {
    async set(token, keyAuthorization, ttlMs) {
      for (const [old, answer] of answers) if (answer.until <= now()) answers.delete(old);
      answers.set(token, { keyAuthorization, until: now() + ttlMs });
    },
    async delete(token) {
      answers.delete(token);
    },
    async get(token) {
      const answer = answers.get(token);
      return answer !== undefined && answer.until > now() ? answer.keyAuthorization : undefined;
    },
  };
}
