/**
 * createSettingsTokenAuth (src/auth/settings-tokens.ts) over a real MemoryOwnerStore wrapped
 * to count its calls: a bad checksum and a cached token cost no store call, an unknown one is
 * remembered briefly, and revoked, expired, reset and disabled-account tokens are refused.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRevocations } from '../../src/auth/revocation.js';
import { createSettingsTokenAuth } from '../../src/auth/settings-tokens.js';
import { mintSettingsToken, settingsTokenDigest, settingsTokenStart } from '../../src/domain/settings-token.js';
import { GatewayError } from '../../src/errors/errors.js';
import { dataFileSchema } from '../../src/state/data-file/data-file.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import type { OwnerStore } from '../../src/state/owners/store.js';
import { MemoryRevocationStore } from '../../src/state/revocation/memory.js';
import { createLogger } from '../../src/telemetry/log.js';
import { ManualClock } from '../helpers/clock.js';

const CACHE_TTL_MS = 60_000;
const ACCESS_TTL_S = 900;

function setUp({ expiresAt, revokedAt }: { expiresAt?: string; revokedAt?: string } = {}) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const token = mintSettingsToken();
  const createdAt = new Date(clock.now() - 1000).toISOString();
  const record = {
    id: 'stk_1', name: 'ci', digest: settingsTokenDigest(token), start: settingsTokenStart(token), scopes: ['read'], createdAt,
    ...(expiresAt === undefined ? {} : { expiresAt }), ...(revokedAt === undefined ? {} : { revokedAt }),
  };
  const memory = new MemoryOwnerStore(dataFileSchema.parse({ accounts: [{ id: 'acct_1', settingsTokens: [record] }] }), { maxAuditEvents: 100 });
  const calls = { findSettingsToken: 0, readAccount: 0, updateAccount: 0 };
  const store: Pick<OwnerStore, 'findSettingsToken' | 'readAccount' | 'updateAccount' | 'readOnly'> = {
    readOnly: undefined,
    findSettingsToken: (digest) => { calls.findSettingsToken++; return memory.findSettingsToken(digest); },
    readAccount: (id) => { calls.readAccount++; return memory.readAccount(id); },
    updateAccount: (id, change) => { calls.updateAccount++; return memory.updateAccount(id, change); },
  };
  const revocations = createRevocations({ store: new MemoryRevocationStore({ clock, retainMs: 86_400_000 }), clock, ttlMs: 1000, rememberMs: ACCESS_TTL_S * 1000 });
  const authenticate = createSettingsTokenAuth({
    store, revocations, clock, log: createLogger('silent'), cacheTtlMs: CACHE_TTL_MS, accessTokenTtlSeconds: ACCESS_TTL_S,
  });
  const storeCalls = () => calls.findSettingsToken + calls.readAccount;
  return { clock, token, memory, calls, storeCalls, revocations, authenticate };
}

const invalidToken = (err: unknown) => err instanceof GatewayError && err.status === 401 && err.code === 'invalid_token';

test('a good token: its identity, read once, then served from the cache with no store call', async () => {
  const { clock, token, storeCalls, authenticate } = setUp();
  const identity = await authenticate(token);
  assert.deepEqual(identity, {
    accountId: 'acct_1', keyId: 'stk_1', tokenId: 'stk_1',
    issuedAt: Math.floor((clock.now() - 1000) / 1000), issuedAtMs: clock.now() - 1000,
    expiresAt: Math.floor(clock.now() / 1000) + ACCESS_TTL_S, scopes: ['read'], durable: true,
  });
  const afterFirst = storeCalls();
  assert.equal(afterFirst, 2, 'a miss reads the token and its account');
  for (let i = 0; i < 20; i++) await authenticate(token);
  clock.advance(CACHE_TTL_MS - 1);
  await authenticate(token);
  assert.equal(storeCalls(), afterFirst, 'cache hits cost no store call');
  clock.advance(2);
  await authenticate(token);
  assert.equal(storeCalls(), afterFirst + 2, 'read again once the cached copy expired');
  const together = await Promise.all(Array.from({ length: 10 }, () => authenticate(token)));
  assert.equal(together.length, 10);
});

test('a bad checksum is refused with no store call; an unknown token is remembered for a few seconds', async () => {
  const { clock, token, storeCalls, authenticate } = setUp();
  const last = token.at(-1) === 'a' ? 'b' : 'a';
  for (const bad of [`${token.slice(0, -1)}${last}`, 'gwst_short', `gwst_${'x'.repeat(49)}`]) {
    await assert.rejects(authenticate(bad), invalidToken, bad);
  }
  assert.equal(storeCalls(), 0, 'no store call for a token that fails its checksum');
  const unknown = mintSettingsToken();
  await assert.rejects(authenticate(unknown), invalidToken);
  assert.equal(storeCalls(), 1, 'an unknown token costs one read');
  await assert.rejects(authenticate(unknown), invalidToken);
  assert.equal(storeCalls(), 1, 'and is then remembered as unknown');
  clock.advance(5_001);
  await assert.rejects(authenticate(unknown), invalidToken);
  assert.equal(storeCalls(), 2, 'for a few seconds only');
});

test('expired, revoked, reset and disabled-account tokens are refused', async (t) => {
  await t.test('expired', async () => {
    const start = Date.UTC(2026, 0, 1);
    const { clock, token, authenticate } = setUp({ expiresAt: new Date(start + 10_000).toISOString() });
    const identity = await authenticate(token);
    assert.equal(identity.expiresAt, Math.floor((start + 10_000) / 1000), 'the identity lasts no longer than the token');
    clock.advance(10_000);
    await assert.rejects(authenticate(token), invalidToken);
  });
  await t.test('revoked (persisted)', async () => {
    const { token, authenticate } = setUp({ revokedAt: '2025-12-31T00:00:00.000Z' });
    await assert.rejects(authenticate(token), invalidToken);
  });
  await t.test('a reset of its id or of its account, while cached', async () => {
    const { clock, token, authenticate, revocations, storeCalls } = setUp();
    await authenticate(token);
    clock.advance(1);
    const calls = storeCalls();
    await revocations.reset({ accountId: 'acct_1', keyId: 'stk_1' });
    await assert.rejects(authenticate(token), invalidToken, 'refused at once, whatever the cache holds');
    assert.equal(storeCalls(), calls);
    const other = setUp();
    await other.authenticate(other.token);
    other.clock.advance(1);
    await other.revocations.reset({ accountId: 'acct_1' });
    await assert.rejects(other.authenticate(other.token), invalidToken, 'an account reset too');
  });
  await t.test('a disabled account', async () => {
    const { token, authenticate, memory } = setUp();
    await memory.updateAccount('acct_1', (doc) => ({ doc: { ...doc, enabled: false }, events: [], result: undefined }));
    await assert.rejects(authenticate(token), invalidToken);
  });
});

test('lastUsedAt is written at most once per token per 5 minutes', async () => {
  const { clock, token, calls, memory, authenticate } = setUp();
  await authenticate(token);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(calls.updateAccount, 1);
  assert.equal((await memory.readAccount('acct_1'))!.settingsTokens[0]!.lastUsedAt, new Date(clock.now()).toISOString());
  for (let i = 0; i < 50; i++) {
    clock.advance(1000);
    await authenticate(token);
  }
  assert.equal(calls.updateAccount, 1, 'no second write within 5 minutes');
  clock.advance(250_001);
  await authenticate(token);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(calls.updateAccount, 2, 'one more once 5 minutes have passed');
});

test('a lastUsedAt write that fails is not tried again by every request: still at most once per 5 minutes', async () => {
  const { clock, token, calls, memory } = setUp();
  const failing = createSettingsTokenAuth({
    store: {
      readOnly: undefined,
      findSettingsToken: (digest) => memory.findSettingsToken(digest),
      readAccount: (id) => memory.readAccount(id),
      updateAccount: () => { calls.updateAccount++; return Promise.reject(new Error('store down')); },
    },
    revocations: createRevocations({ store: new MemoryRevocationStore({ clock, retainMs: 86_400_000 }), clock, ttlMs: 1000, rememberMs: ACCESS_TTL_S * 1000 }),
    clock, log: createLogger('silent'), cacheTtlMs: CACHE_TTL_MS, accessTokenTtlSeconds: ACCESS_TTL_S,
  });
  for (let i = 0; i < 20; i++) {
    await failing(token);
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(calls.updateAccount, 1, 'a failing store gets one write, not one per request');
  clock.advance(300_001);
  await failing(token);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(calls.updateAccount, 2, 'tried again once 5 minutes have passed');
});

test('a revoked token\'s cached copy is not trusted longer than the reset is remembered: refused even while the reset store cannot be read', async () => {
  const { clock, token, memory } = setUp();
  const rememberMs = 10_000;
  const store = new MemoryRevocationStore({ clock, retainMs: 86_400_000 });
  let readable = true;
  const flaky: typeof store = Object.assign(Object.create(store) as typeof store, {
    reset: (scope: Parameters<typeof store.reset>[0], at: number) => store.reset(scope, at),
    read: (accountId: string) => (readable ? store.read(accountId) : Promise.reject(new Error('resets unreachable'))),
    epoch: () => store.epoch(),
    watch: (listener: Parameters<typeof store.watch>[0]) => store.watch(listener),
  });
  const revocations = createRevocations({ store: flaky, clock, ttlMs: 1000, rememberMs });
  const authenticate = createSettingsTokenAuth({
    store: memory, revocations, clock, log: createLogger('silent'), cacheTtlMs: CACHE_TTL_MS, accessTokenTtlSeconds: ACCESS_TTL_S, resetsRememberedMs: rememberMs,
  });
  await authenticate(token);
  clock.advance(1);
  // The revoke: written to the owner store, then announced as a reset of the token's id.
  await memory.updateAccount('acct_1', (doc) => ({ doc: { ...doc, settingsTokens: doc.settingsTokens.map((t) => ({ ...t, revokedAt: new Date(clock.now()).toISOString() })) }, events: [], result: undefined }));
  await revocations.reset({ accountId: 'acct_1', keyId: 'stk_1' });
  await assert.rejects(authenticate(token), invalidToken);
  clock.advance(rememberMs + 1);
  readable = false;
  await assert.rejects(authenticate(token), invalidToken, 'the reset is forgotten and unreadable: the token\'s own record decides');
});

test('owner.settingsTokenCacheTtlMs 0 caches nothing (lru-cache reads a ttl of 0 as "for ever")', async () => {
  const { clock, token, memory } = setUp();
  let reads = 0;
  const authenticate = createSettingsTokenAuth({
    store: { ...memory, readOnly: undefined, findSettingsToken: (digest) => { reads++; return memory.findSettingsToken(digest); }, readAccount: (id) => memory.readAccount(id), updateAccount: (id, change) => memory.updateAccount(id, change) },
    revocations: createRevocations({ store: new MemoryRevocationStore({ clock, retainMs: 86_400_000 }), clock, ttlMs: 1000, rememberMs: ACCESS_TTL_S * 1000 }),
    clock, log: createLogger('silent'), cacheTtlMs: 0, accessTokenTtlSeconds: ACCESS_TTL_S,
  });
  await authenticate(token);
  clock.advance(2);
  await authenticate(token);
  assert.equal(reads, 2, 'each check reads the token');
  await memory.updateAccount('acct_1', (doc) => ({ doc: { ...doc, settingsTokens: doc.settingsTokens.map((t) => ({ ...t, revokedAt: new Date(clock.now()).toISOString() })) }, events: [], result: undefined }));
  clock.advance(2);
  await assert.rejects(authenticate(token), invalidToken, 'a revoke written to the store is seen at once');
});
