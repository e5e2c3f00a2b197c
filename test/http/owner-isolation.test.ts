/**
 * Cross-account isolation of the owner API, for every object type and every method: two
 * accounts made by the operator, one owner each (signed in with the initial password, then
 * changed). Bob's session, pointed at anything of Alice's account, gets exactly the answer a
 * made-up id gets (a 404, or for an operator-only operation the same 403), so he cannot even
 * tell her ids from invented ones; pointed at his own account with her object ids, the answer
 * of a made-up object id. Nothing of Alice's changes, her audit trail included.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { randomBase62 } from '../../src/domain/random.js';
import { ownerOperations } from '../../src/http/routes/owner/index.js';
import { createSignAnswers } from '../../src/http/routes/sign.js';
import { show, type JsonResponse } from '../helpers/gateway.js';
import { accountWithOwner, operator as operatorClient, startOwnerGateway, type Client } from '../helpers/owner.js';

const A = 'acct_iso_alice';
const B = 'acct_iso_bob';

/** An id of the same spelling as `id` (prefix kept, the random tail redrawn): one nobody has. */
function madeUpLike(id: string): string {
  return id.replace(/[A-Za-z0-9]+$/, (tail) => randomBase62(tail.length));
}

/** Ids of one object of each type; `{a}` in a path is the account. */
interface Ids { a: string; key: string; token: string; invite: string; owner: string; role: string; address: string; webhook: string }

/**
 * Every operation under /owner/v1/accounts/{a}, each with a valid body (so the answer is about
 * reaching the object, not about the body). `operatorOnly`: an owner gets 403 for it wherever
 * they point it, which is still the same answer for her ids as for made-up ones.
 */
const OPERATIONS: { method: string; path: (ids: Ids) => string; body?: unknown; objectId: boolean; operatorOnly?: boolean }[] = [
  { method: 'GET', path: (i) => `/accounts/${i.a}`, objectId: false },
  { method: 'PATCH', path: (i) => `/accounts/${i.a}`, body: { name: 'taken over' }, objectId: false },
  { method: 'PATCH', path: (i) => `/accounts/${i.a}`, body: { enabled: false }, objectId: false, operatorOnly: true },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}`, objectId: false, operatorOnly: true },
  { method: 'POST', path: (i) => `/accounts/${i.a}/reset`, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/members`, objectId: false },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/members/${i.owner}`, objectId: true },
  { method: 'POST', path: (i) => `/accounts/${i.a}/owners`, body: { email: 'mallory@example.com', initialPassword: 'a password of 15+' }, objectId: false, operatorOnly: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/invites`, objectId: false },
  { method: 'POST', path: (i) => `/accounts/${i.a}/invites`, body: { email: 'mallory@example.com' }, objectId: false },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/invites/${i.invite}`, objectId: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/audit`, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/keys`, objectId: false },
  { method: 'POST', path: (i) => `/accounts/${i.a}/keys`, body: { name: 'mallory' }, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/keys/${i.key}`, objectId: true },
  { method: 'PATCH', path: (i) => `/accounts/${i.a}/keys/${i.key}`, body: { name: 'mallory', enabled: false }, objectId: true },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/keys/${i.key}`, objectId: true },
  { method: 'POST', path: (i) => `/accounts/${i.a}/keys/${i.key}/roll`, body: { overlapSeconds: 0 }, objectId: true },
  { method: 'POST', path: (i) => `/accounts/${i.a}/keys/${i.key}/reset`, objectId: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/settings-tokens`, objectId: false },
  { method: 'POST', path: (i) => `/accounts/${i.a}/settings-tokens`, body: { name: 'mallory' }, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/settings-tokens/${i.token}`, objectId: true },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/settings-tokens/${i.token}`, objectId: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/webhooks`, objectId: false },
  { method: 'POST', path: (i) => `/accounts/${i.a}/webhooks`, body: { url: 'https://hooks.example.com/mallory' }, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/webhooks/${i.webhook}`, objectId: true },
  { method: 'PATCH', path: (i) => `/accounts/${i.a}/webhooks/${i.webhook}`, body: { url: 'https://hooks.example.com/mallory' }, objectId: true },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/webhooks/${i.webhook}`, objectId: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/webhooks/${i.webhook}/deliveries`, objectId: true },
  { method: 'POST', path: (i) => `/accounts/${i.a}/webhooks/${i.webhook}/test`, objectId: true },
  { method: 'POST', path: (i) => `/accounts/${i.a}/webhooks/${i.webhook}/roll-secret`, objectId: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/roles`, objectId: false },
  { method: 'POST', path: (i) => `/accounts/${i.a}/roles`, body: { id: 4242, slug: 'mallory', name: 'Mallory', public: true }, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/roles/${i.role}`, objectId: true },
  { method: 'PUT', path: (i) => `/accounts/${i.a}/roles/${i.role}`, body: { id: 4242, slug: 'mallory', name: 'Mallory', public: true }, objectId: true },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/roles/${i.role}`, objectId: true },
  { method: 'POST', path: (i) => `/accounts/${i.a}/sign-records`, body: { address: `0x${'d'.repeat(40)}`, signedNonce: 1, signedAt: '2026-01-01T00:00:00Z', signedExpiredAt: '2027-01-01T00:00:00Z' }, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/sign-records/${i.address}`, objectId: true },
  { method: 'PUT', path: (i) => `/accounts/${i.a}/sign-records/${i.address}`, body: { signedNonce: 666, signedAt: '2026-01-01T00:00:00Z', signedExpiredAt: '2027-01-01T00:00:00Z' }, objectId: true },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/sign-records/${i.address}`, objectId: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/sign-records/${i.address}/served`, objectId: true },
  { method: 'GET', path: (i) => `/accounts/${i.a}/usage`, objectId: false },
  { method: 'GET', path: (i) => `/accounts/${i.a}/second-factor-requirement`, objectId: false },
  { method: 'PUT', path: (i) => `/accounts/${i.a}/second-factor-requirement`, body: { required: true }, objectId: false },
  { method: 'DELETE', path: (i) => `/accounts/${i.a}/members/${i.owner}/second-factors`, objectId: true, operatorOnly: true },
];

