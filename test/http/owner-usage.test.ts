/**
 * GET /owner/v1/accounts/{accountId}/usage on real gateways (memory store; Redis in
 * test/redis/usage.test.ts): every call a route quota sees with an identity counts, for API
 * keys and API settings tokens alike, on own routes and proxied ones; a 429 counts as a
 * rate-limited call and not as a request; public routes, sign-ins and the owner API do not
 * count. The counts show once flushed (the test flushes through services, or waits for the
 * timer once), per 5-minute bucket on the gateway's manual clock. Access is the owner API's:
 * one 404 for another owner's account and a made-up one. What the recorder holds between flushes
 * grows with the keys calling, not with the calls. WebSocket handshakes count as one call each.
 * Each call counts once more by the class of the status it was answered with (a 429 is 4xx, a
 * switched WebSocket 1xx), and the series puts calls made in other hours and days (the manual
 * clock moved, no sleep) into their clock hour and UTC day.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { startBackend, type Handler } from '../helpers/backend.js';
import { ManualClock } from '../helpers/clock.js';
import { closedPort } from '../helpers/proxy.js';
import { openClient, startWsBackend, whenClosed } from '../helpers/ws-backend.js';
import { call, DEMO, show, signIn, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { accountWithOwner, anonymous, operator, signIn as ownerSignIn, startOwnerGateway, type Client } from '../helpers/owner.js';

const ACCOUNT = DEMO.alice.accountId;
const ADDRESS = `0x${'12'.repeat(20)}`;
/** Per key and route: 3 calls a minute (the account's own quota out of the way). */
const LIMITS = { mode: 'enforce', calls: { perAccount: [], perKey: [{ limit: 3, seconds: 60 }] } };

type Statuses = Record<'1xx' | '2xx' | '3xx' | '4xx' | '5xx', number>;
interface Counts { requests: number; rateLimited: number; statuses: Statuses }
interface KeyUsage extends Counts { keyId: string }
interface Usage { from: string; to: string; bucketSeconds: number; stepSeconds: number; enabled: boolean; items: KeyUsage[]; series: (Counts & { start: string })[] }

const NONE: Statuses = { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 };

/** A key's usage as the operation answers it: the status classes not named are 0. */
function counted(keyId: string, requests: number, rateLimited: number, statuses: Partial<Statuses>): KeyUsage {
  return { keyId, requests, rateLimited, statuses: { ...NONE, ...statuses } };
}

async function usage(client: Client, accountId: string, query = ''): Promise<Usage> {
  const res = await client.get(`/accounts/${accountId}/usage${query}`);
  assert.equal(res.status, 200, show(res));
  return res.body.message;
}

async function sign(gw: TestGateway, token: string): Promise<JsonResponse> {
  return call(`${gw.url}/api/sign?address=${ADDRESS}`, { token });
}

/** A settings token of the account, made by the operator: its bearer value and id. */
async function settingsToken(gw: TestGateway, accountId: string): Promise<{ token: string; id: string }> {
  const res = await operator(gw).send('POST', `/accounts/${accountId}/settings-tokens`, { name: 'usage test' });
  assert.equal(res.status, 201, show(res));
  return { token: res.body.message.token, id: res.body.message.settingsToken.id };
}

/** An owner of an account that already exists: added by the operator, the initial password changed. */
async function ownerOf(gw: TestGateway, accountId: string, email: string): Promise<Client> {
  const initial = 'an initial passphrase';
  const added = await operator(gw).send('POST', `/accounts/${accountId}/owners`, { email, initialPassword: initial });
  assert.equal(added.status, 201, show(added));
  const first = await ownerSignIn(gw, email, initial);
  const changed = await first.send('POST', '/session/password', { currentPassword: initial, newPassword: 'a passphrase of my own' });
  assert.equal(changed.status, 200, show(changed));
  return ownerSignIn(gw, email, 'a passphrase of my own');
}

