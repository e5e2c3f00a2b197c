/**
 * The owner flow of issue 14, end to end over HTTP, shared by the acceptance suites on file
 * state (test/http/owner-flow.test.ts, one instance) and on Redis (test/redis/owner-flow.test.ts,
 * two instances): an operator invites an owner, who signs in, makes a key and signs in with it
 * at /api/signin, makes a role seen by /api/roles on the other instance, makes an API settings
 * token used on a proxied route and revokes it (refused everywhere within a second), rolls the
 * key's secret and resets the account. Then `checkPersisted` proves, after a restart, that all
 * of it is still there.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Backend } from './backend.js';
import { call, postJson, show, type JsonResponse } from './gateway.js';
import { newPassword, OwnerApi, operatorCredential, plainFetcher, secretHash, signInOwner } from './owner-api.js';

/** A revoke or a reset must reach every instance within this (issue 14). */
export const REACH_MS = 1000;
const POLL_MS = 20;

export interface Instance {
  name: string;
  url: string;
}

/** What the flow left behind, for checkPersisted after a restart. */
export interface FlowState {
  accountId: string;
  email: string;
  password: string;
  ownerId: string;
  keyId: string;
  apiKey: string;
  /** The key's secret after the rolls. */
  apiSecret: string;
  roleId: number;
  keptTokenId: string;
  keptToken: string;
  revokedTokenId: string;
  revokedToken: string;
  address: string;
  signedNonce: number;
  auditIds: string[];
}

export function signInWithKey(gw: Instance, apiKey: string, apiSecret: string): Promise<JsonResponse> {
  return postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: secretHash(apiSecret) });
}

async function expectSignedIn(gw: Instance, apiKey: string, apiSecret: string, what: string): Promise<{ accessToken: string; refreshToken: string }> {
  const res = await signInWithKey(gw, apiKey, apiSecret);
  assert.equal(res.status, 200, `${what} on ${gw.name}: ${show(res)}`);
  return res.body.message;
}

/** Polls `probe` until it gives `status`; the ms it took, or a failure after `limitMs`. */
export async function within(limitMs: number, what: string, probe: () => Promise<JsonResponse>, status: number): Promise<number> {
  const started = Date.now();
  // At least one probe, even when the budget was spent before the call.
  for (;;) {
    const last = await probe();
    if (last.status === status) return Date.now() - started;
    if (Date.now() - started > limitMs) assert.fail(`${what}: still ${show(last)} after ${limitMs} ms (expected ${status})`);
    await sleep(POLL_MS);
  }
}

/**
 * The flow, with changes made through `a` and seen through `b` (the same instance on file
 * state). `backend` is behind the route `/echo` of every instance, auth required.
 */