/** Everything of the account the operator can read, to compare before and after. */
async function snapshot(operator: Client, ids: Ids): Promise<Record<string, unknown>> {
  const paths = [
    `/accounts/${ids.a}`,
    `/accounts/${ids.a}/members`,
    `/accounts/${ids.a}/invites`,
    `/accounts/${ids.a}/audit?limit=100`,
    `/accounts/${ids.a}/keys`,
    `/accounts/${ids.a}/settings-tokens`,
    `/accounts/${ids.a}/webhooks`,
    `/accounts/${ids.a}/roles`,
    `/accounts/${ids.a}/sign-records/${ids.address}`,
    `/accounts/${ids.a}/sign-records/${ids.address}/served`,
  ];
  const out: Record<string, unknown> = {};
  for (const path of paths) {
    const res = await operator.send('GET', path);
    assert.equal(res.status, 200, `${path}: ${show(res)}`);
    out[path] = res.body.message;
  }
  return out;
}

function comparable(res: JsonResponse): { status: number; body: unknown; allow: string | null } {
  return { status: res.status, body: res.body, allow: res.headers.get('allow') };
}

test('an owner reaches nothing of another account: every object type, every method, the made-up id\'s answer', async (t) => {
  const gw = await startOwnerGateway(t);
  const operator = operatorClient(gw);
  const alice = await accountWithOwner(gw, { accountId: A, email: 'alice@example.com', password: `alice ${randomBase62(20)}` });
  const bob = await accountWithOwner(gw, { accountId: B, email: 'bob@example.com', password: `bob ${randomBase62(20)}` });
  const aliceId = alice.signIn.body.message.owner.id as string;

  // One object of every type in Alice's account, made by Alice.
  const made = async (path: string, body: unknown) => {
    const res = await alice.send('POST', `/accounts/${A}${path}`, body);
    assert.equal(res.status, 201, `${path}: ${show(res)}`);
    return res.body.message;
  };
  const address = `0x${randomBytes(20).toString('hex')}`;
  const ids: Ids = {
    a: A,
    key: (await made('/keys', { name: 'alice key' })).key.id,
    token: (await made('/settings-tokens', { name: 'alice token' })).settingsToken.id,
    invite: (await made('/invites', { email: 'carol@example.com' })).invite.id,
    owner: aliceId,
    role: String((await made('/roles', { id: 7, slug: 'alice-role', name: 'Alice role', public: false })).id),
    address: (await made('/sign-records', { address, signedNonce: 3, signedAt: '2026-01-01T00:00:00Z', signedExpiredAt: '2027-01-01T00:00:00Z' })).address,
    webhook: (await made('/webhooks', { url: 'https://hooks.example.com/alice', enabled: false })).webhook.id,
  };
  const madeUp: Ids = {
    a: 'acct_made_up',
    key: madeUpLike(ids.key),
    token: madeUpLike(ids.token),
    invite: madeUpLike(ids.invite),
    owner: madeUpLike(ids.owner),
    role: '9876',
    address: `0x${randomBytes(20).toString('hex')}`,
    webhook: `whe_${randomBase62(16)}`,
  };
  const before = await snapshot(operator, ids);

  await t.test('the matrix holds every operation on an account or its objects', () => {
    const placeholders: Ids = { a: '{accountId}', key: '{keyId}', token: '{tokenId}', invite: '{inviteId}', owner: '{ownerId}', role: '{roleId}', address: '{address}', webhook: '{webhookId}' };
    const covered = new Set(OPERATIONS.map((op) => `${op.method} /owner/v1${op.path(placeholders)}`));
    const signAnswers = createSignAnswers({ directory: gw.services.directory, formatTimestamp: gw.services.formatTimestamp });
    const served = ownerOperations(gw.services.owner, { config: gw.services.config, signAnswers })
      .filter((op) => op.path.includes('{accountId}'))
      .map((op) => `${op.method.toUpperCase()} ${op.path}`);
    assert.deepEqual(served.filter((key) => !covered.has(key)), []);
  });

  await t.test('Bob\'s account listing holds only his account', async () => {
    const res = await bob.send('GET', '/accounts');
    assert.equal(res.status, 200, show(res));
    assert.deepEqual(res.body.message.items.map((a: { id: string }) => a.id), [B]);
  });

  await t.test('Alice\'s account, with her ids: the answer of a made-up account with made-up ids', async () => {
    for (const op of OPERATIONS) {
      const what = `${op.method} ${op.path({ ...ids, a: '{alice}' })}`;
      const hers = await bob.send(op.method, op.path(ids), op.body);
      const invented = await bob.send(op.method, op.path(madeUp), op.body);
      // An operator-only operation may refuse an owner before looking at the account: 403 both times.
      assert.ok(hers.status === 404 || (op.operatorOnly === true && hers.status === 403), `${what}: ${show(hers)}`);
      assert.deepEqual(comparable(hers), comparable(invented), what);
    }
  });

  await t.test('Alice\'s account with made-up object ids: the same answer again', async () => {
    for (const op of OPERATIONS.filter((o) => o.objectId)) {
      const what = `${op.method} ${op.path({ ...madeUp, a: '{alice}' })}`;
      const res = await bob.send(op.method, op.path({ ...madeUp, a: A }), op.body);
      assert.deepEqual(comparable(res), comparable(await bob.send(op.method, op.path(madeUp), op.body)), what);
    }
  });

  await t.test('Bob\'s own account with Alice\'s object ids: the answer of made-up object ids', async () => {
    for (const op of OPERATIONS.filter((o) => o.objectId)) {
      const what = `${op.method} ${op.path({ ...ids, a: '{bob}' })}`;
      const hers = await bob.send(op.method, op.path({ ...ids, a: B }), op.body);
      const invented = await bob.send(op.method, op.path({ ...madeUp, a: B }), op.body);
      assert.equal(hers.status, 404, `${what}: ${show(hers)}`);
      assert.deepEqual(comparable(hers), comparable(invented), what);
    }
  });

  await t.test('nothing of Alice\'s changed, her audit trail included, and she still reaches all of it', async () => {
    assert.deepEqual(await snapshot(operator, ids), before);
    for (const path of [`/accounts/${A}/keys/${ids.key}`, `/accounts/${A}/settings-tokens/${ids.token}`, `/accounts/${A}/roles/${ids.role}`, `/accounts/${A}/sign-records/${ids.address}`,
      `/accounts/${A}/sign-records/${ids.address}/served`, `/accounts/${A}/usage`]) {
      const res = await alice.send('GET', path);
      assert.equal(res.status, 200, `${path}: ${show(res)}`);
    }
  });
});
