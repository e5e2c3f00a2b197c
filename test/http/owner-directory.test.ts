/**
 * Roles and sign records through the owner API (src/owner/directory.ts), on a real gateway with
 * the demo data file: what is written is what /api/roles and /api/sign serve right after, a
 * role moves under another id (the reorder), conflicts name their field, deleted objects are
 * 404 to every change, and a store the gateway only reads (directory.store=http) refuses
 * every call with 409 read_only_store and never reaches the upstream.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { randomBase62 } from '../../src/domain/random.js';
import type { GatewayError } from '../../src/errors/errors.js';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { ACCOUNT, ALICE_CAPS, ALICE_ROLES, DEMO_FILE, DEMO_ROLES, UNKNOWN } from '../helpers/directory.js';
import { tempDir } from '../helpers/process.js';
import { call, DEMO, logged, show, signIn, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';

const ADMIN_TOKEN = `gwadm_${randomBase62(43)}`;
const ROLES = `/accounts/${ACCOUNT}/roles`;
const SIGNS = `/accounts/${ACCOUNT}/sign-records`;

function startOwnerGateway(t: TestContext, overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  return startGateway(t, { overrides: { owner: { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)] }, ...overrides } });
}

/** An operator's call to the owner API (the admin token needs no CSRF token). */
function ownerCall(gw: { url: string }, method: string, path: string, body?: unknown): Promise<JsonResponse> {
  return call(`${gw.url}/owner/v1${path}`, {
    method,
    token: ADMIN_TOKEN,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
}

function assertOk(res: JsonResponse, status: number, message: unknown, what: string): void {
  assert.equal(res.status, status, `${what}: ${show(res)}`);
  assert.deepEqual(res.body, { success: true, message }, what);
}

function assertError(res: JsonResponse, status: number, code: string, field: string | undefined, what: string): void {
  assert.equal(res.status, status, `${what}: ${show(res)}`);
  assert.equal(res.body.success, false, what);
  assert.equal(res.body.message.code, code, what);
  assert.equal(res.body.message.field, field, `${what}: field`);
}

/** Every role of acct_alice as the owner API pages them, `limit` at a time. */
async function allRoles(gw: { url: string }, limit: number): Promise<number[]> {
  const ids: number[] = [];
  let cursor: string | undefined;
  do {
    const res = await ownerCall(gw, 'GET', `${ROLES}?limit=${limit}${cursor === undefined ? '' : `&cursor=${cursor}`}`);
    assert.equal(res.status, 200, show(res));
    ids.push(...res.body.message.items.map((r: { id: number }) => r.id));
    cursor = res.body.message.nextCursor;
  } while (cursor !== undefined);
  return ids;
}

const AUDITOR = { id: 100, slug: 'night-auditor', name: 'Night auditor', description: 'Reads the night reports.', public: true };

test('roles: created, moved and deleted through the owner API, served by /api/roles right after', async (t) => {
  const gw = await startOwnerGateway(t);
  const { accessToken } = await signIn(gw, DEMO.alice);
  const listing = async (query: string) => {
    const res = await call(`${gw.url}/api/roles?${query}`, { token: accessToken });
    assert.equal(res.status, 200, show(res));
    return res.body.message;
  };
  // Read before the change, so a stale cached page would show if the change were not announced.
  assert.deepEqual((await listing('page=2')).items, ALICE_ROLES.slice(10));

  await t.test('the demo roles are listed in id order, as stored', async () => {
    const res = await ownerCall(gw, 'GET', `${ROLES}?limit=100`);
    assertOk(res, 200, { items: DEMO_ROLES }, 'list');
  });

  await t.test('a created role is answered 201 and served by /api/roles in its numeric shape', async () => {
    assertOk(await ownerCall(gw, 'POST', ROLES, AUDITOR), 201, AUDITOR, 'create');
    assertOk(await ownerCall(gw, 'GET', `${ROLES}/100`), 200, AUDITOR, 'get');
    const page = await listing('page=2');
    assert.equal(page.total, 13);
    assert.deepEqual(page.items, [...ALICE_ROLES.slice(10), { ...AUDITOR, public: 1 }]);
  });

  await t.test('the description may be left out (empty), and the name filter finds by substring', async () => {
    const { description: _, ...bare } = { ...AUDITOR, id: 101, slug: 'bare', name: 'Bare AUDITOR' };
    assertOk(await ownerCall(gw, 'POST', ROLES, bare), 201, { ...bare, description: '' }, 'create without description');
    const res = await ownerCall(gw, 'GET', `${ROLES}?name=auditor`);
    assert.deepEqual(res.body.message.items.map((r: { id: number }) => r.id), [DEMO_ROLES.find((r) => r.slug === 'auditor')!.id, 100, 101], show(res));
    assertOk(await ownerCall(gw, 'DELETE', `${ROLES}/101`), 200, { id: 101, deleted: true }, 'delete');
  });

  await t.test('PUT under another id moves the role: the reorder', async () => {
    const moved = { ...AUDITOR, id: 0, name: 'First auditor' };
    assertOk(await ownerCall(gw, 'PUT', `${ROLES}/100`, moved), 200, moved, 'move');
    assertError(await ownerCall(gw, 'GET', `${ROLES}/100`), 404, 'not_found', undefined, 'the old id');
    assertOk(await ownerCall(gw, 'GET', `${ROLES}/0`), 200, moved, 'the new id');
    const first = await listing('page=1&limit=2');
    assert.deepEqual(first.items, [{ ...moved, public: 1 }, ALICE_ROLES[0]]);
    assert.equal(first.total, 13);
  });

  await t.test('a taken id or slug is a 409 naming the field, and changes nothing', async () => {
    assertError(await ownerCall(gw, 'POST', ROLES, { ...AUDITOR, id: 1, slug: 'fresh' }), 409, 'conflict', 'id', 'create on a taken id');
    assertError(await ownerCall(gw, 'POST', ROLES, { ...AUDITOR, id: 200, slug: 'admin' }), 409, 'conflict', 'slug', 'create with a taken slug');
    assertError(await ownerCall(gw, 'PUT', `${ROLES}/0`, { ...AUDITOR, id: 2 }), 409, 'conflict', 'id', 'move onto a taken id');
    assertError(await ownerCall(gw, 'PUT', `${ROLES}/0`, { ...AUDITOR, id: 0, slug: 'viewer' }), 409, 'conflict', 'slug', 'take another role\'s slug');
    // Its own slug and id are no conflict with itself.
    assertOk(await ownerCall(gw, 'PUT', `${ROLES}/0`, { ...AUDITOR, id: 0 }), 200, { ...AUDITOR, id: 0 }, 'replace in place');
    assert.deepEqual(await allRoles(gw, 100), [0, ...ALICE_ROLES.map((r) => r.id)]);
  });

  await t.test('a deleted role is 404 to every call, and gone from /api/roles', async () => {
    assertOk(await ownerCall(gw, 'DELETE', `${ROLES}/0`), 200, { id: 0, deleted: true }, 'delete');
    assertError(await ownerCall(gw, 'GET', `${ROLES}/0`), 404, 'not_found', undefined, 'get');
    assertError(await ownerCall(gw, 'PUT', `${ROLES}/0`, AUDITOR), 404, 'not_found', undefined, 'put');
    assertError(await ownerCall(gw, 'DELETE', `${ROLES}/0`), 404, 'not_found', undefined, 'delete again');
    assert.deepEqual((await listing('page=1&limit=100')).items, ALICE_ROLES);
  });

  await t.test('every change is an audit line naming the operator, the action and the role', async () => {
    const lines = logged(gw, 'audit').map((l) => l.audit as { accountId: string; action: string; target: unknown; actor: unknown; changes?: Record<string, unknown> });
    assert.deepEqual(lines.map((l) => l.action), ['role.create', 'role.create', 'role.delete', 'role.update', 'role.update', 'role.delete']);
    assert.ok(lines.every((l) => l.accountId === ACCOUNT && (l.actor as { type: string }).type === 'operator'));
    assert.deepEqual(lines[3]!.target, { type: 'role', id: '100' });
    assert.deepEqual(lines[3]!.changes, { id: [100, 0], name: ['Night auditor', 'First auditor'] });
  });
});

test('roles: the cursor pages in id order and neither repeats nor skips a role when roles change in between', async (t) => {
  const gw = await startOwnerGateway(t);
  const ids = ALICE_ROLES.map((r) => r.id);
  assert.deepEqual(await allRoles(gw, 5), ids);
  assert.deepEqual(await allRoles(gw, 1), ids);

  const first = await ownerCall(gw, 'GET', `${ROLES}?limit=5`);
  const page1 = first.body.message.items.map((r: { id: number }) => r.id);
  assert.deepEqual(page1, ids.slice(0, 5));
  // Before the cursor: two roles go and one comes in front, so its offset is off by one; after it, one comes.
  await ownerCall(gw, 'DELETE', `${ROLES}/2`);
  await ownerCall(gw, 'DELETE', `${ROLES}/3`);
  assertOk(await ownerCall(gw, 'POST', ROLES, { ...AUDITOR, id: 0, slug: 'zero' }), 201, { ...AUDITOR, id: 0, slug: 'zero' }, 'create 0');
  await ownerCall(gw, 'POST', ROLES, { ...AUDITOR, id: 6_000, slug: 'late' });
  const rest: number[] = [];
  let cursor: string | undefined = first.body.message.nextCursor;
  while (cursor !== undefined) {
    const res = await ownerCall(gw, 'GET', `${ROLES}?limit=5&cursor=${cursor}`);
    assert.equal(res.status, 200, show(res));
    rest.push(...res.body.message.items.map((r: { id: number }) => r.id));
    cursor = res.body.message.nextCursor;
  }
  assert.deepEqual(rest, [...ids.slice(5), 6_000]);

  await t.test('a cursor that is not one the listing gave is a 400 naming it', async () => {
    for (const bad of ['nope', 'MS4', Buffer.from('1.x').toString('base64url'), Buffer.from('01.2').toString('base64url'), '%2F%2F', 'a'.repeat(65)]) {
      assertError(await ownerCall(gw, 'GET', `${ROLES}?cursor=${bad}`), 400, 'invalid_request', 'cursor', `cursor ${bad}`);
    }
  });

  await t.test('limit and name are checked', async () => {
    for (const bad of ['0', '101', '-1', '1.5', 'ten', '']) {
      assertError(await ownerCall(gw, 'GET', `${ROLES}?limit=${bad}`), 400, 'invalid_request', 'limit', `limit=${bad}`);
    }
    assertError(await ownerCall(gw, 'GET', `${ROLES}?limit=1&limit=2`), 400, 'invalid_request', 'limit', 'a repeated limit');
    assertError(await ownerCall(gw, 'GET', `${ROLES}?name=${'a'.repeat(101)}`), 400, 'invalid_request', 'name', 'a long name');
    assertError(await ownerCall(gw, 'GET', `${ROLES}?page=2`), 400, 'invalid_request', 'page', 'an unknown parameter');
  });
});

test('roles: bad input is a 400 naming the field, and nothing is written', async (t) => {
  const gw = await startOwnerGateway(t);
  const cases: [string, Record<string, unknown>, string][] = [
    ['a negative id', { ...AUDITOR, id: -1 }, 'id'],
    ['a fractional id', { ...AUDITOR, id: 1.5 }, 'id'],
    ['an id past 2^53 - 1', { ...AUDITOR, id: Number.MAX_SAFE_INTEGER + 1 }, 'id'],
    ['an id as text', { ...AUDITOR, id: '100' }, 'id'],
    ['an empty slug', { ...AUDITOR, slug: '' }, 'slug'],
    ['a slug with a capital', { ...AUDITOR, slug: 'Auditor' }, 'slug'],
    ['a slug with a space', { ...AUDITOR, slug: 'night auditor' }, 'slug'],
    ['a slug starting with a dash', { ...AUDITOR, slug: '-auditor' }, 'slug'],
    ['a slug of 257 characters', { ...AUDITOR, slug: 'a'.repeat(257) }, 'slug'],
    ['an empty name', { ...AUDITOR, name: '' }, 'name'],
    ['a name of 257 characters', { ...AUDITOR, name: 'n'.repeat(257) }, 'name'],
    ['a description of 4097 characters', { ...AUDITOR, description: 'd'.repeat(4097) }, 'description'],
    ['public as 1', { ...AUDITOR, public: 1 }, 'public'],
    ['public as "true"', { ...AUDITOR, public: 'true' }, 'public'],
    ['public left out', { id: 100, slug: 'x', name: 'x' }, 'public'],
    ['an unknown field', { ...AUDITOR, color: 'red' }, 'color'],
  ];
  for (const [what, body, field] of cases) {
    assertError(await ownerCall(gw, 'POST', ROLES, body), 400, 'invalid_request', field, `create: ${what}`);
    assertError(await ownerCall(gw, 'PUT', `${ROLES}/1`, body), 400, 'invalid_request', field, `replace: ${what}`);
  }
  // The longest of everything is fine.
  const longest = { id: Number.MAX_SAFE_INTEGER, slug: `a${'b'.repeat(255)}`, name: 'n'.repeat(256), description: 'd'.repeat(4096), public: false };
  assertOk(await ownerCall(gw, 'POST', ROLES, longest), 201, longest, 'the longest role');
  for (const bad of ['-1', '01', '1e3', 'x', String(Number.MAX_SAFE_INTEGER + 1)]) {
    assertError(await ownerCall(gw, 'GET', `${ROLES}/${bad}`), 400, 'invalid_request', 'roleId', `role id ${bad} in the path`);
  }
  assert.deepEqual(await allRoles(gw, 100), [...ALICE_ROLES.map((r) => r.id), Number.MAX_SAFE_INTEGER]);
  assert.deepEqual(logged(gw, 'audit').map((l) => (l.audit as { action: string }).action), ['role.create']);
});

const RECORD = {
  address: '0xAbCdEf0123456789aBcDeF0123456789AbCdEf01',
  signedNonce: 9,
  signedAt: '2026-06-01T10:00:00+02:00',
  signedExpiredAt: '2027-06-01T08:00:00.000Z',
};
const STORED = {
  address: RECORD.address.toLowerCase(),
  signedNonce: 9,
  signedAt: '2026-06-01T08:00:00.000Z',
  signedExpiredAt: '2027-06-01T08:00:00.000Z',
};

test('sign records: created, replaced and deleted through the owner API, answered by /api/sign right after', async (t) => {
  const gw = await startOwnerGateway(t);
  const { accessToken } = await signIn(gw, DEMO.alice);
  const sign = (address: string) => call(`${gw.url}/api/sign?address=${address}`, { token: accessToken });
  const asServed = (r: typeof STORED, did: string) => ({
    did,
    signedNonce: r.signedNonce,
    signedAt: gw.services.formatTimestamp(Date.parse(r.signedAt)),
    signedExpiredAt: gw.services.formatTimestamp(Date.parse(r.signedExpiredAt)),
  });
  // Asked before it exists, so a cached "no record" would show if the change were not announced.
  assert.equal((await sign(RECORD.address)).status, 404);

  await t.test('created: lowercase, ISO times in UTC, and served by /api/sign', async () => {
    assertOk(await ownerCall(gw, 'POST', SIGNS, RECORD), 201, STORED, 'create');
    assertOk(await sign(RECORD.address), 200, asServed(STORED, RECORD.address), '/api/sign');
  });

  await t.test('looked up in either case', async () => {
    assertOk(await ownerCall(gw, 'GET', `${SIGNS}/${RECORD.address}`), 200, STORED, 'mixed case');
    assertOk(await ownerCall(gw, 'GET', `${SIGNS}/${RECORD.address.toUpperCase().replace('0X', '0x')}`), 200, STORED, 'upper case');
  });

  await t.test('a second record for the address, in any case, is a 409 naming the address', async () => {
    assertError(await ownerCall(gw, 'POST', SIGNS, RECORD), 409, 'conflict', 'address', 'same spelling');
    assertError(await ownerCall(gw, 'POST', SIGNS, { ...RECORD, address: STORED.address, signedNonce: 1 }), 409, 'conflict', 'address', 'lowercase');
    assertOk(await ownerCall(gw, 'GET', `${SIGNS}/${STORED.address}`), 200, STORED, 'unchanged');
  });

  const replaced = { signedNonce: 10, signedAt: '2026-07-01T00:00:00Z', signedExpiredAt: '2026-07-02T00:00:00Z' };
  const replacedView = { address: STORED.address, signedNonce: 10, signedAt: '2026-07-01T00:00:00.000Z', signedExpiredAt: '2026-07-02T00:00:00.000Z' };

  await t.test('replaced: the new nonce and times are served', async () => {
    assertOk(await ownerCall(gw, 'PUT', `${SIGNS}/${RECORD.address}`, replaced), 200, replacedView, 'replace');
    assertOk(await sign(STORED.address), 200, asServed(replacedView, STORED.address), '/api/sign');
  });

  await t.test('an address without a record is 404 to a replacement', async () => {
    assertError(await ownerCall(gw, 'PUT', `${SIGNS}/0x${'0'.repeat(40)}`, replaced), 404, 'not_found', undefined, 'replace');
  });

  await t.test('deleted: 404 to every call, and to /api/sign', async () => {
    assertOk(await ownerCall(gw, 'DELETE', `${SIGNS}/${RECORD.address}`), 200, { address: STORED.address, deleted: true }, 'delete');
    assertError(await ownerCall(gw, 'GET', `${SIGNS}/${STORED.address}`), 404, 'not_found', undefined, 'get');
    assertError(await ownerCall(gw, 'PUT', `${SIGNS}/${STORED.address}`, replaced), 404, 'not_found', undefined, 'put');
    assertError(await ownerCall(gw, 'DELETE', `${SIGNS}/${STORED.address}`), 404, 'not_found', undefined, 'delete again');
    const res = await sign(STORED.address);
    assert.equal(res.status, 404, show(res));
    assert.equal(res.body.message.code, 'sign_record_not_found');
  });

  await t.test('every change is an audit line, times as ISO text', async () => {
    const lines = logged(gw, 'audit').map((l) => l.audit as { action: string; target: unknown; changes?: unknown });
    assert.deepEqual(lines.map((l) => l.action), ['sign_record.create', 'sign_record.update', 'sign_record.delete']);
    assert.ok(lines.every((l) => JSON.stringify(l.target) === JSON.stringify({ type: 'sign_record', id: STORED.address })));
    assert.deepEqual(lines[1]!.changes, {
      signedNonce: [9, 10],
      signedAt: [STORED.signedAt, replacedView.signedAt],
      signedExpiredAt: [STORED.signedExpiredAt, replacedView.signedExpiredAt],
    });
  });
});

test('sign records: bad input is a 400 naming the field', async (t) => {
  const gw = await startOwnerGateway(t);
  const cases: [string, Record<string, unknown>, string][] = [
    ['a short address', { ...RECORD, address: '0x1234' }, 'address'],
    ['an address without 0x', { ...RECORD, address: 'abcdef0123456789abcdef0123456789abcdef01' }, 'address'],
    ['an address with a non-hex digit', { ...RECORD, address: `0x${'g'.repeat(40)}` }, 'address'],
    ['a negative nonce', { ...RECORD, signedNonce: -1 }, 'signedNonce'],
    ['a fractional nonce', { ...RECORD, signedNonce: 0.5 }, 'signedNonce'],
    ['a nonce as text', { ...RECORD, signedNonce: '9' }, 'signedNonce'],
    ['a time without an offset', { ...RECORD, signedAt: '2026-06-01T10:00:00' }, 'signedAt'],
    ['the interface\'s own time spelling', { ...RECORD, signedAt: '2026-06-01 10:00:00' }, 'signedAt'],
    ['a day that does not exist', { ...RECORD, signedAt: '2026-02-30T10:00:00Z' }, 'signedAt'],
    ['epoch ms', { ...RECORD, signedExpiredAt: 1_800_000_000_000 }, 'signedExpiredAt'],
    ['an expiry before signing', { ...RECORD, signedExpiredAt: '2026-06-01T07:59:59Z' }, 'signedExpiredAt'],
    ['an expiry at the signing instant (other offset)', { ...RECORD, signedExpiredAt: '2026-06-01T08:00:00Z' }, 'signedExpiredAt'],
    ['an unknown field', { ...RECORD, did: RECORD.address }, 'did'],
  ];
  for (const [what, body, field] of cases) {
    assertError(await ownerCall(gw, 'POST', SIGNS, body), 400, 'invalid_request', field, `create: ${what}`);
    if (field !== 'address') {
      const { address: _, ...times } = body;
      assertError(await ownerCall(gw, 'PUT', `${SIGNS}/${RECORD.address}`, times), 400, 'invalid_request', field, `replace: ${what}`);
    }
  }
  assertError(await ownerCall(gw, 'PUT', `${SIGNS}/${RECORD.address}`, RECORD), 400, 'invalid_request', 'address', 'a replacement naming its address in the body');
  assertError(await ownerCall(gw, 'GET', `${SIGNS}/0x1234`), 400, 'invalid_request', 'address', 'a malformed address in the path');
  assert.deepEqual(logged(gw, 'audit'), []);
});

test('directory.store=http: roles and sign records are the upstream\'s, so every call is 409 read_only_store and the upstream sees none', async (t) => {
  let upstreamRequests = 0;
  const upstream = createServer((_req, res) => {
    upstreamRequests += 1;
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
  const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const gw = await startOwnerGateway(t, {
    directory: { store: 'http', http: { signUrl: `${base}/sign?account={accountId}&address={address}`, rolesUrl: `${base}/roles?account={accountId}`, token: 'service-token' } },
  });
  const calls: [string, string, unknown?][] = [
    ['GET', ROLES],
    ['POST', ROLES, AUDITOR],
    ['GET', `${ROLES}/1`],
    ['PUT', `${ROLES}/1`, AUDITOR],
    ['DELETE', `${ROLES}/1`],
    ['POST', SIGNS, RECORD],
    ['GET', `${SIGNS}/${STORED.address}`],
    ['GET', `${SIGNS}/${STORED.address}/served`],
    ['PUT', `${SIGNS}/${STORED.address}`, { signedNonce: 1, signedAt: RECORD.signedAt, signedExpiredAt: RECORD.signedExpiredAt }],
    ['DELETE', `${SIGNS}/${STORED.address}`],
  ];
  for (const [method, path, body] of calls) {
    const res = await ownerCall(gw, method, path, body);
    assertError(res, 409, 'read_only_store', undefined, `${method} ${path}`);
    assert.match(res.body.message.description, /directory upstream/, `${method} ${path}`);
  }
  assert.equal(upstreamRequests, 0);
  assert.deepEqual(logged(gw, 'audit'), []);
});

test('acct_bob\'s roles and records are not reached through acct_alice\'s paths, nor a made-up account\'s', async (t) => {
  const gw = await startOwnerGateway(t);
  const bobRole = (await ownerCall(gw, 'GET', `/accounts/${DEMO.bob.accountId}/roles`)).body.message.items[0];
  assert.ok(bobRole !== undefined && !ALICE_ROLES.some((r) => r.id === bobRole.id), 'acct_bob has a role id acct_alice has not');
  assertError(await ownerCall(gw, 'GET', `${ROLES}/${bobRole.id}`), 404, 'not_found', undefined, 'bob\'s role under alice');
  assertError(await ownerCall(gw, 'DELETE', `${ROLES}/${bobRole.id}`), 404, 'not_found', undefined, 'delete bob\'s role under alice');
  assertError(await ownerCall(gw, 'GET', '/accounts/acct_nobody/roles'), 404, 'not_found', undefined, 'a made-up account');
  assertError(await ownerCall(gw, 'POST', '/accounts/acct_nobody/roles', AUDITOR), 404, 'not_found', undefined, 'create in a made-up account');
  assertOk(await ownerCall(gw, 'GET', `/accounts/${DEMO.bob.accountId}/roles/${bobRole.id}`), 200, bobRole, 'bob\'s role is still there');
});

test('an owner reaches only the roles and records of an account they are a member of: another account is the made-up account\'s 404', async (t) => {
  const data = JSON.parse(readFileSync(DEMO_FILE, 'utf8'));
  const addedAt = '2026-01-01T00:00:00.000Z';
  data.owners = [{ id: 'owner_bob', email: 'bob@example.com', passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$x$y', createdAt: addedAt }];
  // Bob alone: the demo owners' memberships go with them.
  for (const account of data.accounts) account.members = [];
  data.accounts.find((a: { id: string }) => a.id === DEMO.bob.accountId).members = [{ ownerId: 'owner_bob', addedAt }];
  const file = join(tempDir(t), 'data.json');
  writeFileSync(file, JSON.stringify(data));
  const gw = await startOwnerGateway(t, { data: { file } });
  const directory = gw.services.owner.directory;
  const caller = { kind: 'owner' as const, ownerId: 'owner_bob', email: 'bob@example.com' };
  const bob = { caller, meta: { ip: '127.0.0.1', requestId: 'test' } };
  const times = { signedNonce: 1, signedAt: Date.parse(STORED.signedAt), signedExpiredAt: Date.parse(STORED.signedExpiredAt) };
  const aliceAddress = ALICE_CAPS.address.toLowerCase();
  const attempts = (accountId: string, roleId: number, address: string): [string, () => Promise<unknown>][] => [
    ['listRoles', () => directory.listRoles(caller, accountId, { limit: 50 })],
    ['getRole', () => directory.getRole(caller, accountId, roleId)],
    ['createRole', () => directory.createRole(bob, accountId, { ...AUDITOR, id: 500, slug: 'bobs' })],
    ['replaceRole', () => directory.replaceRole(bob, accountId, roleId, { ...AUDITOR, id: roleId })],
    ['deleteRole', () => directory.deleteRole(bob, accountId, roleId)],
    ['getSignRecord', () => directory.getSignRecord(caller, accountId, address)],
    ['createSignRecord', () => directory.createSignRecord(bob, accountId, { address: `0x${'b'.repeat(40)}`, ...times })],
    ['replaceSignRecord', () => directory.replaceSignRecord(bob, accountId, address, times)],
    ['deleteSignRecord', () => directory.deleteSignRecord(bob, accountId, address)],
  ];
  const outcome = (attempt: () => Promise<unknown>) => attempt().then(
    (value) => ({ value }),
    (err: GatewayError) => ({ status: err.status, code: err.code, message: err.message, field: err.field }),
  );
  const madeUp = attempts('acct_nobody', 9_999, UNKNOWN);
  for (const [i, [what, attempt]] of attempts(ACCOUNT, DEMO_ROLES[0]!.id, aliceAddress).entries()) {
    const seen = await outcome(attempt);
    assert.deepEqual(seen, await outcome(madeUp[i]![1]), `${what} on acct_alice`);
    assert.equal((seen as { status?: number }).status, 404, what);
  }
  // In bob's own account, acct_alice's role id and address are as unknown as made-up ones.
  const bobRoleIds = new Set(data.accounts.find((a: { id: string }) => a.id === DEMO.bob.accountId).roles.map((r: { id: number }) => r.id));
  const aliceOnlyRole = ALICE_ROLES.find((r) => !bobRoleIds.has(r.id))!.id;
  const own = attempts(DEMO.bob.accountId, 9_999, UNKNOWN);
  for (const [i, [what, attempt]] of attempts(DEMO.bob.accountId, aliceOnlyRole, aliceAddress).entries()) {
    if (what.startsWith('create') || what === 'listRoles') continue;
    assert.deepEqual(await outcome(attempt), await outcome(own[i]![1]), `${what} in acct_bob with acct_alice's id`);
  }
  assertOk(await ownerCall(gw, 'GET', `${ROLES}?limit=100`), 200, { items: DEMO_ROLES }, 'acct_alice\'s roles unchanged');
  assertOk(await ownerCall(gw, 'GET', `${SIGNS}/${aliceAddress}`), 200, {
    address: aliceAddress,
    signedNonce: ALICE_CAPS.signedNonce,
    signedAt: '2026-03-01T12:00:00.000Z',
    signedExpiredAt: '2026-03-31T12:00:00.000Z',
  }, 'acct_alice\'s record unchanged');
  assert.deepEqual(logged(gw, 'audit'), []);
});

test('on a data file of its own, roles and sign records written through the owner API are there after a restart', async (t) => {
  const file = join(tempDir(t), 'data.json');
  writeFileSync(file, readFileSync(DEMO_FILE, 'utf8'));
  const first = await startOwnerGateway(t, { data: { file } });
  assertOk(await ownerCall(first, 'POST', ROLES, AUDITOR), 201, AUDITOR, 'create');
  assertOk(await ownerCall(first, 'PUT', `${ROLES}/1`, { ...DEMO_ROLES[0]!, id: 50 }), 200, { ...DEMO_ROLES[0]!, id: 50 }, 'move role 1');
  assertOk(await ownerCall(first, 'DELETE', `${ROLES}/2`), 200, { id: 2, deleted: true }, 'delete role 2');
  assertOk(await ownerCall(first, 'POST', SIGNS, RECORD), 201, STORED, 'create a record');
  await first.close();

  const second = await startOwnerGateway(t, { data: { file } });
  const expected = [...DEMO_ROLES.filter((r) => r.id !== 1 && r.id !== 2), { ...DEMO_ROLES[0]!, id: 50 }, AUDITOR];
  assertOk(await ownerCall(second, 'GET', `${ROLES}?limit=100`), 200, { items: expected }, 'roles after the restart');
  assertOk(await ownerCall(second, 'GET', `${SIGNS}/${STORED.address}`), 200, STORED, 'the record after the restart');
  const { accessToken } = await signIn(second, DEMO.alice);
  const listing = await call(`${second.url}/api/roles?limit=100`, { token: accessToken });
  assert.deepEqual(listing.body.message.items.map((r: { id: number }) => r.id), expected.map((r) => r.id));
});