export async function runOwnerFlow({ a, b, adminToken, backend, roleReachMs }: {
  a: Instance;
  b: Instance;
  adminToken: string;
  backend: Backend;
  /** How long a role change may take to reach /api/roles of `b` (the store's documented freshness). */
  roleReachMs: number;
}): Promise<FlowState> {
  const operator = new OwnerApi(plainFetcher(a.url), operatorCredential(adminToken));
  const account = await operator.expect(201, operator.post('/accounts', { name: 'Flow Ltd' }));
  const accountId = account.id as string;
  const acct = `/accounts/${encodeURIComponent(accountId)}`;

  // Invite → accept → sign in.
  const email = `owner-${Date.now()}@example.com`;
  const invite = await operator.expect(201, operator.post(`${acct}/invites`, { email }));
  assert.match(invite.token, /^gwinv_[0-9A-Za-z]{43}$/);
  assert.equal(invite.invite.status, 'pending');
  const password = newPassword();
  const accepted = await operator.expect(200, postJson(`${a.url}/owner/v1/invites/accept`, { token: invite.token, password }));
  assert.equal(accepted.accountId, accountId);
  const { who, session } = await signInOwner(plainFetcher(b.url), email, password);
  assert.deepEqual(session.accounts.map((x: { id: string }) => x.id), [accountId], 'the invited owner owns the account');
  assert.equal(session.owner.mustChangePassword, false);
  // Sessions are shared by the instances (or there is one): the owner goes on through `a`.
  const owner = new OwnerApi(plainFetcher(a.url), who);

  // A key, used at /api/signin of the other instance.
  const made = await owner.expect(201, owner.post(`${acct}/keys`, { name: 'ci', description: 'CI runner' }));
  assert.match(made.key.apiKey, /^gwk_[0-9A-Za-z]{24}$/);
  assert.match(made.apiSecret, /^gwsk_[0-9A-Za-z]{43}$/);
  assert.match(made.key.id, /^key_[0-9A-Za-z]{16}$/);
  const key = made.key as { id: string; apiKey: string };
  const pair = await expectSignedIn(b, key.apiKey, made.apiSecret, 'the new key signs in');

  // A role, seen by /api/roles of the other instance.
  const roleId = 4242;
  await owner.expect(201, owner.post(`${acct}/roles`, { id: roleId, slug: 'flow', name: 'Flow role', description: 'Made by the owner flow.', public: true }));
  await within(roleReachMs, `the new role in /api/roles of ${b.name}`, async () => {
    const res = await call(`${b.url}/api/roles?limit=100`, { token: pair.accessToken });
    return res.status === 200 && res.body.message.items.some((r: { id: number }) => r.id === roleId) ? res : { ...res, status: 0 };
  }, 200);

  // A sign record, looked up through the other instance.
  const address = `0x${'c0ffee'.repeat(6)}abcd`;
  const signedNonce = 77;
  await owner.expect(201, owner.post(`${acct}/sign-records`, { address, signedNonce, signedAt: '2026-01-02T03:04:05.000Z', signedExpiredAt: '2027-01-02T03:04:05.000Z' }));
  await within(roleReachMs, `the new sign record on ${b.name}`, () => call(`${b.url}/api/sign?address=${address}`, { token: pair.accessToken }), 200);

  // An API settings token on a proxied route, then revoked: refused on both within a second.
  const revokedMade = await owner.expect(201, owner.post(`${acct}/settings-tokens`, { name: 'to revoke' }));
  assert.match(revokedMade.token, /^gwst_[0-9A-Za-z]{49}$/);
  assert.ok(revokedMade.token.startsWith(revokedMade.settingsToken.start), 'the listing\'s start is the token\'s beginning');
  const before = backend.received.length;
  for (const gw of [a, b]) {
    const res = await call(`${gw.url}/echo/flow`, { token: revokedMade.token });
    assert.equal(res.status, 200, `the settings token on a proxied route of ${gw.name}: ${show(res)}`);
  }
  assert.equal(backend.received.length, before + 2, 'both calls reached the backend');
  const revoked = await owner.expect(200, owner.delete(`${acct}/settings-tokens/${revokedMade.settingsToken.id}`));
  assert.equal(revoked.status, 'revoked');
  const revokedAt = Date.now();
  await Promise.all([a, b].map((gw) => within(REACH_MS - (Date.now() - revokedAt), `the revoked settings token on ${gw.name}`, () => call(`${gw.url}/echo/flow`, { token: revokedMade.token }), 401)));
  const kept = await owner.expect(201, owner.post(`${acct}/settings-tokens`, { name: 'kept', scopes: ['read'] }));

  // Roll the key's secret: with an overlap both sign in; without, only the newest.
  const rolled = await owner.expect(200, owner.post(`${acct}/keys/${key.id}/roll`, { overlapSeconds: 600 }));
  assert.equal(rolled.key.id, key.id, 'a roll keeps the key');
  assert.ok(rolled.key.previousValidUntil !== undefined, 'the answer says until when the old secret works');
  assert.notEqual(rolled.apiSecret, made.apiSecret);
  await expectSignedIn(b, key.apiKey, rolled.apiSecret, 'the rolled secret');
  await expectSignedIn(b, key.apiKey, made.apiSecret, 'the old secret, during the overlap');
  const rolledAgain = await owner.expect(200, owner.post(`${acct}/keys/${key.id}/roll`, { overlapSeconds: 0 }));
  await expectSignedIn(b, key.apiKey, rolledAgain.apiSecret, 'the newest secret');
  for (const old of [made.apiSecret, rolled.apiSecret]) {
    const res = await signInWithKey(b, key.apiKey, old);
    assert.equal(res.status, 401, `a replaced secret without overlap: ${show(res)}`);
  }

  // Reset the account: tokens issued before are refused on both within a second; new ones work.
  const fresh = await expectSignedIn(a, key.apiKey, rolledAgain.apiSecret, 'a sign-in before the reset');
  const reset = await owner.expect(200, owner.post(`${acct}/reset`));
  assert.deepEqual([reset.scope, reset.accountId], ['account', accountId]);
  const resetAt = Date.now();
  await Promise.all([a, b].map((gw) => within(REACH_MS - (Date.now() - resetAt), `an access token from before the reset on ${gw.name}`, () => call(`${gw.url}/api/roles`, { token: fresh.accessToken }), 401)));
  const afterReset = await expectSignedIn(b, key.apiKey, rolledAgain.apiSecret, 'a sign-in after the reset');
  assert.equal((await call(`${a.url}/api/roles`, { token: afterReset.accessToken })).status, 200);
  // The account reset also revokes the account's settings tokens, so the kept one is made after it.
  const keptAfter = await owner.expect(201, owner.post(`${acct}/settings-tokens`, { name: 'kept after reset' }));
  assert.equal((await call(`${a.url}/echo/flow`, { token: keptAfter.token })).status, 200);
  assert.equal((await call(`${a.url}/echo/flow`, { token: kept.token })).status, 401, 'the account reset revoked the settings token made before it');

  const audit = await owner.expect(200, owner.get(`${acct}/audit?limit=100`));
  // Spelling aside ("settings-token.revoke", "settingsToken.revoke"), these changes are recorded.
  const spelt = (action: string) => action.toLowerCase().replaceAll(/[^a-z]/g, '');
  const actions = audit.items.map((e: { action: string }) => spelt(e.action));
  for (const action of ['key.create', 'key.roll', 'role.create', 'settings_token.revoke', 'account.reset']) {
    assert.ok(actions.includes(spelt(action)), `the audit has ${action}: ${audit.items.map((e: { action: string }) => e.action).join(', ')}`);
  }
  assert.ok(!JSON.stringify(audit).includes(made.apiSecret) && !JSON.stringify(audit).includes(keptAfter.token), 'no secret in the audit');

  return {
    accountId, email, password, ownerId: accepted.ownerId, keyId: key.id, apiKey: key.apiKey, apiSecret: rolledAgain.apiSecret, roleId,
    keptTokenId: keptAfter.settingsToken.id, keptToken: keptAfter.token, revokedTokenId: revokedMade.settingsToken.id, revokedToken: revokedMade.token,
    address, signedNonce, auditIds: audit.items.map((e: { id: string }) => e.id),
  };
}

