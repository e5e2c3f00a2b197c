/**
 * The webhook building blocks on their own: signatures checked by the spec's own package
 * (standardwebhooks, an independent implementation), the SSRF rules, the event mapping, and
 * one delivery attempt against a receiver on 127.0.0.1 (allowed by the policy), refused when
 * the name resolves to loopback at delivery time.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { addressAllowed, checkWebhookUrl, resolveForDelivery, type WebhookNetworkPolicy } from '../../src/owner/webhook-address.js';
import { deliverWebhook } from '../../src/owner/webhook-delivery.js';
import { endpointWants, TEST_EVENT_TYPE, WEBHOOK_EVENT_TYPES, webhookEventOf } from '../../src/owner/webhook-events.js';
import { newWebhookSecret, signWebhook } from '../../src/owner/webhook-signing.js';

const STRICT: WebhookNetworkPolicy = { allowPrivateNetworks: false, allowCidrs: [], allowHttp: false };
const OPEN: WebhookNetworkPolicy = { allowPrivateNetworks: true, allowCidrs: [], allowHttp: true };

test('a signature verifies with the standardwebhooks package, and not once the body changes', () => {
  const secret = newWebhookSecret();
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const at = new Date();
  const body = JSON.stringify({ type: 'key.created', timestamp: at.toISOString(), data: {} });
  const headers = signWebhook(secret, 'msg_1', at, body);
  assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/);
  const wh = new Webhook(secret);
  assert.deepEqual(wh.verify(body, { ...headers }), JSON.parse(body));
  assert.throws(() => wh.verify(body.replace('key.created', 'key.reset'), { ...headers }));
  assert.throws(() => new Webhook(newWebhookSecret()).verify(body, { ...headers }), 'another secret does not verify');
});

test('literal addresses inside are refused, in every spelling', () => {
  for (const url of [
    'https://127.0.0.1/', 'https://10.1.2.3/', 'https://169.254.169.254/latest/meta-data', 'https://[::1]/',
    'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://2130706433/', 'https://0177.0.0.1/', 'https://0x7f.1/',
    'https://192.168.0.1/', 'https://172.16.5.5/', 'https://100.64.0.1/', 'https://[fd00:ec2::254]/', 'https://[fe80::1]/',
    'https://0.0.0.0/', 'https://[::]/', 'https://224.0.0.1/', 'https://localhost/', 'https://a.localhost/',
  ]) {
    assert.equal(checkWebhookUrl(url, STRICT), 'url points at a private or reserved address', url);
  }
  assert.equal(checkWebhookUrl('https://93.184.215.14/hook', STRICT), undefined);
  assert.equal(checkWebhookUrl('https://[2606:4700::1111]/hook', STRICT), undefined);
  assert.equal(checkWebhookUrl('https://hooks.example.com/in', STRICT), undefined);
});

test('form and scheme: https only unless allowed, no credentials, no fragment, not a relative URL', () => {
  assert.equal(checkWebhookUrl('http://hooks.example.com/', STRICT), 'url must use https');
  assert.equal(checkWebhookUrl('ftp://hooks.example.com/', OPEN), 'url must use https');
  assert.equal(checkWebhookUrl('https://u:p@hooks.example.com/', STRICT), 'url may not carry credentials');
  assert.equal(checkWebhookUrl('https://hooks.example.com/#x', STRICT), 'url may not carry a fragment');
  assert.equal(checkWebhookUrl('/hook', STRICT), 'url is not an absolute URL');
  assert.equal(checkWebhookUrl('http://127.0.0.1:9/', OPEN), undefined);
});

test('an allowed CIDR opens that range and no other', () => {
  const policy = { ...STRICT, allowCidrs: ['10.1.0.0/16', 'fd00::/8'] };
  assert.equal(addressAllowed('10.1.2.3', policy), true);
  assert.equal(addressAllowed('::ffff:10.1.2.3', policy), true);
  assert.equal(addressAllowed('fd00:ec2::254', policy), true);
  assert.equal(addressAllowed('10.2.0.1', policy), false);
  assert.equal(addressAllowed('127.0.0.1', policy), false);
});

test('at delivery time a name resolving inside is refused, even if one of its answers is outside', async () => {
  const url = new URL('https://rebind.example.com/hook');
  const loopback = await resolveForDelivery(url, STRICT, async () => [{ address: '127.0.0.1', family: 4 }]);
  assert.deepEqual(loopback, { ok: false, reason: 'the host name resolves to a private or reserved address' });
  const mixed = await resolveForDelivery(url, STRICT, async () => [{ address: '93.184.215.14', family: 4 }, { address: '::1', family: 6 }]);
  assert.equal(mixed.ok, false);
  const good = await resolveForDelivery(url, STRICT, async () => [{ address: '93.184.215.14', family: 4 }]);
  assert.deepEqual(good, { ok: true, address: '93.184.215.14', family: 4 });
  const none = await resolveForDelivery(url, STRICT, async () => { throw new Error('ENOTFOUND'); });
  assert.deepEqual(none, { ok: false, reason: 'the host name does not resolve' });
});

test('the mapping: audit actions to event types, endpoints filter by type', () => {
  const event = { id: 'evt_1', at: '2026-01-01T00:00:00.000Z', action: 'key.create', actor: { type: 'owner' as const, id: 'o1' }, target: { type: 'key', id: 'k1' } };
  assert.deepEqual(webhookEventOf('acc1', event), { type: 'key.created', timestamp: event.at, data: { accountId: 'acc1', auditEventId: 'evt_1', actor: event.actor, target: event.target } });
  assert.equal(webhookEventOf('acc1', { ...event, action: 'role.create' }), undefined);
  assert.equal(webhookEventOf('acc1', { ...event, action: 'key.leak_reported' })?.type, 'key.leak_reported');
  for (const type of ['key.created', 'key.reset', 'key.rolled', 'key.leak_reported', 'settings_token.created', 'settings_token.revoked', 'settings_token.leak_reported', 'member.added', 'member.removed', 'invite.accepted']) {
    assert.ok(WEBHOOK_EVENT_TYPES.includes(type), type);
  }
  assert.equal(endpointWants(['key.reset'], 'key.created'), false);
  assert.equal(endpointWants(['key.reset'], 'key.reset'), true);
  assert.equal(endpointWants([], 'member.added'), true);
  assert.equal(endpointWants(['key.reset'], TEST_EVENT_TYPE), true);
});

let receiver: ReturnType<typeof createServer>;
let base: string;
const received: { path: string | undefined; headers: IncomingMessage['headers']; body: string }[] = [];
let answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end('ok');

before(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});
after(() => {
  receiver.closeAllConnections();
  receiver.close();
});

test('a delivery reaches the receiver signed, and the receiver verifies it', async () => {
  const secret = newWebhookSecret();
  const body = JSON.stringify({ type: TEST_EVENT_TYPE, timestamp: new Date().toISOString(), data: {} });
  const attempt = await deliverWebhook({ url: `${base}/in`, secret, id: 'msg_ok', body, at: new Date() }, { policy: OPEN, timeoutMs: 5000 });
  assert.equal(attempt.ok, true);
  assert.equal(attempt.status, 200);
  const got = received.at(-1)!;
  assert.equal(got.body, body);
  assert.equal(got.headers['webhook-id'], 'msg_ok');
  new Webhook(secret).verify(got.body, got.headers as Record<string, string>);
});

test('a delivery by name connects to the checked address, with the name as Host', async () => {
  const port = (receiver.address() as AddressInfo).port;
  const attempt = await deliverWebhook(
    { url: `http://hooks.test:${port}/in`, secret: newWebhookSecret(), id: 'msg_host', body: '{}', at: new Date() },
    { policy: OPEN, timeoutMs: 5000, lookup: async () => [{ address: '127.0.0.1', family: 4 }] },
  );
  assert.equal(attempt.ok, true);
  assert.equal(received.at(-1)!.headers.host, `hooks.test:${port}`);
});

test('refused, failed, redirected and silent receivers: failed attempts with the reason, nothing sent to a refused address', async () => {
  const count = received.length;
  const strictHttp = { ...STRICT, allowHttp: true };
  const refused = await deliverWebhook({ url: `${base}/in`, secret: newWebhookSecret(), id: 'msg_r', body: '{}', at: new Date() }, { policy: strictHttp, timeoutMs: 5000 });
  assert.deepEqual([refused.ok, refused.error], [false, 'url points at a private or reserved address']);
  const rebound = await deliverWebhook(
    { url: `http://rebind.test:${(receiver.address() as AddressInfo).port}/in`, secret: newWebhookSecret(), id: 'msg_rb', body: '{}', at: new Date() },
    { policy: strictHttp, timeoutMs: 5000, lookup: async () => [{ address: '127.0.0.1', family: 4 }] },
  );
  assert.deepEqual([rebound.ok, rebound.error], [false, 'the host name resolves to a private or reserved address']);
  assert.equal(received.length, count, 'nothing reached the receiver');

  answer = (_req, res) => { res.statusCode = 500; res.end('x'.repeat(100_000)); };
  const failed = await deliverWebhook({ url: `${base}/in`, secret: newWebhookSecret(), id: 'msg_500', body: '{}', at: new Date() }, { policy: OPEN, timeoutMs: 5000 });
  assert.deepEqual([failed.ok, failed.status, failed.error], [false, 500, 'answered 500']);
  assert.ok(failed.body!.length <= 4096, 'the answer is read bounded');

  answer = (_req, res) => { res.writeHead(302, { location: `${base}/elsewhere` }); res.end(); };
  const redirected = await deliverWebhook({ url: `${base}/in`, secret: newWebhookSecret(), id: 'msg_302', body: '{}', at: new Date() }, { policy: OPEN, timeoutMs: 5000 });
  assert.deepEqual([redirected.ok, redirected.status], [false, 302]);
  assert.ok(!received.some((r) => r.path === '/elsewhere'), 'the redirect was not followed');

  answer = () => {}; // never answers
  const silent = await deliverWebhook({ url: `${base}/in`, secret: newWebhookSecret(), id: 'msg_t', body: '{}', at: new Date() }, { policy: OPEN, timeoutMs: 200 });
  assert.deepEqual([silent.ok, silent.error], [false, 'no answer within 200 ms']);
  answer = (_req, res) => res.end('ok');
});

test('the node:crypto verifier in docs/webhooks.md accepts a delivery and refuses a changed one', async () => {
  const { readFileSync } = await import('node:fs');
  const doc = readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
  const snippet = /```js\nimport \{ createHmac, timingSafeEqual \} from 'node:crypto';\n\n([\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(snippet !== undefined, 'the doc holds the verifier');
  const { createHmac, timingSafeEqual } = await import('node:crypto');
  const verify = new Function('createHmac', 'timingSafeEqual', `${snippet}\nreturn verify;`)(createHmac, timingSafeEqual) as (s: string, h: Record<string, string>, b: string) => boolean;
  const secret = newWebhookSecret();
  const body = '{"type":"webhook.test"}';
  const headers = { ...signWebhook(secret, 'msg_doc', new Date(), body) };
  assert.equal(verify(secret, headers, body), true);
  assert.equal(verify(secret, headers, body.replace('test', 'tost')), false);
  assert.equal(verify(newWebhookSecret(), headers, body), false);
  assert.equal(verify(secret, { ...signWebhook(secret, 'msg_doc', new Date(Date.now() - 3_600_000), body) }, body), false, 'stale');
});
