/**
 * Webhooks end to end on a gateway with its data file: the owner API's operations over HTTP
 * (createWebhook, listWebhooks, getWebhook, updateWebhook, deleteWebhook, listWebhookDeliveries,
 * sendTestWebhook, rollWebhookSecret), real owner changes delivered to a receiver on 127.0.0.1
 * (the operator allows private networks here) and verified with the standardwebhooks package,
 * the secrets sealed at rest, the audit trail, a restart, and every bad input a 4xx. The default
 * address rules are tested on a second gateway, as a deployment without the operator's allowance.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { NotFound } from '../../src/errors/errors.js';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { call, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { ADMIN_TOKEN, operator, ownerActor, ownerDataFile, OWNER_B } from '../helpers/owner-keys.js';
import { startWebhookReceiver, type Received, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const SECOND_FACTOR_KEY = 'k'.repeat(40);

let receiver: WebhookReceiver;
let hookUrl: string;

/** What an answer carries inside the envelope. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const m = (res: JsonResponse): any => (res.body as { message: unknown }).message;

before(async () => {
  receiver = await startWebhookReceiver();
  hookUrl = `${receiver.origin}/hook`;
});
after(() => receiver.close());

function verify(secret: string, r: Received): { type: string; data: Record<string, any> } {
  return new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as { type: string; data: Record<string, any> };
}

const settings = (file: string) => ({
  data: { file },
  owner: { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)], secondFactorKey: SECOND_FACTOR_KEY },
  webhooks: { allowPrivateNetworks: true, allowHttp: true },
});

test('webhooks on a gateway with its data file', async (t) => {
  const dataFile = ownerDataFile(t);
  let gw: TestGateway = await startGateway(t, { overrides: settings(dataFile) });
  const api = () => operator(gw);

  await t.test('create answers the secret once, sealed at rest; list, get and the audit trail never hold it', async () => {
    const made = await api().post('/accounts/acct_alice/webhooks', { url: hookUrl, description: 'ops', events: ['key.created'] });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const { webhook, secret } = m(made) as { webhook: Record<string, unknown>; secret: string };
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual([webhook.url, webhook.description, webhook.events, webhook.enabled], [hookUrl, 'ops', ['key.created'], true]);
    const listed = await api().get('/accounts/acct_alice/webhooks');
    assert.deepEqual(m(listed).items.map((w: { id: string }) => w.id), [webhook.id]);
    const got = await api().get(`/accounts/acct_alice/webhooks/${webhook.id}`);
    assert.equal(got.status, 200);
    const audit = await api().get('/accounts/acct_alice/audit');
    const secretBytes = secret.slice('whsec_'.length);
    for (const text of [JSON.stringify(listed.body), JSON.stringify(got.body), readFileSync(dataFile, 'utf8'), JSON.stringify(audit.body), gw.logs.join('\n')]) {
      assert.ok(!text.includes(secretBytes), 'the secret appears nowhere but in the create answer');
    }
    const stored = (await gw.services.ownerStore.readAccount('acct_alice'))!.webhooks.find((w) => w.id === webhook.id)!;
    assert.match(stored.secret, /^v1\./, 'sealed under owner.secondFactorKey');
    const created = m(audit).items.find((e: { action: string; target: { id: string } }) => e.action === 'webhook.create' && e.target.id === webhook.id);
    assert.deepEqual(created?.changes?.url, [null, hookUrl], 'webhook.create audited with its URL');
    assert.equal((await api().delete(`/accounts/acct_alice/webhooks/${webhook.id}`)).status, 200);
  });

  await t.test('owner changes reach the endpoints asking for them, signed; the delivery log tells each attempt', async () => {
    const all = m(await api().post('/accounts/acct_alice/webhooks', { url: `${hookUrl}?all` })) as { webhook: { id: string }; secret: string };
    const resets = m(await api().post('/accounts/acct_alice/webhooks', { url: `${hookUrl}?resets`, events: ['key.reset'] })) as { webhook: { id: string }; secret: string };
    const start = receiver.received.length;
    const key = await api().post('/accounts/acct_alice/keys', { name: 'ci' });
    assert.equal(key.status, 201, JSON.stringify(key.body));
    const keyId = m(key).key.id as string;
    assert.equal((await api().post(`/accounts/acct_alice/keys/${keyId}/reset`)).status, 200);
    await receiver.arrived(start + 3);
    const seen = receiver.received.slice(start).map((r) => {
      const event = verify(r.path.endsWith('?all') ? all.secret : resets.secret, r);
      assert.equal(event.data.accountId, 'acct_alice');
      assert.equal(event.data.target.id, keyId);
      return `${r.path.split('?')[1]} ${event.type}`;
    });
    assert.deepEqual(seen.sort(), ['all key.created', 'all key.reset', 'resets key.reset']);
    // The log is written once the receiver's answer is read: wait for that, not for time.
    const logOf = async (id: string) => m(await api().get(`/accounts/acct_alice/webhooks/${id}/deliveries`)).items as { type: string; ok: boolean; status: number }[];
    while ((await logOf(all.webhook.id)).length < 2) await new Promise((r) => setImmediate(r));
    assert.deepEqual((await logOf(all.webhook.id)).map((a) => [a.type, a.ok, a.status]).sort(), [['key.created', true, 200], ['key.reset', true, 200]]);
    for (const w of [all, resets]) assert.equal((await api().delete(`/accounts/acct_alice/webhooks/${w.webhook.id}`)).status, 200);
  });

  await t.test('a test send goes now (also to a disabled endpoint), signed with the rolled secret, at most every 5 s', async () => {
    const made = m(await api().post('/accounts/acct_alice/webhooks', { url: hookUrl, enabled: false })) as { webhook: { id: string }; secret: string };
    const path = `/accounts/acct_alice/webhooks/${made.webhook.id}`;
    const rolled = await api().post(`${path}/roll-secret`);
    assert.equal(rolled.status, 200);
    const secret = m(rolled).secret as string;
    assert.notEqual(secret, made.secret);
    const start = receiver.received.length;
    const sent = await api().post(`${path}/test`);
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    assert.deepEqual([m(sent).ok, m(sent).status], [true, 200]);
    const got = receiver.received[start]!;
    assert.equal(verify(secret, got).type, 'webhook.test');
    assert.throws(() => verify(made.secret, got), 'the old secret no longer signs');
    const again = await api().post(`${path}/test`);
    assert.equal(again.status, 429);
    assert.equal(m(again).code, 'rate_limited');
    gw.clock.advance(5_000);
    receiver.answers.push((r) => { r.statusCode = 500; r.end('no'); });
    const failed = await api().post(`${path}/test`);
    assert.deepEqual([failed.status, m(failed).ok, m(failed).status], [200, false, 500]);
    const log = m(await api().get(`${path}/deliveries`)).items as { type: string; ok: boolean; status: number }[];
    assert.deepEqual(log.map((a) => [a.type, a.ok, a.status]), [['webhook.test', false, 500], ['webhook.test', true, 200]]);
    const changed = m(await api().patch(path, { enabled: true, events: ['member.added'], description: 'later' }));
    assert.deepEqual([changed.enabled, changed.events, changed.description], [true, ['member.added'], 'later']);
    const audit = m(await api().get('/accounts/acct_alice/audit')).items as { action: string; target: { id: string } }[];
    assert.deepEqual(audit.filter((e) => e.target.id === made.webhook.id).map((e) => e.action), ['webhook.update', 'webhook.roll_secret', 'webhook.create']);
    assert.equal((await api().delete(path)).status, 200);
    assert.equal((await api().get(path)).status, 404);
    assert.equal((await api().get(`${path}/deliveries`)).status, 404);
  });

  await t.test('a roll with an overlap: both secrets sign until it ends, then the new one alone', async () => {
    const made = m(await api().post('/accounts/acct_alice/webhooks', { url: hookUrl })) as { webhook: { id: string }; secret: string };
    const path = `/accounts/acct_alice/webhooks/${made.webhook.id}`;
    // A minute: the receiver's check (standardwebhooks) refuses timestamps 5 minutes off its clock.
    const rolled = await api().post(`${path}/roll-secret`, { overlapSeconds: 60 });
    assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
    const { secret, webhook } = m(rolled) as { secret: string; webhook: { previousValidUntil: string } };
    assert.equal(Date.parse(webhook.previousValidUntil), gw.clock.now() + 60_000);
    const stored = (await gw.services.ownerStore.readAccount('acct_alice'))!.webhooks.find((w) => w.id === made.webhook.id)!;
    assert.match(stored.previousSecret!, /^v1\./, 'the replaced secret is kept sealed too');
    const sendAndGet = async () => {
      const start = receiver.received.length;
      assert.equal(m(await api().post(`${path}/test`)).ok, true);
      return receiver.received[start]!;
    };
    const during = await sendAndGet();
    assert.equal(String(during.headers['webhook-signature']).split(' ').length, 2, 'two signatures');
    assert.equal(verify(secret, during).type, 'webhook.test', 'the new secret verifies');
    assert.equal(verify(made.secret, during).type, 'webhook.test', 'the replaced one too, during the overlap');
    gw.clock.advance(60_001);
    const after = await sendAndGet();
    assert.equal(verify(secret, after).type, 'webhook.test');
    assert.throws(() => verify(made.secret, after), 'the replaced secret signs no more');
    // Its body is optional: none, or an empty one, is no overlap; a body of another type is a 415.
    const rollRaw = (headers: Record<string, string>, body?: string) => call(`${gw.url}/owner/v1${path}/roll-secret`, { method: 'POST', token: ADMIN_TOKEN, headers, ...(body === undefined ? {} : { body }) });
    assert.equal((await rollRaw({ 'content-type': 'application/json' }, '')).status, 200);
    assert.equal((await rollRaw({})).status, 200);
    const after2 = (await gw.services.ownerStore.readAccount('acct_alice'))!.webhooks.find((w) => w.id === made.webhook.id)!;
    assert.equal(after2.previousSecret, undefined, 'a roll without an overlap keeps no replaced secret');
    assert.equal((await rollRaw({ 'content-type': 'text/plain' }, 'overlapSeconds=60')).status, 415);
    assert.equal((await api().post(`${path}/roll-secret`, { overlapSeconds: -1 })).status, 400);
    assert.equal((await api().post(`${path}/roll-secret`, { overlapSeconds: 2_592_001 })).status, 400);
    assert.equal((await api().delete(path)).status, 200);
  });

  await t.test('another account\'s endpoint is a 404, and bad input a 4xx naming the field', async () => {
    const made = m(await api().post('/accounts/acct_alice/webhooks', { url: hookUrl })) as { webhook: { id: string } };
    const owner = gw.services.owner.webhooks!;
    await assert.rejects(owner.get(ownerActor(OWNER_B).caller, 'acct_alice', made.webhook.id), NotFound);
    await assert.rejects(owner.sendTest(ownerActor(OWNER_B), 'acct_alice', made.webhook.id), NotFound);
    assert.equal((await api().get(`/accounts/acct_bob/webhooks/${made.webhook.id}`)).status, 404);
    const bad: [unknown, string][] = [
      [{}, 'url'],
      [{ url: hookUrl, events: ['nope'] }, 'events'],
      [{ url: hookUrl, extra: 1 }, 'extra'],
      [{ url: 'x'.repeat(3000) }, 'url'],
      [{ url: 'not a url' }, 'url'],
      [{ url: 'https://user:pw@hooks.example.com/' }, 'url'],
      [{ url: hookUrl, enabled: 'yes' }, 'enabled'],
    ];
    for (const [body, field] of bad) {
      const res = await api().post('/accounts/acct_alice/webhooks', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(JSON.stringify(res.body), new RegExp(field));
    }
    const raw = await call(`${gw.url}/owner/v1/accounts/acct_alice/webhooks`, { method: 'POST', token: ADMIN_TOKEN, headers: { 'content-type': 'application/json' }, body: '{"url":' });
    assert.equal(raw.status, 400);
    const kept = m(await api().get('/accounts/acct_alice/webhooks')).items.length as number;
    for (let i = kept; i < 16; i++) assert.equal((await api().post('/accounts/acct_alice/webhooks', { url: `https://hooks.example.com/${i}` })).status, 201);
    assert.equal((await api().post('/accounts/acct_alice/webhooks', { url: 'https://hooks.example.com/17' })).status, 409);
  });

  await t.test('after a restart on the same data file: the endpoints, and their secrets still sign', async () => {
    const before = m(await api().get('/accounts/acct_alice/webhooks')).items as { id: string; url: string }[];
    const target = before.find((w) => w.url === hookUrl)!;
    await gw.close();
    gw = await startGateway(t, { overrides: settings(dataFile) });
    assert.deepEqual(m(await api().get('/accounts/acct_alice/webhooks')).items, before);
    const rolled = m(await api().post(`/accounts/acct_alice/webhooks/${target.id}/roll-secret`)).secret as string;
    await gw.close();
    gw = await startGateway(t, { overrides: settings(dataFile) });
    const start = receiver.received.length;
    assert.equal(m(await api().post(`/accounts/acct_alice/webhooks/${target.id}/test`)).ok, true);
    assert.equal(verify(rolled, receiver.received[start]!).type, 'webhook.test');
  });
});

test('by default only https to global addresses: loopback, private and metadata addresses refused', async (t) => {
  const strict = await startGateway(t, { overrides: { data: { file: ownerDataFile(t) }, owner: { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)] } } });
  for (const url of [hookUrl, 'https://127.0.0.1/', 'https://10.1.2.3/', 'https://169.254.169.254/latest', 'https://[::1]/', 'https://[::ffff:7f00:1]/', 'https://localhost/', 'http://hooks.example.com/']) {
    const res = await operator(strict).post('/accounts/acct_alice/webhooks', { url });
    assert.equal(res.status, 400, url);
    assert.match(m(res).description, /private or reserved|https/);
    assert.equal(m(res).field, 'url');
  }
  const ok = await operator(strict).post('/accounts/acct_alice/webhooks', { url: 'https://hooks.example.com/in' });
  assert.equal(ok.status, 201);
  assert.equal((await operator(strict).patch(`/accounts/acct_alice/webhooks/${m(ok).webhook.id}`, { url: 'https://192.168.0.1/' })).status, 400);
});