test('per-key usage: requests and 429s of keys and settings tokens, on own and proxied routes, as the account\'s owners see them', async (t) => {
  const backend = await startBackend(t);
  const gw = await startOwnerGateway(t, {
    overrides: {
      limits: LIMITS,
      routes: [{ name: 'svc', prefix: '/svc', targets: [backend.url] }, { name: 'pub', prefix: '/pub', targets: [backend.url], auth: 'public' }],
    },
  });
  let alice = await ownerOf(gw, ACCOUNT, 'alice-owner@example.com');
  const { accessToken } = await signIn(gw, DEMO.alice);
  const stk = await settingsToken(gw, ACCOUNT);

  // Key A: 5 calls of /api/sign (3 admitted, 2 refused), 2 of /api/roles, 1 proxied.
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await sign(gw, accessToken)).status);
  assert.deepEqual(statuses.map((s) => s === 429), [false, false, false, true, true], `a 429 past the key's quota: ${statuses}`);
  for (let i = 0; i < 2; i++) assert.equal((await call(`${gw.url}/api/roles`, { token: accessToken })).status, 200);
  assert.equal((await call(`${gw.url}/svc/thing`, { token: accessToken })).status, 200);
  // The settings token: 4 calls of /api/sign, its own quota (3 admitted, 1 refused).
  const stkStatuses: number[] = [];
  for (let i = 0; i < 4; i++) stkStatuses.push((await sign(gw, stk.token)).status);
  assert.deepEqual(stkStatuses.map((s) => s === 429), [false, false, false, true]);
  // Not counted: a public route, a refused bearer, a sign-in, the owner API itself.
  assert.equal((await call(`${gw.url}/pub/thing`)).status, 200);
  assert.equal((await call(`${gw.url}/svc/thing`, { token: 'not-a-token' })).status, 401);
  await signIn(gw, DEMO.alice);
  // Bob's key counts for his account only.
  const bob = await signIn(gw, DEMO.bob);
  assert.equal((await call(`${gw.url}/api/roles`, { token: bob.accessToken })).status, 200);

  await t.test('nothing shows before the counts are flushed', async () => {
    assert.deepEqual((await usage(alice, ACCOUNT)).items, []);
  });

  await gw.services.usage!.flush();

  await t.test('after a flush: one row per key and settings token, by id, requests and 429s apart', async () => {
    const answer = await usage(alice, ACCOUNT);
    // /api/sign answers 404 for an address without a sign record, 429 past the quota: all 4xx.
    assert.deepEqual(answer.items, [
      counted(DEMO.alice.keyId, 3 + 2 + 1, 2, { '2xx': 2 + 1, '4xx': 3 + 2 }),
      counted(stk.id, 3, 1, { '4xx': 4 }),
    ].sort((a, b) => (a.keyId < b.keyId ? -1 : 1)));
    assert.equal(answer.enabled, true);
    assert.equal(answer.bucketSeconds, 300);
    const now = gw.clock.now();
    assert.equal(answer.to, new Date(now).toISOString());
    const from = Date.parse(answer.from);
    assert.equal(from % 300_000, 0, 'the window starts at a bucket\'s start');
    assert.ok(from <= now - 24 * 3_600_000 && from > now - 24 * 3_600_000 - 300_000, `from ${answer.from}: 24 hours back, to the bucket start`);
    assert.deepEqual((await usage(operator(gw), `acct_bob`)).items, [counted(DEMO.bob.keyId, 1, 0, { '2xx': 1 })]);
  });

  await t.test('another owner, and an owner on a made-up account: the same 404', async () => {
    const other = await accountWithOwner(gw, { accountId: 'acct_usage_other', email: 'other@example.com', password: 'another passphrase' });
    const foreign = await other.get(`/accounts/${ACCOUNT}/usage`);
    const madeUp = await other.get('/accounts/acct_made_up/usage');
    assert.equal(foreign.status, 404, show(foreign));
    assert.deepEqual(foreign.body, madeUp.body);
    assert.equal(foreign.body.message.code, 'not_found');
    assert.deepEqual((await usage(other, 'acct_usage_other')).items, []);
    assert.equal((await anonymous(gw).get(`/accounts/${ACCOUNT}/usage`)).status, 401);
    // A deleted account is a 404 to the operator too.
    assert.equal((await operator(gw).send('DELETE', '/accounts/acct_usage_other')).status, 200);
    assert.equal((await operator(gw).get('/accounts/acct_usage_other/usage')).status, 404);
  });

  await t.test('hours: 1 to 24 in plain digits, else 400 naming the field', async () => {
    for (const hours of ['0', '25', '100', '-1', '1.5', '1e1', '0x10', 'abc', '']) {
      const res = await alice.get(`/accounts/${ACCOUNT}/usage?hours=${encodeURIComponent(hours)}`);
      assert.equal(res.status, 400, `hours=${hours}: ${show(res)}`);
      assert.equal(res.body.message.code, 'invalid_request');
      assert.equal(res.body.message.field, 'hours', `hours=${hours}`);
    }
    const twice = await alice.get(`/accounts/${ACCOUNT}/usage?hours=1&hours=2`);
    assert.equal(twice.status, 400, show(twice));
    for (const hours of ['1', '24', '09']) assert.equal((await alice.get(`/accounts/${ACCOUNT}/usage?hours=${hours}`)).status, 200, `hours=${hours}`);
  });

  await t.test('the operator sees the same; the window moves with the clock, by whole buckets', async () => {
    assert.deepEqual(await usage(operator(gw), ACCOUNT, '?hours=24').then((u) => u.items), (await usage(alice, ACCOUNT)).items);
    gw.clock.advance(2 * 3_600_000);
    // Two hours on: the access token and the owner's session have ended; new ones.
    const later = await signIn(gw, DEMO.alice);
    alice = await ownerSignIn(gw, 'alice-owner@example.com', 'a passphrase of my own');
    assert.equal((await sign(gw, later.accessToken)).status, 404, 'a new minute: the quota is back (and no record for the address)');
    await gw.services.usage!.flush();
    assert.deepEqual((await usage(alice, ACCOUNT, '?hours=1')).items, [counted(DEMO.alice.keyId, 1, 0, { '4xx': 1 })], 'the last hour: only the new call');
    const day = (await usage(alice, ACCOUNT, '?hours=3')).items;
    assert.deepEqual(day.find((u) => u.keyId === DEMO.alice.keyId), counted(DEMO.alice.keyId, 7, 2, { '2xx': 3, '4xx': 6 }));
    const hour = await usage(alice, ACCOUNT, '?hours=1');
    assert.equal(Date.parse(hour.to) - Date.parse(hour.from) >= 3_600_000, true, 'a window covers at least its hours');
    assert.equal(Date.parse(hour.to) - Date.parse(hour.from) < 3_600_000 + 300_000, true, 'and less than a bucket more');
  });
});

