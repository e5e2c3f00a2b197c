/**
 * The contract of OwnerStore (src/state/owners/store.ts), run once per implementation. Every
 * subtest gets a fresh store from `makeStore`, built from the same DataFile fixture, so the
 * subtests are independent of one another and of their order.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Conflict } from '../../src/errors/errors.js';
import { dataFileSchema, type DataFile } from '../../src/state/data-file/data-file.js';
import type { AuditEvent } from '../../src/state/owners/records.js';
import type { AccountDoc, OwnerStore } from '../../src/state/owners/store.js';

export interface OwnerStoreOptions {
  /** Audit events kept per account (`owner.auditMaxEventsPerAccount`). */
  maxAuditEvents: number;
}

export type MakeOwnerStore = (data: DataFile, options: OwnerStoreOptions) => Promise<{ store: OwnerStore; close(): Promise<void> }>;

const DIGEST = (c: string) => `sha256:${c.repeat(64)}`;
const T0 = Date.UTC(2026, 10, 1, 12);

/** An audit event as owner/audit.ts makes them: the id sorts by time. */
export function auditEvent(ms: number, action = 'test.change', targetId = 'x', suffix = '000000000000'): AuditEvent {
  return {
    id: `evt_${String(ms).padStart(13, '0')}_${suffix}`,
    at: new Date(ms).toISOString(),
    action,
    actor: { type: 'operator' },
    target: { type: 'test', id: targetId },
    ip: '127.0.0.1',
  };
}

