/**
 * Over TLS the session cookie is `__Host-gw_session`, which a sibling subdomain cannot set
 * (docs/owner.md, Sessions). A plain `gw_session` cookie, which a subdomain can set for the
 * whole domain (cookie tossing: the victim then acts in the attacker's session), is not read
 * there.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { show } from '../helpers/gateway.js';
import { accountWithOwner, anonymous, sessionCookie, startOwnerGateway } from '../helpers/owner.js';

const PASSWORD = 'correct horse battery staple';
const ORIGIN = 'https://gw.example.test';

test('with an https public origin a session presented under the plain cookie name is no session', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { owner: { publicOrigin: ORIGIN } } });
  await accountWithOwner(gw, { accountId: 'acct_toss', email: 'toss@example.com', password: PASSWORD });
  const res = await anonymous(gw).send('POST', '/session', { email: 'toss@example.com', password: PASSWORD }, { origin: ORIGIN });
  assert.equal(res.status, 200, show(res));
  const id = sessionCookie(res)!.split(';')[0]!.split('=')[1]!;
  assert.equal((await anonymous(gw).get('/session', { cookie: `__Host-gw_session=${id}` })).status, 200, 'the __Host- cookie is read');
  const tossed = await anonymous(gw).get('/session', { cookie: `gw_session=${id}` });
  assert.equal(tossed.status, 401, show(tossed));
  assert.equal(tossed.body.message.code, 'session_required');
});