/** After a restart: the owner, the key, the settings tokens, the role, the sign record and the audit are all still there. */
export async function checkPersisted(gw: Instance, state: FlowState): Promise<void> {
  const { who, session } = await signInOwner(plainFetcher(gw.url), state.email, state.password);
  assert.deepEqual(session.accounts.map((x: { id: string }) => x.id), [state.accountId], 'the owner still owns the account');
  const owner = new OwnerApi(plainFetcher(gw.url), who);
  const acct = `/accounts/${encodeURIComponent(state.accountId)}`;

  const members = await owner.expect(200, owner.get(`${acct}/members`));
  assert.ok(members.items.some((m: { ownerId: string }) => m.ownerId === state.ownerId), 'the owner is still a member');
  const keys = await owner.expect(200, owner.get(`${acct}/keys`));
  assert.deepEqual(keys.items.map((k: { id: string }) => k.id), [state.keyId]);
  const pair = await expectSignedIn(gw, state.apiKey, state.apiSecret, 'the key\'s current secret after the restart');

  const tokens = await owner.expect(200, owner.get(`${acct}/settings-tokens?limit=100`));
  const byId = new Map(tokens.items.map((s: { id: string; status: string }) => [s.id, s.status]));
  assert.equal(byId.get(state.keptTokenId), 'active');
  assert.equal(byId.get(state.revokedTokenId), 'revoked');
  assert.equal((await call(`${gw.url}/echo/flow`, { token: state.keptToken })).status, 200, 'the kept settings token still works');
  assert.equal((await call(`${gw.url}/echo/flow`, { token: state.revokedToken })).status, 401, 'the revoked one is still refused');

  const roles = await call(`${gw.url}/api/roles?limit=100`, { token: pair.accessToken });
  assert.equal(roles.status, 200, show(roles));
  assert.ok(roles.body.message.items.some((r: { id: number; public: number }) => r.id === state.roleId && r.public === 1), 'the role is still served');
  const sign = await call(`${gw.url}/api/sign?address=${state.address}`, { token: pair.accessToken });
  assert.equal(sign.status, 200, show(sign));
  assert.equal(sign.body.message.signedNonce, state.signedNonce);

  const audit = await owner.expect(200, owner.get(`${acct}/audit?limit=100`));
  const ids = new Set(audit.items.map((e: { id: string }) => e.id));
  for (const id of state.auditIds) assert.ok(ids.has(id), `audit event ${id} is still there`);
}
