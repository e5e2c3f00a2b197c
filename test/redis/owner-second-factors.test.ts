/**
 * Second factors across two gateway instances on one real redis-server (issue 30): a TOTP code
 * accepted by one instance is a replay at the other (the last accepted step lives in the owner
 * store), a recovery code used at one is gone at the other, and a passkey ceremony started at
 * one is finished at the other, once (its challenge lives in Redis).
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Secret, TOTP } from 'otpauth';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { ManualClock } from '../helpers/clock.js';
import { show, startGateway, type TestGateway } from '../helpers/gateway.js';
import { accountWithOwner, ADMIN_TOKEN, anonymous } from '../helpers/owner.js';
import { redisSuite, startRedis } from '../helpers/redis.js';
import { softPasskey } from '../helpers/webauthn.js';

const PASSWORD = 'correct horse battery staple';

function instance(t: TestContext, url: string, clock: ManualClock): Promise<TestGateway> {
  return startGateway(t, {
    overrides: { redis: { url }, data: { keySource: 'redis' }, directory: { store: 'redis' }, owner: { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)] } },
    clock,
  });
}

test('two instances share second factors: a code once across both, a recovery code once, a passkey ceremony finished elsewhere', redisSuite(), async (t) => {
  const server = await startRedis(t);
  const clock = new ManualClock(Date.now());
  const [a, b] = [await instance(t, server.url, clock), await instance(t, server.url, clock)];
  const owner = await accountWithOwner(a, { accountId: 'acct_two', email: 'two@example.com', password: PASSWORD });

  const { secret } = (await owner.send('POST', '/session/totp')).body.message;
  const confirmed = await owner.send('POST', '/session/totp/confirmation', { code: TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: clock.now() }) });
  assert.equal(confirmed.status, 200, show(confirmed));
  const recovery = confirmed.body.message.recoveryCodes as string[];

  clock.advance(30_000);
  const code = TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: clock.now() });
  const body = { email: 'two@example.com', password: PASSWORD, otp: code };
  assert.equal((await anonymous(a).send('POST', '/session', body)).status, 200);
  const replay = await anonymous(b).send('POST', '/session', body);
  assert.equal(replay.status, 401, `the other instance refuses the replay: ${show(replay)}`);
  assert.equal(replay.body.message.code, 'mfa_required');

  assert.equal((await anonymous(b).send('POST', '/session', { ...body, otp: recovery[0] })).status, 200);
  assert.equal((await anonymous(a).send('POST', '/session', { ...body, otp: recovery[0] })).status, 401, 'a recovery code used at one instance is gone at the other');

  const passkey = softPasskey();
  const started = (await owner.send('POST', '/session/passkeys/options')).body.message;
  assert.equal((await owner.send('POST', '/session/passkeys', { ceremonyId: started.ceremonyId, name: 'key', response: passkey.register(started.options, a.url) })).status, 201);
  const ceremony = (await anonymous(a).send('POST', '/session/passkey/options')).body.message;
  const response = passkey.authenticate(ceremony.options, b.url);
  const finished = await anonymous(b).send('POST', '/session/passkey', { ceremonyId: ceremony.ceremonyId, response });
  assert.equal(finished.status, 200, `started at one instance, finished at the other: ${show(finished)}`);
  assert.equal((await anonymous(a).send('POST', '/session/passkey', { ceremonyId: ceremony.ceremonyId, response })).status, 401, 'and taken once');
});
