/**
 * Disabling an account is an account-wide reset (docs/owner.md, Accounts), and an account reset
 * revokes the account's API settings tokens for good. Without that, a disabled account's tokens
 * were refused only while the reset was remembered: listed as active meanwhile, and accepted
 * again once the reset had expired (or a memory gateway restarted) after the account was enabled.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resetRetentionMs } from '../../src/state/revocation/store.js';
import { call, show } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner-keys.js';

test('a disabled account\'s settings tokens are revoked for good: listed so, and refused after it is enabled again', async (t) => {
  const gw = await startOwnerGateway(t);
  const api = operator(gw);
  const made = await api.post('/accounts/acct_alice/settings-tokens', { name: 'dashboard' });
  assert.equal(made.status, 201, show(made));
  const { token, settingsToken } = made.body.message as { token: string; settingsToken: { id: string } };
  gw.clock.advance(1);
  assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 200);

  assert.equal((await api.patch('/accounts/acct_alice', { enabled: false })).status, 200);
  assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 401, 'refused while disabled');
  const listed = await api.get(`/accounts/acct_alice/settings-tokens/${settingsToken.id}`);
  assert.equal(listed.status, 200, show(listed));
  assert.equal(listed.body.message.status, 'revoked', 'listed as what it is');

  assert.equal((await api.patch('/accounts/acct_alice', { enabled: true })).status, 200);
  gw.clock.advance(resetRetentionMs(gw.services.config.tokens) + 120_000);
  assert.equal((await call(`${gw.url}/api/roles`, { token })).status, 401, 'still refused once the reset is forgotten');
});
