/**
 * Owner passwords and sign-in, below HTTP: the argon2id parameters in the PHC string, the bound
 * on hashes running at once and on those waiting, the rehash of a hash made with older
 * parameters, the dummy verify that makes an unknown email cost what a wrong password costs,
 * disabled owners, and what the owner sign-in limits are asked.
 */
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { test } from 'node:test';
import { hash } from '@node-rs/argon2';
import type { Revocations } from '../../src/auth/revocation.js';
import { loadConfig } from '../../src/config/load.js';
import { InvalidOwnerCredentials, Overloaded } from '../../src/errors/errors.js';
import type { RateLimits } from '../../src/limits/rate-limits.js';
import { budgetRefused, defaultHashConcurrency, hashesStarted, hashLoad, hashPassword, limitHashing, needsRehash, verifyPassword } from '../../src/owner/passwords.js';
import { createSessionService } from '../../src/owner/sessions.js';
import { dataFileSchema } from '../../src/state/data-file/data-file.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { createLogger } from '../../src/telemetry/log.js';
import { ManualClock } from '../helpers/clock.js';

const PASSWORD = 'correct horse battery staple';
const META = { ip: '192.0.2.1', requestId: 'r1' };

test('a hash is an argon2id PHC string with 19456 KiB, 2 passes, 1 lane; it verifies only its password', async () => {
  const phc = await hashPassword(PASSWORD);
  assert.match(phc, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
  assert.notEqual(await hashPassword(PASSWORD), phc, 'salted: the same password hashes differently');
  assert.equal(await verifyPassword(phc, PASSWORD), true);
  assert.equal(await verifyPassword(phc, `${PASSWORD} `), false);
  assert.equal(await verifyPassword('not a PHC string', PASSWORD), false, 'a malformed hash is a mismatch, not a crash');
  assert.equal(needsRehash(phc), false);
  assert.equal(needsRehash(await hash(PASSWORD, { memoryCost: 8192, timeCost: 3, parallelism: 1 })), true, 'older parameters');
  assert.equal(needsRehash('garbage'), true);
});

test('by default a core and a thread-pool thread are left to everything else', () => {
  assert.ok(defaultHashConcurrency() >= 1);
  assert.ok(defaultHashConcurrency() <= Math.max(1, availableParallelism() - 1), `${defaultHashConcurrency()} of ${availableParallelism()} cores`);
  assert.ok(defaultHashConcurrency() <= 3, 'libuv\'s pool has 4 threads: one stays free');
});

test('at most `passwordHashConcurrency` hashes run at once; the rest wait their turn', async (t) => {
  const most = 2;
  limitHashing({ concurrency: most, queue: 100 });
  t.after(() => limitHashing({ concurrency: 0, queue: 64 }));
  let running = 0;
  let waited = 0;
  let done = false;
  const watch = (async () => {
    while (!done) {
      const load = hashLoad();
      running = Math.max(running, load.running);
      waited = Math.max(waited, load.waiting);
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  const hashes = await Promise.all(Array.from({ length: 4 * most }, (_, i) => hashPassword(`password number ${i} and more`)));
  done = true;
  await watch;
  assert.equal(new Set(hashes).size, 4 * most, 'every hash was made');
  assert.equal(running, most, `running at once: ${running}`);
  assert.ok(waited >= most, `the others queued (${waited} at most)`);
  assert.deepEqual(hashLoad(), { running: 0, waiting: 0 });
});

test('past `passwordHashQueue` waiting checks, one is refused at once (503 overloaded), never queued', async (t) => {
  limitHashing({ concurrency: 1, queue: 2 });
  t.after(() => limitHashing({ concurrency: 0, queue: 64 }));
  const phc = await hashPassword(PASSWORD);
  const checks = Array.from({ length: 5 }, () => verifyPassword(phc, PASSWORD).then(() => 'checked', (err: unknown) => err));
  // The refusals settle in microtasks, before any hash can finish (that needs a turn of the event loop).
  await Promise.all(checks.slice(3));
  assert.deepEqual(hashLoad(), { running: 1, waiting: 2 }, 'one running, two queued: the queue is full');
  const outcomes = await Promise.all(checks);
  assert.deepEqual(outcomes.slice(0, 3), ['checked', 'checked', 'checked']);
  for (const refused of outcomes.slice(3)) {
    assert.ok(refused instanceof Overloaded, String(refused));
    assert.equal(refused.status, 503);
    assert.equal(refused.code, 'overloaded');
  }
  assert.deepEqual(hashLoad(), { running: 0, waiting: 0 }, 'the refused left nothing counted');
});

async function setUp(owner: { passwordHash: string; disabled?: boolean }) {
  const clock = new ManualClock();
  const at = new Date(clock.now()).toISOString();
  const data = dataFileSchema.parse({
    accounts: [{ id: 'acct_x', name: 'X', members: [{ ownerId: 'own_1', addedAt: at }] }],
    owners: [{ id: 'own_1', email: 'one@example.com', createdAt: at, ...owner }],
  });
  const store = new MemoryOwnerStore(data, { maxAuditEvents: 100 });
  const subjects: string[] = [];
  const limits = {
    async ownerSignIn(email: string, _address: string, device: string | undefined) {
      subjects.push(`${email} ${device ?? 'untrusted'}`);
      return { succeeded: async () => {}, undecided: async () => {}, authorizedCall: async () => {} };
    },
  } as unknown as RateLimits;
  const config = loadConfig({ env: {}, overrides: {} });
  const service = createSessionService({
    store,
    sessions: new MemorySessionStore({ clock }),
    revocations: {} as Revocations,
    clock,
    limits,
    log: createLogger('silent'),
    config,
  });
  return { store, service, subjects };
}

test('a hash made with older parameters is replaced at the next sign-in, and the password still works', async () => {
  const old = await hash(PASSWORD, { memoryCost: 8192, timeCost: 3, parallelism: 1 });
  const { store, service } = await setUp({ passwordHash: old });
  await service.signIn('one@example.com', PASSWORD, META);
  const rehashed = (await store.findOwner('own_1'))!.passwordHash;
  assert.notEqual(rehashed, old);
  assert.match(rehashed, /\$m=19456,t=2,p=1\$/);
  await service.signIn('one@example.com', PASSWORD, META);
  await assert.rejects(service.signIn('one@example.com', 'a wrong password here', META), InvalidOwnerCredentials);
  assert.equal((await store.findOwner('own_1'))!.passwordHash, rehashed, 'a current hash is left alone');
});

test('a disabled owner cannot sign in, with the right password too; every attempt is counted under the lowercase email', async () => {
  const { service, subjects } = await setUp({ passwordHash: await hashPassword(PASSWORD), disabled: true });
  await assert.rejects(service.signIn('One@Example.com', PASSWORD, META), InvalidOwnerCredentials);
  await assert.rejects(service.signIn('nobody@example.com', PASSWORD, META), InvalidOwnerCredentials);
  assert.deepEqual(subjects, ['one@example.com untrusted', 'nobody@example.com untrusted']);
});

test('an unknown email costs an argon2 verification, as a wrong password does', async () => {
  const { service } = await setUp({ passwordHash: await hashPassword(PASSWORD) });
  // Counted, not timed (a loaded machine stretched a timing of it past its bound): each failed
  // sign-in starts exactly one argon2 computation, with the parameters of a real hash.
  await assert.rejects(service.signIn('nobody@example.com', 'a wrong password here', META), InvalidOwnerCredentials); // the dummy made
  for (const email of ['one@example.com', 'nobody@example.com', 'Nobody.Else@example.com']) {
    const before = hashesStarted();
    await assert.rejects(service.signIn(email, 'a wrong password here', META), InvalidOwnerCredentials);
    assert.equal(hashesStarted() - before, 1, `${email}: one argon2 verification`);
  }
});

test('past `passwordHashBudget` a budgeted check is refused without hashing; a reserved one still hashes; the budget refills with the clock', async (t) => {
  const clock = new ManualClock();
  const phc = await hashPassword(PASSWORD);
  // A thousandth of a core: 1 ms of hashing a second, less than one argon2 verification takes.
  limitHashing({ concurrency: 1, queue: 64, budget: 0.001, now: () => clock.now() });
  t.after(() => limitHashing({ concurrency: 0, queue: 64 }));
  assert.equal(await verifyPassword(phc, PASSWORD, 'budgeted'), true, 'the full bucket admits one');
  const started = hashesStarted();
  const refused = budgetRefused();
  for (let i = 0; i < 5; i++) {
    const err = await verifyPassword(phc, PASSWORD, 'budgeted').then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof Overloaded, `check ${i}: ${String(err)}`);
    assert.equal(err.status, 503);
    assert.ok(Number(err.headers?.['Retry-After']) >= 1, JSON.stringify(err.headers));
  }
  assert.equal(hashesStarted(), started, 'the refused checks started no hash');
  assert.equal(budgetRefused(), refused + 5);
  assert.equal(await verifyPassword(phc, PASSWORD, 'reserved'), true, 'a reserved check (a known device) is not refused by the budget');
  assert.equal(hashesStarted(), started + 1);
  const afterReserved = await verifyPassword(phc, PASSWORD, 'budgeted').catch((e: unknown) => e);
  assert.ok(afterReserved instanceof Overloaded, 'the reserved hash used the budget too');
  // As long as the refusal says: the debt is the hashing time measured, which a loaded machine
  // stretches (the project's CI once needed 827 s of this budget where ten minutes were assumed).
  const wait = Number(afterReserved.headers?.['Retry-After']);
  assert.ok(wait >= 1, JSON.stringify(afterReserved.headers));
  clock.advance(wait * 1000);
  assert.equal(await verifyPassword(phc, PASSWORD, 'budgeted'), true, 'the refilled budget admits one again');
  assert.ok((await verifyPassword(phc, PASSWORD, 'budgeted').catch((e: unknown) => e)) instanceof Overloaded, 'but only one: the bucket holds a second\'s worth');
  assert.deepEqual(hashLoad(), { running: 0, waiting: 0 });
});
