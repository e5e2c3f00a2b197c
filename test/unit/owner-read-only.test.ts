/**
 * A store that takes no writes (the data file while Redis is configured): every change of the
 * account service and the password change is refused up front with 409 read_only_store, before
 * any hashing, and nothing is written; reading and signing in still work.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Revocations } from '../../src/auth/revocation.js';
import { loadConfig } from '../../src/config/load.js';
import { ReadOnlyStore } from '../../src/errors/errors.js';
import type { RateLimits } from '../../src/limits/rate-limits.js';
import { createAccountService } from '../../src/owner/accounts.js';
import { hashPassword } from '../../src/owner/passwords.js';
import { createSessionService } from '../../src/owner/sessions.js';
import type { Actor } from '../../src/owner/types.js';
import { dataFileSchema } from '../../src/state/data-file/data-file.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { createLogger } from '../../src/telemetry/log.js';
import { ManualClock } from '../helpers/clock.js';

const PASSWORD = 'correct horse battery staple';

test('a read-only owner store refuses every change with 409 read_only_store and writes nothing', async () => {
  const clock = new ManualClock();
  const at = new Date(clock.now()).toISOString();
  const data = dataFileSchema.parse({
    accounts: [{ id: 'acct_x', name: 'X', members: [{ ownerId: 'own_1', addedAt: at }, { ownerId: 'own_2', addedAt: at }] }],
    owners: [
      { id: 'own_1', email: 'one@example.com', createdAt: at, passwordHash: await hashPassword(PASSWORD) },
      { id: 'own_2', email: 'two@example.com', createdAt: at, passwordHash: await hashPassword(PASSWORD) },
    ],
  });
  let writes = 0;
  const store = new MemoryOwnerStore(data, { maxAuditEvents: 100, readOnly: 'Redis is configured: the data file is only read.', persist: async () => void (writes += 1) });
  const resets: unknown[] = [];
  const deps = {
    store,
    sessions: new MemorySessionStore({ clock }),
    revocations: { reset: async (scope: unknown) => void resets.push(scope) } as unknown as Revocations,
    clock,
    limits: { ownerSignIn: async () => ({ succeeded: async () => {}, undecided: async () => {}, authorizedCall: async () => {} }) } as unknown as RateLimits,
    log: createLogger('silent'),
    config: loadConfig({ env: {}, overrides: {} }),
  };
  const accounts = createAccountService(deps);
  const sessions = createSessionService(deps);
  const operator: Actor = { caller: { kind: 'operator' }, meta: { ip: '192.0.2.1', requestId: 'r' } };

  const changes: [string, () => Promise<unknown>][] = [
    ['create an account', () => accounts.createAccount(operator, { id: 'acct_new', name: 'New' })],
    ['rename', () => accounts.updateAccount(operator, 'acct_x', { name: 'Y' })],
    ['disable', () => accounts.updateAccount(operator, 'acct_x', { enabled: false })],
    ['delete', () => accounts.deleteAccount(operator, 'acct_x')],
    ['remove a member', () => accounts.removeMember(operator, 'acct_x', 'own_2')],
    ['add an owner', () => accounts.addOwner(operator, 'acct_x', { email: 'three@example.com', initialPassword: 'an initial password' })],
    ['invite', () => accounts.createInvite(operator, 'acct_x', { email: 'four@example.com' })],
  ];
  for (const [what, change] of changes) {
    await assert.rejects(change(), (err) => err instanceof ReadOnlyStore && err.status === 409 && err.code === 'read_only_store', what);
  }
  const signedIn = await sessions.signIn('one@example.com', PASSWORD, operator.meta);
  await assert.rejects(
    sessions.changePassword({ kind: 'owner', ownerId: 'own_1', email: 'one@example.com' }, signedIn.token, { currentPassword: PASSWORD, newPassword: 'a brand new password' }, operator.meta),
    ReadOnlyStore,
  );
  assert.equal(writes, 0, 'nothing was written');
  assert.deepEqual(resets, [], 'nothing was reset');
  assert.equal((await accounts.getAccount(operator.caller, 'acct_x')).name, 'X', 'reading works');
  assert.equal((await accounts.listMembers(operator.caller, 'acct_x', { limit: 10 })).items.length, 2);
});
