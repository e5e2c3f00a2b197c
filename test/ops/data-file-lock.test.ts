/**
 * One writer for the data file, and a restart that overlaps the old process's drain, with real
 * gateway processes (`node --import tsx src/main.ts`) on one data file:
 *
 *   1. a restart's overlap: the old process drains (and keeps acknowledging changes) while the
 *      new one starts; every change either acknowledged is in the file at the end, since the
 *      new one waits for the old one's lock (and says so, naming its pid) and reads the file
 *      only then. Two writers at once lose changes here (each renames its own version over
 *      the other's);
 *   2. the lock holder killed with SIGKILL right after acknowledging concurrent changes: the
 *      waiting process takes over once the lock is stale (DATA_LOCK_STALE_MS), with every
 *      change the killed one acknowledged (and a waiting process stops at once on SIGTERM);
 *   3. a new process on the port of one that drains waits for the port (and says so) instead of
 *      dying on EADDRINUSE, and listens there once the old one has exited;
 *   4. a holder whose lock is taken from it (the lock directory removed) exits rather than
 *      write over whoever takes the lock next.
 *
 * Nothing is timed: each step waits for a log line, an answer or an exit.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { readDataFile } from '../../src/state/data-file/data-file.js';
import { formatDataFile } from '../../src/state/data-file/writer.js';
import { exitWithin, gatewayEnv, LISTENING, startGatewayProcess, startNode, tempDir, waitForLog, type Child, type LogLine } from '../helpers/process.js';

const PROCESS_LIMIT_MS = 60_000;
const TOKEN = `gwadm_${randomBytes(32).toString('base64url').replaceAll(/[-_]/g, 'x').slice(0, 43)}`;
const DIGEST = `sha256:${createHash('sha256').update(TOKEN, 'utf8').digest('hex')}`;

function emptyDataFile(t: TestContext): string {
  const file = join(tempDir(t), 'data.json');
  writeFileSync(file, formatDataFile({ accounts: [], owners: [] }));
  return file;
}

function envFor(file: string, extra: Record<string, string> = {}): Record<string, string> {
  return { GATEWAY_DATA_FILE: file, OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([DIGEST]), ...extra };
}

/** Starts src/main.ts without waiting for it to listen. */
function startWaiting(t: TestContext, env: Record<string, string>): Child {
  return startNode(t, ['src/main.ts'], { env: gatewayEnv({ PORT: '0', HOST: '127.0.0.1', ...env }), limitMs: PROCESS_LIMIT_MS });
}

const WAITING_FOR_LOCK = (line: LogLine) => typeof line.msg === 'string' && line.msg.startsWith('waiting for the data file lock');

/** Creates an account (operator); true once the gateway acknowledged it, false when it answered otherwise, undefined when it could not be reached. */
async function createAccount(url: string, id: string): Promise<boolean | undefined> {
  try {
    const res = await fetch(`${url}/owner/v1/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, name: id }),
    });
    await res.arrayBuffer();
    return res.status === 201;
  } catch {
    return undefined;
  }
}

/**
 * Four clients creating accounts `acct_<prefix><n>` on `url` until it can no longer be reached
 * or `isDone()`; resolves with the ids it acknowledged. `onAcknowledged` hears the count.
 */
async function createUntilGone(url: string, prefix: string, { isDone = (): boolean => false, onAcknowledged = (_n: number) => {} } = {}): Promise<string[]> {
  const acknowledged: string[] = [];
  let next = 0;
  const client = async () => {
    while (!isDone()) {
      const id = `acct_${prefix}${next++}`;
      const outcome = await createAccount(url, id);
      if (outcome === undefined) return;
      if (outcome) {
        acknowledged.push(id);
        onAcknowledged(acknowledged.length);
      }
    }
  };
  await Promise.all([client(), client(), client(), client()]);
  return acknowledged;
}

function countReached(n: number): { reached: Promise<void>; onAcknowledged: (count: number) => void } {
  let resolve!: () => void;
  const reached = new Promise<void>((r) => { resolve = r; });
  return { reached, onAcknowledged: (count) => { if (count >= n) resolve(); } };
}

test('a restart overlapping the old process\'s drain loses no acknowledged change: the new process waits for the lock, then reads the file', { timeout: 3 * PROCESS_LIMIT_MS }, async (t) => {
  const file = emptyDataFile(t);
  const old = await startGatewayProcess(t, envFor(file, { DRAIN_DELAY_MS: '1500' }), { limitMs: PROCESS_LIMIT_MS });
  const oldCount = countReached(20);
  const oldWrites = createUntilGone(old.url, 'old', { onAcknowledged: oldCount.onAcknowledged });
  await oldCount.reached;

  const next = startWaiting(t, envFor(file));
  // Whichever comes first: the new process waits for the lock, or (two writers) listens beside the old one.
  const first = await waitForLog(next, (line) => WAITING_FOR_LOCK(line) || LISTENING(line), PROCESS_LIMIT_MS);
  // The old one drains, still serving (and acknowledging) changes for DRAIN_DELAY_MS.
  old.child.process.kill('SIGTERM');
  const listening = await waitForLog(next, LISTENING, PROCESS_LIMIT_MS);
  const newCount = countReached(20);
  let newDone = false;
  const newWrites = createUntilGone(listening.url as string, 'new', {
    isDone: () => newDone,
    onAcknowledged: (n) => { newCount.onAcknowledged(n); },
  });
  await newCount.reached;
  newDone = true;
  const acknowledged = [...await oldWrites, ...await newWrites];
  assert.equal((await exitWithin(old.child, PROCESS_LIMIT_MS)).code, 0);
  next.process.kill('SIGTERM');
  assert.equal((await exitWithin(next, PROCESS_LIMIT_MS)).code, 0);

  const inFile = new Set(readDataFile(file).accounts.map((a) => a.id));
  const lost = acknowledged.filter((id) => !inFile.has(id));
  assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.length} acknowledged changes are not in the file`);
  assert.ok(WAITING_FOR_LOCK(first), 'the new process waited for the lock before listening');
  assert.equal(first.holderPid, old.child.process.pid, 'the wait names the holder\'s pid');
});

