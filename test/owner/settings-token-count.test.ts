/**
 * An account's API settings tokens are bounded, as its invites are: a revoked token's record
 * was kept for ever and nothing capped the live ones, so an owner could grow the account's
 * record (read on every token check that misses the cache, rewritten on every change) without
 * end. At most 100 are kept; those revoked or expired more than 30 days ago go when one is made.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mintSettingsToken, settingsTokenDigest, settingsTokenStart } from '../../src/domain/settings-token.js';
import { show } from '../helpers/gateway.js';
import { operator, startOwnerGateway } from '../helpers/owner-keys.js';

const DAY = 86_400_000;

function seed(count: number, extra: (n: number) => Record<string, string>) {
  return (data: any) => {
    const account = data.accounts.find((a: { id: string }) => a.id === 'acct_alice');
    account.settingsTokens = Array.from({ length: count }, (_, n) => {
      const token = mintSettingsToken();
      return { id: `stk_seed${n}`, name: `seed ${n}`, digest: settingsTokenDigest(token), start: settingsTokenStart(token), scopes: [], createdAt: new Date(Date.now() - 60 * DAY).toISOString(), ...extra(n) };
    });
  };
}

test('an account holds at most 100 settings tokens: the 101st is a 409', async (t) => {
  const gw = await startOwnerGateway(t, { edit: seed(100, () => ({})) });
  const res = await operator(gw).post('/accounts/acct_alice/settings-tokens', { name: 'one more' });
  assert.equal(res.status, 409, show(res));
  assert.equal(res.body.message.code, 'conflict');
});

test('tokens revoked or expired more than 30 days ago are dropped when one is made; recent ones stay', async (t) => {
  const longAgo = new Date(Date.now() - 31 * DAY).toISOString();
  const lately = new Date(Date.now() - DAY).toISOString();
  const gw = await startOwnerGateway(t, {
    edit: seed(100, (n): Record<string, string> => (n === 0 ? { revokedAt: lately } : n === 1 ? { expiresAt: lately } : n % 2 === 0 ? { revokedAt: longAgo } : { expiresAt: longAgo })),
  });
  const res = await operator(gw).post('/accounts/acct_alice/settings-tokens', { name: 'fresh' });
  assert.equal(res.status, 201, show(res));
  const ids = (await gw.services.ownerStore.readAccount('acct_alice'))!.settingsTokens.map((s) => s.id);
  assert.deepEqual(ids, ['stk_seed0', 'stk_seed1', res.body.message.settingsToken.id]);
});
