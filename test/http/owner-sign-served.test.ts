/**
 * GET /owner/v1/accounts/{accountId}/sign-records/{address}/served: the sign record exactly as
 * /api/sign answers it (its `message`), checked by deep equality against /api/sign called with
 * a real access token of the account, for the same address spelt the same way: after a create,
 * after an edit (the cache must not serve the old one to either), in a time zone with an offset,
 * and in mixed case (`did` echoes the spelling). Where /api/sign has nothing, a 404 not_found;
 * another owner's account is the 404 of a made-up one. Where the owner store does not write the
 * directory (directory.store=http) it is 409 read_only_store like every sign-record call: that
 * case is in test/http/owner-directory.test.ts, with the others.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { call, DEMO, show, signIn, type TestGateway } from '../helpers/gateway.js';
import { accountWithOwner, operator, startOwnerGateway, type Client } from '../helpers/owner.js';

const ACCOUNT = DEMO.alice.accountId;

/** A random address in mixed case, as a client might spell it. */
function mixedCaseAddress(): string {
  const hex = randomBytes(20).toString('hex');
  return `0x${[...hex].map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c)).join('')}`;
}

async function fromApiSign(gw: TestGateway, token: string, address: string): Promise<unknown> {
  const res = await call(`${gw.url}/api/sign?address=${address}`, { token });
  assert.equal(res.status, 200, show(res));
  return res.body.message;
}

async function served(client: Client, accountId: string, address: string): Promise<unknown> {
  const res = await client.get(`/accounts/${accountId}/sign-records/${address}/served`);
  assert.equal(res.status, 200, show(res));
  return res.body.message;
}

test('the served sign record deep-equals /api/sign\'s message, after a create and after an edit', async (t) => {
  // An offset time zone, so that a formatter other than /api/sign's would show.
  const gw = await startOwnerGateway(t, { overrides: { data: { timeZone: 'Asia/Kolkata' } } });
  const op = operator(gw);
  const { accessToken } = await signIn(gw, DEMO.alice);
  const address = mixedCaseAddress();

  const missing = await op.get(`/accounts/${ACCOUNT}/sign-records/${address}/served`);
  assert.equal(missing.status, 404, show(missing));
  assert.equal(missing.body.message.code, 'not_found');
  assert.equal((await call(`${gw.url}/api/sign?address=${address}`, { token: accessToken })).status, 404, '/api/sign has none either');

  const created = await op.send('POST', `/accounts/${ACCOUNT}/sign-records`, { address, signedNonce: 7, signedAt: '2026-03-01T10:15:30Z', signedExpiredAt: '2026-04-01T23:59:59Z' });
  assert.equal(created.status, 201, show(created));
  const afterCreate = await served(op, ACCOUNT, address);
  assert.deepEqual(afterCreate, await fromApiSign(gw, accessToken, address));
  assert.deepEqual(afterCreate, { did: address, signedNonce: 7, signedAt: '2026-03-01 15:45:30', signedExpiredAt: '2026-04-02 05:29:59' });

  const edited = await op.send('PUT', `/accounts/${ACCOUNT}/sign-records/${address.toLowerCase()}`, { signedNonce: 8, signedAt: '2026-05-01T00:00:00Z', signedExpiredAt: '2026-06-01T00:00:00Z' });
  assert.equal(edited.status, 200, show(edited));
  const afterEdit = await served(op, ACCOUNT, address);
  assert.deepEqual(afterEdit, await fromApiSign(gw, accessToken, address));
  assert.deepEqual(afterEdit, { did: address, signedNonce: 8, signedAt: '2026-05-01 05:30:00', signedExpiredAt: '2026-06-01 05:30:00' });

  // Another spelling of the same address: each echoes its own, as /api/sign does.
  const lower = address.toLowerCase();
  assert.deepEqual(await served(op, ACCOUNT, lower), await fromApiSign(gw, accessToken, lower));

  // A record of the data file, read the same way.
  const demo = '0x52908400098527886E0F7030069857D2E4169EE7';
  assert.deepEqual(await served(op, ACCOUNT, demo), await fromApiSign(gw, accessToken, demo));

  await t.test('an owner of the account sees the same; another owner gets the 404 of a made-up account', async () => {
    const other = await accountWithOwner(gw, { accountId: 'acct_served_other', email: 'served-other@example.com', password: 'another passphrase' });
    const foreign = await other.get(`/accounts/${ACCOUNT}/sign-records/${address}/served`);
    const madeUp = await other.get(`/accounts/acct_made_up/sign-records/${address}/served`);
    assert.equal(foreign.status, 404, show(foreign));
    assert.deepEqual(foreign.body, madeUp.body);
    // Bob's account with Alice's address: what Bob's own keys would get, nothing.
    assert.equal((await other.get(`/accounts/acct_served_other/sign-records/${address}/served`)).status, 404);
  });

  await t.test('a malformed address is a 400 naming it', async () => {
    const res = await op.get(`/accounts/${ACCOUNT}/sign-records/0x1234/served`);
    assert.equal(res.status, 400, show(res));
    assert.equal(res.body.message.field, 'address');
  });

  await t.test('after a delete: 404, as /api/sign', async () => {
    assert.equal((await op.send('DELETE', `/accounts/${ACCOUNT}/sign-records/${address}`)).status, 200);
    assert.equal((await op.get(`/accounts/${ACCOUNT}/sign-records/${address}/served`)).status, 404);
    assert.equal((await call(`${gw.url}/api/sign?address=${address}`, { token: accessToken })).status, 404);
  });
});
