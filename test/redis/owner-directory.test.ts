/**
 * Roles and sign records through the owner API on Redis (data.keySource and directory.store
 * "redis"), with two gateway instances on one redis-server and a directory cache TTL far above
 * the waits here: a change made through one instance's owner API is served by the other's
 * /api/roles and /api/sign by the notice, a move (the reorder) too; conflicts name their field
 * and deleted objects are 404 as on the data file; the role listing's cursor pages the Redis
 * store as it pages the file.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { randomBase62 } from '../../src/domain/random.js';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { RedisOwnerStore } from '../../src/state/owners/redis.js';
import type { AccountDoc } from '../../src/state/owners/store.js';
import { rolesCall, signCall, TTL_MS, until } from '../helpers/directory.js';
import { call, postJson, sha256Hex, show, startGateway, storedDigest, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { connectedRedis, redisSettings, redisSuite, silentLog, startRedis } from '../helpers/redis.js';

const ADMIN_TOKEN = `gwadm_${randomBase62(43)}`;
const SECRET = 'sk_owner_directory_redis_secret';
const ACCOUNT: AccountDoc = {
  id: 'acct_dir_redis',
  name: 'Directory on Redis',
  enabled: true,
  createdAt: '2026-11-01T00:00:00.000Z',
  apiKeys: [{ id: 'key_dir_1', apiKey: 'ak_dir_1', secretDigest: storedDigest(SECRET), disabled: false, scopes: [] }],
  members: [],
  invites: [],
  settingsTokens: [], webhooks: [],
};
const NOTICE_DEADLINE_MS = 5000;
const ROLES = `/accounts/${ACCOUNT.id}/roles`;
const SIGNS = `/accounts/${ACCOUNT.id}/sign-records`;

function redisGateway(t: TestContext, url: string): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      redis: { url },
      data: { keySource: 'redis' },
      directory: { store: 'redis', cache: { ttlMs: TTL_MS, staleWhileRevalidateMs: 1000, negativeTtlMs: TTL_MS, maxStaleMs: 120_000 } },
      owner: { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)] },
    },
  });
}

function ownerCall(gw: { url: string }, method: string, path: string, body?: unknown): Promise<JsonResponse> {
  return call(`${gw.url}/owner/v1${path}`, {
    method,
    token: ADMIN_TOKEN,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
}

function expect(res: JsonResponse, status: number, what: string): any {
  assert.equal(res.status, status, `${what}: ${show(res)}`);
  return res.body.message;
}

test('roles and sign records written through one instance\'s owner API are served by the other\'s /api/roles and /api/sign', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const redis = await connectedRedis(redisSettings(server.url));
  t.after(() => redis.close());
  const store = new RedisOwnerStore(redis, { records: createRecordReader('UTC'), log: silentLog, maxAuditEvents: 100 });
  assert.equal(await store.createAccount(ACCOUNT, []), true);
  const [a, b] = [await redisGateway(t, server.url), await redisGateway(t, server.url)];
  const tokens = new Map<TestGateway, string>();
  for (const gw of [a!, b!]) {
    const res = await postJson(`${gw.url}/api/signin`, { apiKey: 'ak_dir_1', apiSecret: sha256Hex(SECRET) });
    tokens.set(gw, expect(res, 200, 'sign-in').accessToken);
  }
  const rolesOn = async (gw: TestGateway) => expect(await rolesCall(gw, tokens.get(gw)!, 'limit=100'), 200, '/api/roles').items;
  // Cached on both before any change: only a notice can make them show one within the deadline.
  assert.deepEqual(await rolesOn(a!), []);
  assert.deepEqual(await rolesOn(b!), []);

  const role = { id: 20, slug: 'reviewer', name: 'Reviewer', description: 'Reviews.', public: true };
  await t.test('a role created on A is served by B', async () => {
    assert.deepEqual(expect(await ownerCall(a!, 'POST', ROLES, role), 201, 'create'), role);
    await until('B serves the role', async () => (await rolesOn(b!)).length === 1, NOTICE_DEADLINE_MS);
    assert.deepEqual(await rolesOn(b!), [{ ...role, public: 1 }]);
    assert.deepEqual(expect(await ownerCall(b!, 'GET', `${ROLES}/20`), 200, 'read on B'), role);
  });

  await t.test('moved on B (the reorder), served so by A; the old id is gone', async () => {
    await ownerCall(a!, 'POST', ROLES, { ...role, id: 10, slug: 'first' });
    await until('A serves both roles', async () => (await rolesOn(a!)).length === 2, NOTICE_DEADLINE_MS);
    expect(await ownerCall(b!, 'PUT', `${ROLES}/20`, { ...role, id: 5 }), 200, 'move');
    await until('A serves the moved role first', async () => (await rolesOn(a!))[0]?.id === 5, NOTICE_DEADLINE_MS);
    assert.deepEqual((await rolesOn(a!)).map((r: { id: number }) => r.id), [5, 10]);
    expect(await ownerCall(a!, 'GET', `${ROLES}/20`), 404, 'the old id');
  });

  await t.test('conflicts name their field; a deleted role is 404 to every change', async () => {
    assert.equal(expect(await ownerCall(a!, 'POST', ROLES, { ...role, id: 10, slug: 'other' }), 409, 'taken id').field, 'id');
    assert.equal(expect(await ownerCall(a!, 'POST', ROLES, { ...role, id: 11, slug: 'first' }), 409, 'taken slug').field, 'slug');
    assert.equal(expect(await ownerCall(b!, 'PUT', `${ROLES}/5`, { ...role, id: 10 }), 409, 'moved onto a taken id').field, 'id');
    expect(await ownerCall(b!, 'DELETE', `${ROLES}/10`), 200, 'delete');
    expect(await ownerCall(a!, 'PUT', `${ROLES}/10`, { ...role, id: 10, slug: 'first' }), 404, 'replace the deleted role');
    expect(await ownerCall(a!, 'DELETE', `${ROLES}/10`), 404, 'delete it again');
    await until('A no longer serves it', async () => (await rolesOn(a!)).length === 1, NOTICE_DEADLINE_MS);
  });

  await t.test('the cursor pages the Redis store in id order', async () => {
    for (const id of [1, 2, 3, 4, 6, 7]) expect(await ownerCall(a!, 'POST', ROLES, { ...role, id, slug: `r${id}` }), 201, `role ${id}`);
    const ids: number[] = [];
    let cursor: string | undefined;
    do {
      const page = expect(await ownerCall(b!, 'GET', `${ROLES}?limit=2${cursor === undefined ? '' : `&cursor=${cursor}`}`), 200, 'page');
      ids.push(...page.items.map((r: { id: number }) => r.id));
      cursor = page.nextCursor;
      if (ids.length === 2) expect(await ownerCall(a!, 'DELETE', `${ROLES}/1`), 200, 'a role before the cursor goes');
    } while (cursor !== undefined);
    assert.deepEqual(ids, [1, 2, 3, 4, 5, 6, 7]);
  });

  const address = `0x${'5a'.repeat(20)}`;
  const times = { signedNonce: 4, signedAt: '2026-05-01T00:00:00Z', signedExpiredAt: '2027-05-01T00:00:00Z' };
  await t.test('a sign record created on A is answered by B\'s /api/sign; replaced and deleted on B, so on A', async () => {
    const signOn = (gw: TestGateway) => signCall(gw, tokens.get(gw)!, address);
    assert.equal((await signOn(b!)).status, 404, 'cached as missing on B');
    expect(await ownerCall(a!, 'POST', SIGNS, { address, ...times }), 201, 'create');
    await until('B answers the record', async () => (await signOn(b!)).status === 200, NOTICE_DEADLINE_MS);
    assert.equal((await signOn(b!)).body.message.signedNonce, 4);
    assert.equal(expect(await ownerCall(b!, 'POST', SIGNS, { address: address.toUpperCase().replace('0X', '0x'), ...times }), 409, 'again').field, 'address');
    expect(await ownerCall(b!, 'PUT', `${SIGNS}/${address}`, { ...times, signedNonce: 5 }), 200, 'replace');
    await until('A answers the new nonce', async () => (await signOn(a!)).body?.message?.signedNonce === 5, NOTICE_DEADLINE_MS);
    expect(await ownerCall(b!, 'DELETE', `${SIGNS}/${address}`), 200, 'delete');
    expect(await ownerCall(a!, 'PUT', `${SIGNS}/${address}`, times), 404, 'replace the deleted record');
    await until('A no longer answers it', async () => (await signOn(a!)).status === 404, NOTICE_DEADLINE_MS);
  });

  await t.test('every change is in the account\'s audit trail in Redis', async () => {
    const actions = (await store.listAudit(ACCOUNT.id, { limit: 100 })).map((e) => e.action);
    assert.equal(actions.filter((x) => x === 'role.create').length, 8);
    assert.equal(actions.filter((x) => x === 'role.update').length, 1);
    assert.equal(actions.filter((x) => x === 'role.delete').length, 2);
    assert.deepEqual(actions.filter((x) => x.startsWith('sign_record.')).reverse(), ['sign_record.create', 'sign_record.update', 'sign_record.delete']);
  });
});
