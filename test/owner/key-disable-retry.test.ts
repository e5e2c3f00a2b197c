/**
 * Disabling a key writes it disabled, then resets its tokens. When the reset fails (the store
 * behind resets unreachable: a 503), the caller retries; the key is disabled already by then,
 * and the retry must still make the reset, or the key's access tokens live on until they expire.
 * (A revoke of a settings token does the same: owner/settings-tokens.ts.)
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { Revocations } from '../../src/auth/revocation.js';
import { StoreUnavailable } from '../../src/errors/errors.js';
import { createOwnerServices } from '../../src/owner/service.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { ownerActor, OWNER_A, startOwnerGateway } from '../helpers/owner-keys.js';

/** The gateway's owner service, with resets that fail once when `failing.next` is set, and a record of those made. */
async function withFlakyResets(t: TestContext) {
  const gw = await startOwnerGateway(t);
  const { services, clock } = gw;
  const resets: unknown[] = [];
  const failing = { next: false };
  const revocations: Revocations = {
    ...services.revocations,
    async reset(scope) {
      if (failing.next) {
        failing.next = false;
        throw new StoreUnavailable(new Error('resets unreachable'));
      }
      resets.push(scope);
      return services.revocations.reset(scope);
    },
  };
  const owner = createOwnerServices({ store: services.ownerStore, sessions: new MemorySessionStore({ clock }), revocations, clock, limits: services.limits, log: services.log, config: services.config });
  return { owner, resets, failing };
}

test('a retried disable of a key whose reset failed makes the reset', async (t) => {
  const { owner, resets, failing } = await withFlakyResets(t);
  const actor = ownerActor(OWNER_A);
  const { key } = await owner.keys.create(actor, 'acct_alice', { name: 'ci' });
  failing.next = true;
  await assert.rejects(owner.keys.update(actor, 'acct_alice', key.id, { enabled: false }), StoreUnavailable);
  assert.deepEqual(resets, []);
  const retried = await owner.keys.update(actor, 'acct_alice', key.id, { enabled: false });
  assert.equal(retried.enabled, false);
  assert.deepEqual(resets, [{ accountId: 'acct_alice', keyId: key.id }], 'the retry resets the key\'s tokens');
});

test('a retried disable of an account whose reset failed makes the reset', async (t) => {
  const { owner, resets, failing } = await withFlakyResets(t);
  failing.next = true;
  const actor = { caller: { kind: 'operator' as const }, meta: { ip: '127.0.0.1', requestId: 'test' } };
  await assert.rejects(owner.accounts.updateAccount(actor, 'acct_alice', { enabled: false }), StoreUnavailable);
  assert.deepEqual(resets, []);
  const retried = await owner.accounts.updateAccount(actor, 'acct_alice', { enabled: false });
  assert.equal(retried.enabled, false);
  assert.deepEqual(resets, [{ accountId: 'acct_alice' }], 'the retry resets the account\'s tokens');
});