test('a WebSocket handshake is one call of its key, answered 1xx', async (t) => {
  const backend = await startWsBackend(t);
  const gw = await startOwnerGateway(t, { overrides: { routes: [{ prefix: '/ws', targets: [backend.url], websocket: true }] } });
  const { accessToken } = await signIn(gw, DEMO.alice);
  const ws = await openClient(gw.url, '/ws/1', { token: accessToken });
  const closed = whenClosed(ws);
  ws.close();
  await closed;
  await gw.services.usage!.flush();
  assert.deepEqual((await usage(operator(gw), ACCOUNT)).items, [counted(DEMO.alice.keyId, 1, 0, { '1xx': 1 })]);
});

test('limits.mode "off": calls are still counted (counting is no rate limit)', async (t) => {
  const gw = await startOwnerGateway(t);
  assert.equal(gw.services.config.limits.mode, 'off');
  const { accessToken } = await signIn(gw, DEMO.alice);
  for (let i = 0; i < 4; i++) assert.equal((await sign(gw, accessToken)).status, 404, 'no sign record for this address: still a call');
  await gw.services.usage!.flush();
  assert.deepEqual((await usage(operator(gw), ACCOUNT)).items, [counted(DEMO.alice.keyId, 4, 0, { '4xx': 4 })]);
});

test('usage.enabled false: nothing is counted, and the operation answers an empty window with enabled false', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { usage: { enabled: false } } });
  assert.equal(gw.services.usage, undefined);
  const { accessToken } = await signIn(gw, DEMO.alice);
  assert.equal((await sign(gw, accessToken)).status, 404);
  const answer = await usage(operator(gw), ACCOUNT);
  assert.equal(answer.enabled, false);
  assert.deepEqual(answer.items, []);
  assert.equal(answer.bucketSeconds, 300);
  assert.equal(answer.series.length, 25, 'every hour of the window, each at 0');
  assert.ok(answer.series.every((step) => step.requests === 0 && step.rateLimited === 0 && JSON.stringify(step.statuses) === JSON.stringify(NONE)));
  assert.equal((await operator(gw).get('/accounts/acct_made_up/usage')).status, 404, 'access is checked all the same');
});

test('the recorder flushes by itself every usage.flushIntervalMs', async (t) => {
  const gw = await startOwnerGateway(t, { overrides: { usage: { flushIntervalMs: 100 } } });
  const { accessToken } = await signIn(gw, DEMO.alice);
  assert.equal((await call(`${gw.url}/api/roles`, { token: accessToken })).status, 200);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const items = (await usage(operator(gw), ACCOUNT)).items;
    if (items.length > 0) {
      assert.deepEqual(items, [counted(DEMO.alice.keyId, 1, 0, { '2xx': 1 })]);
      break;
    }
    assert.ok(Date.now() < deadline, 'the timer flushed within 10 s');
    await sleep(50);
  }
  assert.equal(gw.services.usage!.size, 0, 'nothing held once flushed');
});

