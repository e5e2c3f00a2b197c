/**
 * An account deleted between the owner API's access check and its write gets nothing written
 * into its tombstone: a key or settings token created then would be served by the stores (a
 * key in the sign-in directory, a token in the digest index) of an account that no longer is.
 * The deletion is made to land exactly there by a store that deletes the account when the
 * service's write begins.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../src/errors/errors.js';
import { createOwnerServices } from '../../src/owner/service.js';
import type { OwnerStore } from '../../src/state/owners/store.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { ownerActor, OWNER_A, startOwnerGateway } from '../helpers/owner-keys.js';

/** The gateway's owner store, except that the first account write is preceded by the account's deletion. */
function deletingFirst(store: OwnerStore, now: () => number): OwnerStore {
  let deleted = false;
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'updateAccount') {
        return async (accountId: string, change: Parameters<OwnerStore['updateAccount']>[1]) => {
          if (!deleted) {
            deleted = true;
            await target.updateAccount(accountId, (doc) => ({
              doc: { ...doc, enabled: false, deletedAt: new Date(now()).toISOString(), apiKeys: [], members: [], invites: [], settingsTokens: [] },
              events: [],
              result: undefined,
            }));
          }
          return target.updateAccount(accountId, change);
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const notFound = (err: unknown) => err instanceof GatewayError && err.status === 404;

test('a key or settings token created while the account is being deleted is refused, and the tombstone stays empty', async (t) => {
  const gw = await startOwnerGateway(t);
  const { services, clock } = gw;
  for (const make of [
    (owner: ReturnType<typeof createOwnerServices>) => owner.keys.create(ownerActor(OWNER_A), 'acct_alice', { name: 'late' }),
    (owner: ReturnType<typeof createOwnerServices>) => owner.settingsTokens.create(ownerActor(OWNER_A), 'acct_alice', { name: 'late' }),
  ]) {
    await services.ownerStore.updateAccount('acct_alice', (doc) => ({ doc: { ...doc, deletedAt: undefined, enabled: true, members: [{ ownerId: OWNER_A.id, addedAt: '2026-01-01T00:00:00.000Z' }] }, events: [], result: undefined }));
    const owner = createOwnerServices({
      store: deletingFirst(services.ownerStore, () => clock.now()),
      sessions: new MemorySessionStore({ clock }),
      revocations: services.revocations, clock, limits: services.limits, log: services.log, config: services.config,
    });
    await assert.rejects(make(owner), notFound);
    const tombstone = await services.ownerStore.readAccount('acct_alice');
    assert.ok(tombstone?.deletedAt !== undefined);
    assert.deepEqual(tombstone.apiKeys, [], 'no key in the deleted account');
    assert.deepEqual(tombstone.settingsTokens, [], 'no settings token in the deleted account');
  }
});
