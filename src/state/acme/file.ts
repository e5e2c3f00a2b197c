/**
 * ACME's state for a gateway alone: one JSON file (acme.stateFile), mode 0600 as it holds
 * private keys, written as the data file is: a temporary file, synced, renamed over. The lock
 * and the HTTP-01 answers stay in this process: without Redis there is one process (several
 * workers need Redis, config/schema.ts), so there is no one else to keep out or to answer for.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { AcmeCertificate, AcmeStore, ChallengeStore } from './store.js';

interface Kept {
  accountKey?: string;
  certificate?: AcmeCertificate;
}

export function createFileAcmeStore(file: string): AcmeStore {
  let held: string | undefined;
  const readAll = async (): Promise<Kept> => {
    try {
      return JSON.parse(await readFile(file, 'utf8')) as Kept;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
  };
  const write = async (change: Kept) => writeAtomically(file, `${JSON.stringify({ ...(await readAll()), ...change }, null, 2)}\n`);
  return {
    async accountKey(make) {
      const kept = (await readAll()).accountKey;
      if (kept !== undefined) return kept;
      const accountKey = await make();
      await write({ accountKey });
      return accountKey;
    },
    async certificate() {
      return (await readAll()).certificate;
    },
    async saveCertificate(certificate) {
      await write({ certificate });
    },
    async lockOrder() {
      if (held !== undefined) return undefined;
      held = randomBytes(16).toString('hex');
      return held;
    },
    async unlockOrder(token) {
      if (held === token) held = undefined;
    },
    onCertificateSaved() {},
  };
}

async function writeAtomically(file: string, text: string): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    // The umask may have taken bits off the mode given to open; never any added.
    await chmod(temp, 0o600);
    await rename(temp, file);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}

/** The HTTP-01 answers in this process: each is deleted by its order, or lapses after its TTL. */
export function createMemoryChallengeStore(now: () => number = Date.now): ChallengeStore {
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