test('the lock holder killed with SIGKILL: the waiting process takes over once the lock is stale, with every change the killed one acknowledged', { timeout: 3 * PROCESS_LIMIT_MS }, async (t) => {
  const file = emptyDataFile(t);
  const env = envFor(file, { DATA_LOCK_STALE_MS: '2000' });
  const holder = await startGatewayProcess(t, env, { limitMs: PROCESS_LIMIT_MS });
  // Concurrent changes, written in shared writes (group commit), each acknowledged once on disk.
  const ids = Array.from({ length: 30 }, (_, i) => `acct_k${i}`);
  assert.deepEqual(await Promise.all(ids.map((id) => createAccount(holder.url, id))), ids.map(() => true));
  const waiter = startWaiting(t, env);
  const waiting = await waitForLog(waiter, WAITING_FOR_LOCK, PROCESS_LIMIT_MS);
  assert.equal(waiting.holderPid, holder.child.process.pid);
  // A process waiting for the lock holds nothing yet: a stop signal ends it at once.
  const stopped = startWaiting(t, env);
  await waitForLog(stopped, WAITING_FOR_LOCK, PROCESS_LIMIT_MS);
  stopped.process.kill('SIGTERM');
  assert.equal((await exitWithin(stopped, PROCESS_LIMIT_MS)).code, 0);
  assert.ok(stopped.stdout().includes('stopped while waiting for the data file lock'));

  holder.child.process.kill('SIGKILL');
  const listening = await waitForLog(waiter, LISTENING, PROCESS_LIMIT_MS);
  assert.ok(waiter.stdout().includes('took the data file lock'));
  const res = await fetch(`${listening.url as string}/owner/v1/accounts`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const body = await res.json() as { message: { items: { id: string }[] } };
  assert.deepEqual(body.message.items.map((a) => a.id).sort(), [...ids].sort());
  // And it writes: its change is in the file.
  assert.equal(await createAccount(listening.url as string, 'acct_after'), true);
  assert.ok(readDataFile(file).accounts.some((a) => a.id === 'acct_after'));
});

test('a restart while the old process drains waits for the port instead of dying on EADDRINUSE', { timeout: 3 * PROCESS_LIMIT_MS }, async (t) => {
  // Two data files: only the port is shared here.
  const old = await startGatewayProcess(t, envFor(emptyDataFile(t), { DRAIN_DELAY_MS: '1000' }), { limitMs: PROCESS_LIMIT_MS });
  const port = new URL(old.url).port;
  const next = startWaiting(t, envFor(emptyDataFile(t), { PORT: port }));
  const waiting = await waitForLog(next, (line) => typeof line.msg === 'string' && line.msg.startsWith(`port ${port} is in use`), PROCESS_LIMIT_MS);
  assert.equal(waiting.level, 40);

  old.child.process.kill('SIGTERM');
  const listening = await waitForLog(next, LISTENING, PROCESS_LIMIT_MS);
  assert.equal(listening.url, old.url);
  assert.equal((await exitWithin(old.child, PROCESS_LIMIT_MS)).code, 0);
  assert.equal(await createAccount(old.url, 'acct_after'), true, 'the new process answers on the port');
});

test('a holder that loses its lock exits instead of writing on', { timeout: 2 * PROCESS_LIMIT_MS }, async (t) => {
  const file = emptyDataFile(t);
  const holder = await startGatewayProcess(t, envFor(file, { DATA_LOCK_STALE_MS: '2000' }), { limitMs: PROCESS_LIMIT_MS });
  assert.ok(existsSync(`${file}.lock`), 'the lock is held');
  // What a successor taking a stale lock over does: the holder finds it gone at its next renewal.
  rmdirSync(`${file}.lock`);
  const exit = await exitWithin(holder.child, PROCESS_LIMIT_MS);
  assert.equal(exit.code, 1);
  assert.ok(holder.logs().some((line) => line.level === 50 && line.msg === 'lost the data file lock: exiting'), holder.child.stdout());
});