test('a flood of calls: the recorder holds one entry per key calling, not per call', async (t) => {
  const gw = await startOwnerGateway(t);
  const made = await operator(gw).send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'second' });
  assert.equal(made.status, 201, show(made));
  const second = await signIn(gw, { apiKey: made.body.message.key.apiKey, secret: made.body.message.apiSecret });
  const first = await signIn(gw, DEMO.alice);
  const recorder = gw.services.usage!;
  let largest = 0;
  for (let round = 0; round < 20; round++) {
    await Promise.all(Array.from({ length: 20 }, (_, i) => call(`${gw.url}/api/roles`, { token: (i % 2 === 0 ? first : second).accessToken })));
    largest = Math.max(largest, recorder.size);
  }
  assert.equal(largest, 2, 'two keys: two entries, after 400 calls');
  await recorder.flush();
  assert.equal(recorder.size, 0);
  const items = (await usage(operator(gw), ACCOUNT)).items;
  assert.equal(items.reduce((n, u) => n + u.requests, 0), 400, 'every call counted');
  assert.equal(items.length, 2);
});

/** Answers every request with the status its path ends with (`/svc/status/503`), or 200. */
const statusBackend: Handler = (req, res) => {
  const status = Number(/\/status\/([1-5][0-9][0-9])$/.exec(req.url ?? '')?.[1] ?? 200);
  res.writeHead(status).end();
};