export const OWNER_STORE_FIXTURE: DataFile = dataFileSchema.parse({
  owners: [
    { id: 'own_ann', email: 'ann@example.com', passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA', createdAt: '2026-10-01T00:00:00.000Z' },
    { id: 'own_bob', email: 'bob@example.com', passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA', createdAt: '2026-10-01T00:00:00.000Z' },
  ],
  accounts: [
    {
      id: 'acct_a',
      name: 'Account A',
      createdAt: '2026-10-01T00:00:00.000Z',
      apiKeys: [{ id: 'key_a1', apiKey: 'ak_contract_a1', secretDigest: DIGEST('a'), name: 'first' }],
      roles: [3, 1, 2, 5, 4].map((id) => ({ id, slug: `r${id}`, name: id % 2 ? `Odd Role ${id}` : `Even role ${id}`, description: `role ${id}`, public: id === 1 })),
      signRecords: [
        { address: '0x52908400098527886E0F7030069857D2E4169EE7', signedNonce: 42, signedAt: '2026-03-01T12:00:00.000Z', signedExpiredAt: '2026-03-31T10:00:00.000Z' },
      ],
      members: [{ ownerId: 'own_ann', addedAt: '2026-10-01T00:00:00.000Z' }],
      invites: [{ id: 'inv_a1', email: 'carol@example.com', digest: DIGEST('b'), createdAt: '2026-10-01T00:00:00.000Z', expiresAt: '2026-10-04T00:00:00.000Z' }],
      settingsTokens: [{ id: 'st_a1', name: 'ci', digest: DIGEST('c'), start: 'gwst_abcd', createdAt: '2026-10-01T00:00:00.000Z' }],
      audit: [auditEvent(T0 - 2000, 'old.one'), auditEvent(T0 - 1000, 'old.two')],
    },
    {
      id: 'acct_b',
      apiKeys: [],
      roles: [{ id: 9, slug: 'b', name: 'B role', description: '', public: false }],
      signRecords: [],
      members: [{ ownerId: 'own_bob', addedAt: '2026-10-01T00:00:00.000Z' }],
      settingsTokens: [{ id: 'st_b1', name: 'b', digest: DIGEST('d'), start: 'gwst_efgh', createdAt: '2026-10-01T00:00:00.000Z', revokedAt: '2026-10-02T00:00:00.000Z' }],
    },
    {
      id: 'acct_gone',
      apiKeys: [],
      deletedAt: '2026-10-03T00:00:00.000Z',
      members: [{ ownerId: 'own_ann', addedAt: '2026-10-01T00:00:00.000Z' }],
    },
  ],
});

const ADDRESS = '0x52908400098527886e0f7030069857d2e4169ee7';
const OTHER_ADDRESS = `0x${'ab'.repeat(20)}`;

function newAccount(id: string): AccountDoc {
  return { id, name: `Account ${id}`, enabled: true, createdAt: '2026-11-01T00:00:00.000Z', apiKeys: [], members: [], invites: [], settingsTokens: [], webhooks: [] };
}

export function runOwnerStoreContract(name: string, makeStore: MakeOwnerStore): void {
  test(`OwnerStore contract: ${name}`, async (t) => {
    /** A fresh store for one subtest, closed when it ends. */
    async function fresh(st: TestContext, options: OwnerStoreOptions = { maxAuditEvents: 100 }): Promise<OwnerStore> {
      const { store, close } = await makeStore(structuredClone(OWNER_STORE_FIXTURE), options);
      st.after(close);
      return store;
    }
    async function actions(store: OwnerStore, accountId: string): Promise<string[]> {
      return (await store.listAudit(accountId, { limit: 1000 })).map((e) => e.action);
    }

    await t.test('a fresh store takes writes', async (st) => {
      const store = await fresh(st);
      assert.equal(store.readOnly, undefined);
      assert.equal(store.directoryReadOnly, undefined);
    });

    await t.test('lists every account, deleted ones too, in id order; reads one; unknown is undefined', async (st) => {
      const store = await fresh(st);
      assert.deepEqual((await store.listAccounts()).map((a) => a.id), ['acct_a', 'acct_b', 'acct_gone']);
      const a = await store.readAccount('acct_a');
      assert.equal(a?.name, 'Account A');
      assert.deepEqual(a?.apiKeys.map((k) => k.id), ['key_a1']);
      assert.equal((a as Record<string, unknown> | undefined)?.roles, undefined, 'an AccountDoc leaves roles out');
      assert.equal((a as Record<string, unknown> | undefined)?.audit, undefined, 'an AccountDoc leaves audit out');
      assert.equal((await store.readAccount('acct_gone'))?.deletedAt, '2026-10-03T00:00:00.000Z');
      assert.equal(await store.readAccount('acct_none'), undefined);
    });

    await t.test('what a read returns is a copy: changing it changes nothing stored', async (st) => {
      const store = await fresh(st);
      const a = (await store.readAccount('acct_a'))!;
      a.name = 'changed';
      a.apiKeys.pop();
      assert.equal((await store.readAccount('acct_a'))?.name, 'Account A');
      assert.equal((await store.readAccount('acct_a'))?.apiKeys.length, 1);
    });

    await t.test('createAccount adds the account with its events; a taken id (a deleted account\'s too) is false and stores nothing', async (st) => {
      const store = await fresh(st);
      assert.equal(await store.createAccount(newAccount('acct_c'), [auditEvent(T0, 'account.create', 'acct_c')]), true);
      assert.deepEqual(await store.readAccount('acct_c'), newAccount('acct_c'));
      assert.deepEqual(await actions(store, 'acct_c'), ['account.create']);
      assert.deepEqual((await store.listAccounts()).map((a) => a.id), ['acct_a', 'acct_b', 'acct_c', 'acct_gone']);
      assert.deepEqual(await store.listRoles('acct_c', { offset: 0, limit: 10 }), { items: [], total: 0 });

      assert.equal(await store.createAccount({ ...newAccount('acct_a'), name: 'again' }, [auditEvent(T0 + 1, 'account.create', 'acct_a')]), false);
      assert.equal((await store.readAccount('acct_a'))?.name, 'Account A');
      assert.deepEqual(await actions(store, 'acct_a'), ['old.two', 'old.one']);
      assert.equal(await store.createAccount(newAccount('acct_gone'), []), false);
      assert.equal((await store.readAccount('acct_gone'))?.deletedAt, '2026-10-03T00:00:00.000Z');
    });

    await t.test('updateAccount stores the change with its events and returns the result', async (st) => {
      const store = await fresh(st);
      const result = await store.updateAccount('acct_a', (doc) => ({
        doc: { ...doc, name: 'Renamed', enabled: false },
        events: [auditEvent(T0, 'account.update', 'acct_a')],
        result: `was ${doc.name}`,
      }));
      assert.equal(result, 'was Account A');
      const a = await store.readAccount('acct_a');
      assert.equal(a?.name, 'Renamed');
      assert.equal(a?.enabled, false);
      assert.deepEqual(await actions(store, 'acct_a'), ['account.update', 'old.two', 'old.one']);
      // Roles and sign records are not part of the doc, and an update leaves them alone.
      assert.equal((await store.listRoles('acct_a', { offset: 0, limit: 10 })).total, 5);
      assert.equal((await store.getSignRecord('acct_a', ADDRESS))?.signedNonce, 42);
    });

    await t.test('a key marked compromised by a leak report keeps the mark and its replaced digest; a roll\'s write without it clears it', async (st) => {
      const store = await fresh(st);
      const at = '2026-11-03T00:00:00.000Z';
      await store.updateAccount('acct_a', (doc) => ({
        doc: { ...doc, apiKeys: doc.apiKeys.map((k) => ({ ...k, secretDigest: DIGEST('f'), compromisedAt: at })) },
        events: [{ ...auditEvent(T0, 'key.leak_reported', 'key_a1'), actor: { type: 'system' as const } }],
        result: undefined,
      }));
      const marked = (await store.readAccount('acct_a'))!.apiKeys[0]!;
      assert.equal(marked.compromisedAt, at);
      assert.equal(marked.secretDigest, DIGEST('f'));
      await store.updateAccount('acct_a', (doc) => ({
        doc: { ...doc, apiKeys: doc.apiKeys.map(({ compromisedAt: _at, ...k }) => ({ ...k, secretDigest: DIGEST('9') })) },
        events: [auditEvent(T0, 'key.roll', 'key_a1')],
        result: undefined,
      }));
      assert.equal((await store.readAccount('acct_a'))!.apiKeys[0]!.compromisedAt, undefined);
      assert.deepEqual((await actions(store, 'acct_a')).slice(0, 2), ['key.roll', 'key.leak_reported']);
    });

    await t.test('updateAccount without a doc writes nothing and drops the events', async (st) => {
      const store = await fresh(st);
      const result = await store.updateAccount('acct_a', () => ({ events: [auditEvent(T0, 'dropped')], result: 7 }));
      assert.equal(result, 7);
      assert.deepEqual(await actions(store, 'acct_a'), ['old.two', 'old.one']);
    });

    await t.test('a GatewayError thrown by the change reaches the caller and writes nothing', async (st) => {
      const store = await fresh(st);
      await assert.rejects(
        store.updateAccount('acct_a', () => {
          throw new Conflict('no', 'name');
        }),
        (err: unknown) => err instanceof Conflict && err.field === 'name',
      );
      assert.equal((await store.readAccount('acct_a'))?.name, 'Account A');
      assert.deepEqual(await actions(store, 'acct_a'), ['old.two', 'old.one']);
      // The store still takes the next change.
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, name: 'next' }, events: [], result: undefined }));
      assert.equal((await store.readAccount('acct_a'))?.name, 'next');
    });

    await t.test('updateAccount of an unknown account throws NotFound and calls no change', async (st) => {
      const store = await fresh(st);
      let called = false;
      await assert.rejects(
        store.updateAccount('acct_none', (doc) => {
          called = true;
          return { doc, events: [], result: undefined };
        }),
        { status: 404, code: 'not_found' },
      );
      assert.equal(called, false);
      assert.equal(await store.readAccount('acct_none'), undefined);
    });

    await t.test('50 concurrent updates appending to a list all survive, each with its event', async (st) => {
      const store = await fresh(st);
      const n = 50;
      await Promise.all(Array.from({ length: n }, (_, i) => store.updateAccount('acct_a', (doc) => ({
        doc: { ...doc, apiKeys: [...doc.apiKeys, { id: `key_c${i}`, apiKey: `ak_concurrent_${i}`, secretDigest: DIGEST('e'), disabled: false, scopes: [] }] },
        events: [auditEvent(T0 + i, 'key.create', `key_c${i}`)],
        result: i,
      }))));
      const ids = new Set((await store.readAccount('acct_a'))!.apiKeys.map((k) => k.id));
      assert.equal(ids.size, n + 1);
      for (let i = 0; i < n; i++) assert.ok(ids.has(`key_c${i}`), `key_c${i} kept`);
      assert.equal((await actions(store, 'acct_a')).filter((a) => a === 'key.create').length, n);
    });

    await t.test('owners: found by id and by lowercase email; unknown ones are undefined', async (st) => {
      const store = await fresh(st);
      assert.equal((await store.findOwner('own_ann'))?.email, 'ann@example.com');
      assert.equal((await store.findOwnerByEmail('ann@example.com'))?.id, 'own_ann');
      assert.equal(await store.findOwnerByEmail('nobody@example.com'), undefined);
      assert.equal(await store.findOwner('own_none'), undefined);
    });

    await t.test('createOwner adds an owner; a taken email in another case or a taken id is false', async (st) => {
      const store = await fresh(st);
      const carol = { id: 'own_carol', email: 'carol@example.com', passwordHash: 'x', mustChangePassword: true, disabled: false, createdAt: '2026-11-01T00:00:00.000Z' };
      assert.equal(await store.createOwner(carol), true);
      assert.deepEqual(await store.findOwner('own_carol'), carol);
      assert.equal((await store.findOwnerByEmail('carol@example.com'))?.id, 'own_carol');
      assert.equal(await store.createOwner({ ...carol, id: 'own_carol2', email: 'Carol@EXAMPLE.com' }), false);
      assert.equal(await store.findOwner('own_carol2'), undefined);
      assert.equal(await store.createOwner({ ...carol, email: 'other@example.com' }), false);
      assert.equal(await store.findOwnerByEmail('other@example.com'), undefined);
    });

    await t.test('updateOwner stores the change; no owner returned writes nothing; unknown is NotFound', async (st) => {
      const store = await fresh(st);
      const result = await store.updateOwner('own_ann', (owner) => ({ owner: { ...owner, passwordHash: 'new', mustChangePassword: false, passwordChangedAt: '2026-11-02T00:00:00.000Z' }, result: owner.passwordHash }));
      assert.match(result, /^\$argon2id/);
      const ann = await store.findOwner('own_ann');
      assert.equal(ann?.passwordHash, 'new');
      assert.equal(ann?.passwordChangedAt, '2026-11-02T00:00:00.000Z');
      assert.equal((await store.findOwnerByEmail('ann@example.com'))?.passwordHash, 'new');

      assert.equal(await store.updateOwner('own_ann', () => ({ result: 'none' })), 'none');
      assert.equal((await store.findOwner('own_ann'))?.passwordHash, 'new');
      await assert.rejects(store.updateOwner('own_ann', () => {
        throw new Conflict('no');
      }), Conflict);
      assert.equal((await store.findOwner('own_ann'))?.passwordHash, 'new');
      await assert.rejects(store.updateOwner('own_none', (owner) => ({ owner, result: undefined })), { status: 404 });
    });

    await t.test('updateOwner keeps the mailed one-time tokens (digests) and the verification time with the owner, and drops them when left out', async (st) => {
      const store = await fresh(st);
      const kept = {
        emailVerifiedAt: '2026-11-03T00:00:00.000Z',
        emailVerification: { digest: `sha256:${'a'.repeat(64)}`, expiresAt: '2026-11-06T00:00:00.000Z', email: 'ann@example.com' },
        passwordReset: { digest: `sha256:${'b'.repeat(64)}`, expiresAt: '2026-11-03T00:30:00.000Z' },
      };
      await store.updateOwner('own_ann', (owner) => ({ owner: { ...owner, ...kept }, result: undefined }));
      const ann = await store.findOwner('own_ann');
      assert.deepEqual([ann?.emailVerifiedAt, ann?.emailVerification, ann?.passwordReset], [kept.emailVerifiedAt, kept.emailVerification, kept.passwordReset]);
      assert.deepEqual((await store.findOwnerByEmail('ann@example.com'))?.passwordReset, kept.passwordReset);
      await store.updateOwner('own_ann', ({ passwordReset: _used, emailVerification: _also, ...owner }) => ({ owner, result: undefined }));
      const after = await store.findOwner('own_ann');
      assert.deepEqual([after?.emailVerifiedAt, after?.emailVerification, after?.passwordReset], [kept.emailVerifiedAt, undefined, undefined]);
    });

    await t.test('updateOwner to an email another owner has (in any case) is a Conflict naming email; a free one moves the owner', async (st) => {
      const store = await fresh(st);
      await assert.rejects(store.updateOwner('own_ann', (owner) => ({ owner: { ...owner, email: 'BOB@example.com' }, result: undefined })), { status: 409, field: 'email' });
      assert.equal((await store.findOwnerByEmail('bob@example.com'))?.id, 'own_bob');
      assert.equal((await store.findOwner('own_ann'))?.email, 'ann@example.com');
      await store.updateOwner('own_ann', (owner) => ({ owner: { ...owner, email: 'ann2@example.com' }, result: undefined }));
      assert.equal((await store.findOwnerByEmail('ann2@example.com'))?.id, 'own_ann');
      assert.equal(await store.findOwnerByEmail('ann@example.com'), undefined);
    });

    await t.test('an owner\'s second factors (TOTP, recovery code digests, passkeys) and an account\'s requirement are stored as written', async (st) => {
      const store = await fresh(st);
      const passkey = { id: 'cred_AbC-_1', publicKey: 'pQECAyYgASFYIA', counter: 3, transports: ['internal'], name: 'Laptop', createdAt: '2026-11-02T00:00:00.000Z' };
      await store.updateOwner('own_ann', (owner) => ({
        owner: { ...owner, totp: { secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', enabledAt: '2026-11-02T00:00:00.000Z', lastStep: 59_000_000 }, recoveryCodes: [`sha256:${'a'.repeat(64)}`], passkeys: [passkey] },
        result: undefined,
      }));
      const ann = await store.findOwner('own_ann');
      assert.deepEqual(ann?.totp, { secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', enabledAt: '2026-11-02T00:00:00.000Z', lastStep: 59_000_000 });
      assert.deepEqual(ann?.recoveryCodes, [`sha256:${'a'.repeat(64)}`]);
      assert.deepEqual(ann?.passkeys, [passkey]);
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, requireSecondFactor: true }, events: [], result: undefined }));
      assert.equal((await store.readAccount('acct_a'))?.requireSecondFactor, true);
    });

    await t.test('of concurrent updateOwner changes that each accept one TOTP step, exactly one wins (a code is accepted once)', async (st) => {
      const store = await fresh(st);
      await store.updateOwner('own_ann', (owner) => ({ owner: { ...owner, totp: { secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', enabledAt: '2026-11-02T00:00:00.000Z' } }, result: undefined }));
      const step = 59_000_001;
      const accept = () => store.updateOwner('own_ann', (owner) => {
        if (owner.totp === undefined || (owner.totp.lastStep ?? -1) >= step) return { result: false };
        return { owner: { ...owner, totp: { ...owner.totp, lastStep: step } }, result: true };
      });
      const results = await Promise.all([accept(), accept(), accept(), accept()]);
      assert.equal(results.filter(Boolean).length, 1, results.join(' '));
      assert.equal((await store.findOwner('own_ann'))?.totp?.lastStep, step);
    });

    await t.test('accountsOf lists the accounts an owner is a member of, deleted ones left out', async (st) => {
      const store = await fresh(st);
      assert.deepEqual(await store.accountsOf('own_ann'), ['acct_a']);
      assert.deepEqual(await store.accountsOf('own_bob'), ['acct_b']);
      assert.deepEqual(await store.accountsOf('own_none'), []);
      await store.updateAccount('acct_b', (doc) => ({ doc: { ...doc, members: [...doc.members, { ownerId: 'own_ann', addedAt: '2026-11-01T00:00:00.000Z' }] }, events: [], result: undefined }));
      assert.deepEqual((await store.accountsOf('own_ann')).sort(), ['acct_a', 'acct_b']);
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, members: [], deletedAt: '2026-11-02T00:00:00.000Z' }, events: [], result: undefined }));
      assert.deepEqual(await store.accountsOf('own_ann'), ['acct_b']);
    });

    await t.test('an account marked deleted keeps its id and audit trail, and loses its roles and sign records', async (st) => {
      const store = await fresh(st);
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, apiKeys: [], members: [], deletedAt: '2026-11-02T00:00:00.000Z' }, events: [auditEvent(T0, 'account.delete')], result: undefined }));
      assert.equal((await store.readAccount('acct_a'))?.deletedAt, '2026-11-02T00:00:00.000Z');
      assert.deepEqual(await store.listRoles('acct_a', { offset: 0, limit: 10 }), { items: [], total: 0 });
      assert.equal(await store.getRole('acct_a', 1), undefined);
      assert.equal(await store.getSignRecord('acct_a', '0x52908400098527886e0f7030069857d2e4169ee7'), undefined);
      assert.equal((await store.listAudit('acct_a', { limit: 1 }))[0]?.action, 'account.delete');
    });

    await t.test('a deleted account takes no role or sign record (a write that raced its deletion): not_found, nothing stored', async (st) => {
      const store = await fresh(st);
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, apiKeys: [], members: [], deletedAt: '2026-11-02T00:00:00.000Z' }, events: [], result: undefined }));
      const address = '0x52908400098527886e0f7030069857d2e4169ee7';
      assert.equal(await store.putRole('acct_a', { id: 11, slug: 'late', name: 'Late', description: '', public: true }, undefined, [auditEvent(T0, 'role.create')]), 'not_found');
      assert.equal(await store.putSignRecord('acct_a', { address, signedNonce: 7, signedAt: T0, signedExpiredAt: T0 + 1000 }, 'create', [auditEvent(T0, 'sign.create')]), 'not_found');
      assert.deepEqual(await store.listRoles('acct_a', { offset: 0, limit: 10 }), { items: [], total: 0 });
      assert.equal(await store.getSignRecord('acct_a', address), undefined);
      assert.deepEqual(await actions(store, 'acct_a'), ['old.two', 'old.one'], 'no event recorded for a write that was refused');
    });

    await t.test('a write made for an owner takes effect only while the owner is a member (a write that raced their removal): not_found, nothing stored', async (st) => {
      const store = await fresh(st);
      const address = '0x52908400098527886e0f7030069857d2e4169ee7';
      const role = { id: 12, slug: 'member', name: 'Member', description: '', public: true };
      // A member's write goes through.
      assert.equal(await store.putRole('acct_a', role, undefined, [auditEvent(T0, 'role.create')], 'own_ann'), 'ok');
      assert.equal(await store.putRole('acct_a', { ...role, id: 13 }, undefined, [], 'own_bob'), 'not_found', 'not a member of acct_a');
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, members: [] }, events: [], result: undefined }));
      const before = await actions(store, 'acct_a');
      assert.equal(await store.putRole('acct_a', { ...role, id: 14, slug: 'late' }, undefined, [auditEvent(T0, 'role.create')], 'own_ann'), 'not_found');
      assert.equal(await store.putRole('acct_a', { ...role, name: 'Renamed' }, 12, [auditEvent(T0, 'role.update')], 'own_ann'), 'not_found');
      assert.equal(await store.deleteRole('acct_a', 12, [auditEvent(T0, 'role.delete')], 'own_ann'), false);
      assert.equal(await store.putSignRecord('acct_a', { address, signedNonce: 9, signedAt: T0, signedExpiredAt: T0 + 1000 }, 'replace', [auditEvent(T0, 'sign.update')], 'own_ann'), 'not_found');
      assert.equal(await store.deleteSignRecord('acct_a', address, [auditEvent(T0, 'sign.delete')], 'own_ann'), false);
      assert.deepEqual(await store.getRole('acct_a', 12), role);
      assert.equal(await store.getRole('acct_a', 14), undefined);
      assert.equal((await store.getSignRecord('acct_a', address))?.signedNonce !== 9, true);
      assert.notEqual(await store.getSignRecord('acct_a', address), undefined);
      assert.deepEqual(await actions(store, 'acct_a'), before, 'no event recorded for a write that was refused');
      // An operator's write (no owner named) needs no membership.
      assert.equal(await store.deleteRole('acct_a', 12, []), true);
    });

    await t.test('listRoles: id order, paged with the total, filtered by a case-insensitive name part; getRole', async (st) => {
      const store = await fresh(st);
      const first = await store.listRoles('acct_a', { offset: 0, limit: 2 });
      assert.deepEqual(first.items.map((r) => r.id), [1, 2]);
      assert.equal(first.total, 5);
      assert.deepEqual(first.items[0], { id: 1, slug: 'r1', name: 'Odd Role 1', description: 'role 1', public: true });
      assert.deepEqual((await store.listRoles('acct_a', { offset: 4, limit: 2 })).items.map((r) => r.id), [5]);
      assert.deepEqual(await store.listRoles('acct_a', { offset: 10, limit: 2 }), { items: [], total: 5 });
      const odd = await store.listRoles('acct_a', { offset: 0, limit: 10, nameContains: 'odd ROLE' });
      assert.deepEqual(odd.items.map((r) => r.id), [1, 3, 5]);
      assert.equal(odd.total, 3);
      assert.deepEqual(await store.listRoles('acct_none', { offset: 0, limit: 10 }), { items: [], total: 0 });
      assert.deepEqual(await store.getRole('acct_a', 3), { id: 3, slug: 'r3', name: 'Odd Role 3', description: 'role 3', public: false });
      assert.equal(await store.getRole('acct_b', 3), undefined);
      assert.equal(await store.getRole('acct_a', 99), undefined);
    });

    await t.test('putRole creates a role with a free id and slug, with its events', async (st) => {
      const store = await fresh(st);
      const role = { id: 10, slug: 'new', name: 'New', description: 'd', public: true };
      assert.equal(await store.putRole('acct_a', role, undefined, [auditEvent(T0, 'role.create', '10')]), 'ok');
      assert.deepEqual(await store.getRole('acct_a', 10), role);
      assert.deepEqual((await store.listRoles('acct_a', { offset: 0, limit: 10 })).items.map((r) => r.id), [1, 2, 3, 4, 5, 10]);
      assert.deepEqual(await actions(store, 'acct_a'), ['role.create', 'old.two', 'old.one']);
      // Slugs are unique per account only.
      assert.equal(await store.putRole('acct_b', { ...role, slug: 'r1' }, undefined, []), 'ok');
    });

    await t.test('putRole refuses a taken id, a taken slug and an unknown account, storing nothing', async (st) => {
      const store = await fresh(st);
      assert.equal(await store.putRole('acct_a', { id: 2, slug: 'fresh', name: 'x', description: '', public: false }, undefined, [auditEvent(T0, 'role.create')]), 'id_taken');
      assert.equal(await store.putRole('acct_a', { id: 11, slug: 'r2', name: 'x', description: '', public: false }, undefined, [auditEvent(T0, 'role.create')]), 'slug_taken');
      assert.equal(await store.putRole('acct_none', { id: 11, slug: 'x', name: 'x', description: '', public: false }, undefined, []), 'not_found');
      assert.equal((await store.getRole('acct_a', 2))?.slug, 'r2');
      assert.equal(await store.getRole('acct_a', 11), undefined);
      assert.deepEqual(await actions(store, 'acct_a'), ['old.two', 'old.one']);
    });

    await t.test('putRole replaces a role in place, keeping or changing its slug', async (st) => {
      const store = await fresh(st);
      assert.equal(await store.putRole('acct_a', { id: 2, slug: 'r2', name: 'Renamed', description: 'x', public: true }, 2, [auditEvent(T0, 'role.update')]), 'ok');
      assert.deepEqual(await store.getRole('acct_a', 2), { id: 2, slug: 'r2', name: 'Renamed', description: 'x', public: true });
      assert.equal(await store.putRole('acct_a', { id: 2, slug: 'two', name: 'Renamed', description: 'x', public: true }, 2, []), 'ok');
      assert.equal((await store.getRole('acct_a', 2))?.slug, 'two');
      // The old slug is free again.
      assert.equal(await store.putRole('acct_a', { id: 12, slug: 'r2', name: 'n', description: '', public: false }, undefined, []), 'ok');
      assert.deepEqual(await actions(store, 'acct_a'), ['role.update', 'old.two', 'old.one']);
    });

    await t.test('putRole moves a role to a free id; onto a taken id or slug it is refused; an unknown one is not_found', async (st) => {
      const store = await fresh(st);
      assert.equal(await store.putRole('acct_a', { id: 20, slug: 'r2', name: 'Moved', description: '', public: false }, 2, []), 'ok');
      assert.equal(await store.getRole('acct_a', 2), undefined);
      assert.equal((await store.getRole('acct_a', 20))?.name, 'Moved');
      assert.deepEqual((await store.listRoles('acct_a', { offset: 0, limit: 10 })).items.map((r) => r.id), [1, 3, 4, 5, 20]);

      assert.equal(await store.putRole('acct_a', { id: 3, slug: 'r2', name: 'x', description: '', public: false }, 20, []), 'id_taken');
      assert.equal(await store.putRole('acct_a', { id: 21, slug: 'r3', name: 'x', description: '', public: false }, 20, []), 'slug_taken');
      assert.equal((await store.getRole('acct_a', 20))?.name, 'Moved');
      assert.equal((await store.getRole('acct_a', 3))?.name, 'Odd Role 3');
      assert.equal(await store.getRole('acct_a', 21), undefined);

      assert.equal(await store.putRole('acct_a', { id: 30, slug: 'r30', name: 'x', description: '', public: false }, 2, []), 'not_found');
      assert.equal(await store.getRole('acct_a', 30), undefined);
      assert.equal(await store.putRole('acct_none', { id: 30, slug: 'r30', name: 'x', description: '', public: false }, 2, []), 'not_found');
    });

    await t.test('deleteRole removes a role with its events; a second time, or in another account, it is false', async (st) => {
      const store = await fresh(st);
      assert.equal(await store.deleteRole('acct_a', 3, [auditEvent(T0, 'role.delete')]), true);
      assert.equal(await store.getRole('acct_a', 3), undefined);
      assert.equal((await store.listRoles('acct_a', { offset: 0, limit: 10 })).total, 4);
      assert.equal(await store.deleteRole('acct_a', 3, [auditEvent(T0 + 1, 'role.delete')]), false);
      assert.equal(await store.deleteRole('acct_b', 1, []), false);
      assert.equal(await store.deleteRole('acct_none', 1, []), false);
      assert.equal((await store.getRole('acct_a', 1))?.id, 1);
      assert.deepEqual(await actions(store, 'acct_a'), ['role.delete', 'old.two', 'old.one']);
      // The deleted role's slug is free again.
      assert.equal(await store.putRole('acct_a', { id: 33, slug: 'r3', name: 'n', description: '', public: false }, undefined, []), 'ok');
    });

    await t.test('getSignRecord finds a record by lowercase address, times as epoch ms', async (st) => {
      const store = await fresh(st);
      assert.deepEqual(await store.getSignRecord('acct_a', ADDRESS), {
        address: ADDRESS,
        signedNonce: 42,
        signedAt: Date.UTC(2026, 2, 1, 12),
        signedExpiredAt: Date.UTC(2026, 2, 31, 10),
      });
      assert.equal(await store.getSignRecord('acct_b', ADDRESS), undefined);
      assert.equal(await store.getSignRecord('acct_a', OTHER_ADDRESS), undefined);
      assert.equal(await store.getSignRecord('acct_none', ADDRESS), undefined);
    });

    await t.test('putSignRecord creates a record for a new address; an existing address is "exists"', async (st) => {
      const store = await fresh(st);
      const record = { address: OTHER_ADDRESS, signedNonce: 1, signedAt: T0, signedExpiredAt: T0 + 86_400_000 };
      assert.equal(await store.putSignRecord('acct_a', record, 'create', [auditEvent(T0, 'sign.create')]), 'ok');
      assert.deepEqual(await store.getSignRecord('acct_a', OTHER_ADDRESS), record);
      assert.equal(await store.putSignRecord('acct_a', { ...record, signedNonce: 2 }, 'create', [auditEvent(T0 + 1, 'sign.create')]), 'exists');
      // The fixture's record was written in mixed case: the lowercase address is the same one.
      assert.equal(await store.putSignRecord('acct_a', { ...record, address: ADDRESS }, 'create', []), 'exists');
      assert.equal((await store.getSignRecord('acct_a', OTHER_ADDRESS))?.signedNonce, 1);
      assert.equal(await store.putSignRecord('acct_none', record, 'create', []), 'not_found');
      assert.deepEqual(await actions(store, 'acct_a'), ['sign.create', 'old.two', 'old.one']);
    });

    await t.test('putSignRecord replaces an existing record; a missing one is not_found', async (st) => {
      const store = await fresh(st);
      const record = { address: ADDRESS, signedNonce: 43, signedAt: T0, signedExpiredAt: T0 + 1000 };
      assert.equal(await store.putSignRecord('acct_a', record, 'replace', [auditEvent(T0, 'sign.update')]), 'ok');
      assert.deepEqual(await store.getSignRecord('acct_a', ADDRESS), record);
      assert.equal(await store.putSignRecord('acct_a', { ...record, address: OTHER_ADDRESS }, 'replace', []), 'not_found');
      assert.equal(await store.getSignRecord('acct_a', OTHER_ADDRESS), undefined);
      assert.equal(await store.putSignRecord('acct_none', record, 'replace', []), 'not_found');
      assert.deepEqual(await actions(store, 'acct_a'), ['sign.update', 'old.two', 'old.one']);
    });

    await t.test('deleteSignRecord removes a record by lowercase address; a second time it is false', async (st) => {
      const store = await fresh(st);
      assert.equal(await store.deleteSignRecord('acct_a', ADDRESS, [auditEvent(T0, 'sign.delete')]), true);
      assert.equal(await store.getSignRecord('acct_a', ADDRESS), undefined);
      assert.equal(await store.deleteSignRecord('acct_a', ADDRESS, []), false);
      assert.equal(await store.deleteSignRecord('acct_none', ADDRESS, []), false);
      assert.deepEqual(await actions(store, 'acct_a'), ['sign.delete', 'old.two', 'old.one']);
      assert.equal(await store.putSignRecord('acct_a', { address: ADDRESS, signedNonce: 1, signedAt: T0, signedExpiredAt: T0 }, 'create', []), 'ok');
    });

    await t.test('appendAudit records events; listAudit pages newest first with `before`', async (st) => {
      const store = await fresh(st);
      await store.appendAudit('acct_a', [auditEvent(T0, 'a.one'), auditEvent(T0 + 1, 'a.two')]);
      await store.appendAudit('acct_a', [auditEvent(T0 + 2, 'a.three')]);
      const first = await store.listAudit('acct_a', { limit: 2 });
      assert.deepEqual(first.map((e) => e.action), ['a.three', 'a.two']);
      assert.deepEqual(first[0], auditEvent(T0 + 2, 'a.three'));
      const second = await store.listAudit('acct_a', { before: first[1]!.id, limit: 2 });
      assert.deepEqual(second.map((e) => e.action), ['a.one', 'old.two']);
      const last = await store.listAudit('acct_a', { before: second[1]!.id, limit: 2 });
      assert.deepEqual(last.map((e) => e.action), ['old.one']);
      assert.deepEqual(await store.listAudit('acct_a', { before: last[0]!.id, limit: 2 }), []);
      assert.deepEqual(await store.listAudit('acct_b', { limit: 10 }), []);
    });

    await t.test('appendAudit to an unknown account stores nothing and does not throw', async (st) => {
      const store = await fresh(st);
      await store.appendAudit('acct_none', [auditEvent(T0, 'lost')]);
      assert.deepEqual(await store.listAudit('acct_none', { limit: 10 }), []);
      assert.equal(await store.readAccount('acct_none'), undefined);
    });

    await t.test('audit keeps only the newest maxAuditEvents per account, whichever call adds them', async (st) => {
      const store = await fresh(st, { maxAuditEvents: 3 });
      await store.appendAudit('acct_a', [auditEvent(T0, 'c.1'), auditEvent(T0 + 1, 'c.2')]);
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, name: 'n' }, events: [auditEvent(T0 + 2, 'c.3')], result: undefined }));
      await store.putRole('acct_a', { id: 40, slug: 'r40', name: 'n', description: '', public: false }, undefined, [auditEvent(T0 + 3, 'c.4')]);
      assert.deepEqual(await actions(store, 'acct_a'), ['c.4', 'c.3', 'c.2']);
      assert.deepEqual((await store.listAudit('acct_a', { before: auditEvent(T0 + 3).id, limit: 10 })).map((e) => e.action), ['c.3', 'c.2']);
    });

    await t.test('findSettingsToken and findInvite find a record by digest in whatever account holds it', async (st) => {
      const store = await fresh(st);
      const token = await store.findSettingsToken(DIGEST('c'));
      assert.equal(token?.accountId, 'acct_a');
      assert.equal(token?.token.id, 'st_a1');
      const revoked = await store.findSettingsToken(DIGEST('d'));
      assert.equal(revoked?.accountId, 'acct_b');
      assert.equal(revoked?.token.revokedAt, '2026-10-02T00:00:00.000Z');
      assert.equal(await store.findSettingsToken(DIGEST('f')), undefined);
      const invite = await store.findInvite(DIGEST('b'));
      assert.equal(invite?.accountId, 'acct_a');
      assert.equal(invite?.invite.email, 'carol@example.com');
      assert.equal(await store.findInvite(DIGEST('c')), undefined);
    });

    await t.test('a settings token or invite added by updateAccount is found by its digest; a removed one is not', async (st) => {
      const store = await fresh(st);
      await store.updateAccount('acct_b', (doc) => ({
        doc: {
          ...doc,
          settingsTokens: [...doc.settingsTokens, { id: 'st_b2', name: 'new', digest: DIGEST('7'), start: 'gwst_wxyz', scopes: [], createdAt: '2026-11-01T00:00:00.000Z' }],
          invites: [{ id: 'inv_b1', email: 'dan@example.com', digest: DIGEST('8'), createdAt: '2026-11-01T00:00:00.000Z', expiresAt: '2026-11-04T00:00:00.000Z' }],
        },
        events: [],
        result: undefined,
      }));
      assert.equal((await store.findSettingsToken(DIGEST('7')))?.token.id, 'st_b2');
      assert.equal((await store.findInvite(DIGEST('8')))?.accountId, 'acct_b');
      await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, settingsTokens: [], invites: [] }, events: [], result: undefined }));
      assert.equal(await store.findSettingsToken(DIGEST('c')), undefined);
      assert.equal(await store.findInvite(DIGEST('b')), undefined);
    });
  });
}