test('series: calls in different hours and days, counted by the class of the status the client got, per hour and per UTC day, for every key or one', async (t) => {
  const backend = await startBackend(t, statusBackend);
  // 10:20 UTC on a Tuesday; the clock moves, the test never sleeps.
  const clock = new ManualClock(Date.UTC(2026, 2, 10, 10, 20));
  const routes = [{ name: 'svc', prefix: '/svc', targets: [backend.url] }, { name: 'gone', prefix: '/gone', targets: [`http://127.0.0.1:${await closedPort()}`] }];
  const gw = await startOwnerGateway(t, { clock, overrides: { routes } });
  const made = await operator(gw).send('POST', `/accounts/${ACCOUNT}/keys`, { name: 'second' });
  assert.equal(made.status, 201, show(made));
  const second = { apiKey: made.body.message.key.apiKey as string, secret: made.body.message.apiSecret as string };
  const secondId = made.body.message.key.id as string;
  /** Calls `paths` (under /svc unless rooted elsewhere) with a fresh token of `key` (the clock may have outrun the last one). */
  const calls = async (key: { apiKey: string; secret: string }, paths: string[]): Promise<number[]> => {
    const { accessToken } = await signIn(gw, key);
    const seen: number[] = [];
    for (const path of paths) seen.push((await call(`${gw.url}${path.startsWith('/gone') ? '' : '/svc'}${path}`, { token: accessToken })).status);
    return seen;
  };

  // Two days ago, 10:20: alice's key a 200, a 204 and a 304 (a redirect the test's fetch would follow).
  assert.deepEqual(await calls(DEMO.alice, ['/a', '/status/204', '/status/304']), [200, 204, 304]);
  clock.advance(2 * 86_400_000);
  // Today, 10:20: alice's key a 404, the second key a 503 (both the backend's) and a 502 (no backend listening).
  assert.deepEqual(await calls(DEMO.alice, ['/status/404']), [404]);
  assert.deepEqual(await calls(second, ['/status/503', '/gone/x']), [503, 502]);
  clock.advance(3_600_000);
  // Today, 11:20: alice's key a 200.
  assert.deepEqual(await calls(DEMO.alice, ['/b']), [200]);
  await gw.services.usage!.flush();

  await t.test('hours: one step per clock hour, the first from the window\'s start, the last the hour now is in', async () => {
    const answer = await usage(operator(gw), ACCOUNT, '?hours=24');
    assert.equal(answer.stepSeconds, 3600);
    assert.equal(answer.bucketSeconds, 300);
    assert.equal(answer.from, '2026-03-11T11:20:00.000Z', 'the bucket 24 hours ago');
    assert.equal(answer.to, '2026-03-12T11:20:00.000Z');
    assert.equal(answer.series.length, 25);
    assert.deepEqual(answer.series.map((s) => s.start).slice(0, 2), ['2026-03-11T11:20:00.000Z', '2026-03-11T12:00:00.000Z']);
    assert.equal(answer.series.at(-1)!.start, '2026-03-12T11:00:00.000Z');
    assert.deepEqual(answer.series.at(-2), { start: '2026-03-12T10:00:00.000Z', requests: 3, rateLimited: 0, statuses: { ...NONE, '4xx': 1, '5xx': 2 } });
    assert.deepEqual(answer.series.at(-1), { start: '2026-03-12T11:00:00.000Z', requests: 1, rateLimited: 0, statuses: { ...NONE, '2xx': 1 } });
    assert.equal(answer.series.slice(0, -2).reduce((n, s) => n + s.requests, 0), 0, 'nothing in the hours before');
    assert.deepEqual(answer.items, [counted(DEMO.alice.keyId, 2, 0, { '2xx': 1, '4xx': 1 }), counted(secondId, 2, 0, { '5xx': 2 })]
      .sort((a, b) => (a.keyId < b.keyId ? -1 : 1)), 'the two days ago are outside 24 hours');
  });

  await t.test('keyId: one key\'s items and series', async () => {
    const answer = await usage(operator(gw), ACCOUNT, `?hours=24&keyId=${secondId}`);
    assert.deepEqual(answer.items, [counted(secondId, 2, 0, { '5xx': 2 })]);
    assert.deepEqual(answer.series.map((s) => s.requests), [...Array<number>(23).fill(0), 2, 0]);
    assert.deepEqual((await usage(operator(gw), ACCOUNT, '?days=30&keyId=key_never_called')).items, []);
  });

  await t.test('days: one step per UTC day, `days` + 1 of them, today last; the owner sees what the operator sees', async () => {
    const alice = await accountWithOwner(gw, { accountId: 'acct_series', email: 'series@example.com', password: 'a series passphrase' });
    assert.equal((await alice.get(`/accounts/${ACCOUNT}/usage?days=30`)).status, 404, 'another account\'s: the same 404');
    const answer = await usage(operator(gw), ACCOUNT, '?days=30');
    assert.equal(answer.stepSeconds, 86_400);
    assert.equal(answer.bucketSeconds, 86_400);
    assert.equal(answer.from, '2026-02-10T00:00:00.000Z');
    assert.equal(answer.series.length, 31);
    assert.equal(answer.series.at(-1)!.start, '2026-03-12T00:00:00.000Z');
    assert.deepEqual(answer.series.at(-3), { start: '2026-03-10T00:00:00.000Z', requests: 3, rateLimited: 0, statuses: { ...NONE, '2xx': 2, '3xx': 1 } });
    assert.equal(answer.series.at(-2)!.requests, 0);
    assert.deepEqual(answer.series.at(-1), { start: '2026-03-12T00:00:00.000Z', requests: 4, rateLimited: 0, statuses: { ...NONE, '2xx': 1, '4xx': 1, '5xx': 2 } });
    assert.deepEqual(answer.items, [counted(DEMO.alice.keyId, 5, 0, { '2xx': 3, '3xx': 1, '4xx': 1 }), counted(secondId, 2, 0, { '5xx': 2 })]
      .sort((a, b) => (a.keyId < b.keyId ? -1 : 1)));
    const yesterday = await usage(operator(gw), ACCOUNT, '?days=1');
    assert.deepEqual(yesterday.series.map((s) => [s.start, s.requests]), [['2026-03-11T00:00:00.000Z', 0], ['2026-03-12T00:00:00.000Z', 4]]);
  });

  await t.test('28 days on, the first day is the window\'s first; 3 days more, it is out of it', async () => {
    clock.advance(28 * 86_400_000);
    const month = await usage(operator(gw), ACCOUNT, '?days=30');
    assert.equal(month.from, '2026-03-10T00:00:00.000Z');
    assert.equal(month.series[0]!.requests, 3, 'the window\'s first day');
    assert.equal(month.items.reduce((n, u) => n + u.requests, 0), 7);
    clock.advance(3 * 86_400_000);
    assert.equal((await usage(operator(gw), ACCOUNT, '?days=30')).items.reduce((n, u) => n + u.requests, 0), 0);
  });

  await t.test('days 1 to 30 in plain digits, not with hours; keyId an id; else 400 naming the field', async () => {
    for (const [query, field] of [['days=0', 'days'], ['days=31', 'days'], ['days=1e1', 'days'], ['days=7&hours=3', 'days'], ['keyId=%20', 'keyId'], ['keyId=a%2Fb', 'keyId']] as const) {
      const res = await operator(gw).get(`/accounts/${ACCOUNT}/usage?${query}`);
      assert.equal(res.status, 400, `${query}: ${show(res)}`);
      assert.equal(res.body.message.code, 'invalid_request');
      assert.equal(res.body.message.field, field, query);
    }
  });
});
