/**
 * The client against a hostile or broken gateway: a plain HTTP server that answers as it likes
 * (redirects to another origin, endless bodies, envelopes of the wrong shape), a second server
 * standing for the attacker's origin that records whatever reaches it, and storage hooks that
 * return garbage. What must hold: no credential (secret hash, refresh token, password, bearer)
 * reaches another origin or an error's text, nothing grows without bound, nothing loops.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import {
  GatewayClient, GatewayError, UnexpectedResponseError, type TokenPair, type TokenStorage,
} from '../../packages/client/src/index.js';
import { OwnerClient } from '../../packages/client/src/owner/index.js';
import { sha256Hex } from '../helpers/gateway.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

interface Server {
  url: string;
  seen: Seen[];
}

type Answer = (req: IncomingMessage, res: ServerResponse, seen: Seen) => unknown;

async function serve(t: TestContext, answer: Answer): Promise<Server> {
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const record = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() };
    seen.push(record);
    await answer(req, res, record);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** A JWT-shaped token (unsigned: the client only reads its payload). */
function jwt(payload: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'HS256' })}.${part(payload)}.sig`;
}

function pair(n: number): TokenPair {
  const now = Math.floor(Date.now() / 1000);
  return { accessToken: jwt({ iat: now, exp: now + 900, n }), refreshToken: `refresh-${n}` };
}

const SECRET = 'the-plain-secret';
const key = { apiKey: 'key-1', apiSecret: SECRET };

/** Every string an error carries: message, description, and its causes' messages. */
function textOf(err: unknown): string {
  const parts: string[] = [];
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    parts.push(String((e as { message?: unknown }).message), String((e as { description?: unknown }).description), String(e));
  }
  return parts.join('\n');
}

test('a sign-in answered with a redirect to another origin sends the secret hash nowhere else', async (t) => {
  const evil = await serve(t, (_req, res) => json(res, 200, { success: true, message: pair(1) }));
  const gateway = await serve(t, (_req, res) => res.writeHead(307, { location: `${evil.url}/api/signin` }).end());
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false });
  await assert.rejects(client.signIn(), UnexpectedResponseError);
  assert.equal(evil.seen.length, 0, `the other origin received ${JSON.stringify(evil.seen)}`);
});

test('a refresh answered with a redirect to another origin sends the refresh token nowhere else', async (t) => {
  const evil = await serve(t, (_req, res) => json(res, 200, { success: true, message: pair(2) }));
  const gateway = await serve(t, (_req, res) => res.writeHead(308, { location: `${evil.url}/api/refresh` }).end());
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: { refreshToken: 'refresh-secret' }, retry: false });
  await assert.rejects(client.signIn(), GatewayError);
  assert.equal(evil.seen.length, 0, `the other origin received ${JSON.stringify(evil.seen)}`);
});

test('an owner sign-in answered with a redirect to another origin sends the password nowhere else', async (t) => {
  const evil = await serve(t, (_req, res) => json(res, 200, { success: true, message: { csrfToken: 'c' } }, { 'set-cookie': 'gw_session=stolen' }));
  const gateway = await serve(t, (_req, res) => res.writeHead(307, { location: `${evil.url}/owner/v1/session` }).end());
  const owner = new OwnerClient({ baseUrl: gateway.url, email: 'o@example.com', password: 'hunter2-password', retry: false });
  await assert.rejects(owner.getSession(), GatewayError);
  assert.equal(evil.seen.length, 0, `the other origin received ${JSON.stringify(evil.seen)}`);
});

test('client.fetch: a backend redirecting to another origin does not get the bearer token there (the platform drops it)', async (t) => {
  const evil = await serve(t, (_req, res) => res.writeHead(200).end('evil'));
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/signin') return json(res, 200, { success: true, message: pair(3) });
    const status = req.url === '/r302' ? 302 : 307;
    res.writeHead(status, { location: `${evil.url}/x` }).end();
  });
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key });
  for (const path of ['/r302', '/r307']) {
    const res = await client.fetch(path, path === '/r307' ? { method: 'PUT', body: 'data' } : {});
    await res.text();
  }
  assert.equal(evil.seen.length, 2);
  for (const seen of evil.seen) assert.equal(seen.headers.authorization, undefined);
});

test('a success envelope whose pair is of the wrong shape is an UnexpectedResponseError, not a TypeError', async (t) => {
  for (const message of [{ accessToken: 123, refreshToken: 'r' }, { accessToken: 'a.b.c' }, { accessToken: 'ok', refreshToken: 'bad\nvalue' }, []]) {
    const gateway = await serve(t, (_req, res) => json(res, 200, { success: true, message }));
    const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false });
    await assert.rejects(client.signIn(), UnexpectedResponseError, JSON.stringify(message));
  }
});

test('a storage hook returning garbage is ignored: the client signs in', async (t) => {
  for (const stored of [null, 'garbage', 42, { accessToken: 5, refreshToken: {} }, { accessToken: 'x\ny', refreshToken: 'r\r\nz' }]) {
    let signIns = 0;
    const gateway = await serve(t, (req, res) => {
      if (req.url === '/api/signin') {
        signIns++;
        return json(res, 200, { success: true, message: pair(4) });
      }
      return json(res, 200, { success: true, message: { pages: '1', items: [], total: 0 } });
    });
    const storage: TokenStorage = { load: () => stored as unknown as TokenPair, save: () => {} };
    const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, storage, retry: false });
    const page = await client.roles().catch((err: unknown) => assert.fail(`stored ${JSON.stringify(stored)}: ${textOf(err)}`));
    assert.equal(page.total, 0);
    assert.equal(signIns, 1);
  }
});

test('a token that cannot go in a header never ends up in an error message', async (t) => {
  const gateway = await serve(t, (_req, res) => json(res, 200, { success: true, message: { pages: '1', items: [], total: 0 } }));
  const leaked = 'secret-access-token\nx';
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: { refreshToken: 'refresh-x', accessToken: leaked }, retry: false });
  const err = await client.roles().then(() => undefined, (e: unknown) => e);
  if (err !== undefined) assert.ok(!textOf(err).includes('secret-access-token'), textOf(err));
});

for (const drop of ['forget', 'reset'] as const) {
  test(`${drop}() while a sign-in is under way: the pair it brings is not kept afterwards`, async (t) => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let signIns = 0;
    const gateway = await serve(t, async (req, res) => {
      if (req.url === '/api/signin') {
        signIns++;
        if (signIns === 1) await held;
        return json(res, 200, { success: true, message: pair(signIns) });
      }
      if (req.url === '/api/reset') return json(res, 200, { success: true, message: { scope: 'key', accountId: 1, keyId: 1, resetAt: new Date().toISOString() } });
      return json(res, 200, { success: true, message: { pages: '1', items: [], total: 0 } });
    });
    const saves: (TokenPair | undefined)[] = [];
    const storage: TokenStorage = { load: () => undefined, save: (p) => { saves.push(p); } };
    const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, storage, retry: false });
    const first = client.roles().catch(() => undefined);
    while (signIns === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    await (drop === 'forget' ? client.forget() : client.reset());
    release();
    await first;
    assert.equal(saves.at(-1), undefined, `saved after ${drop}(): ${JSON.stringify(saves)}`);
    await client.roles();
    assert.equal(signIns, 2, `the call after ${drop}() signs in again`);
  });
}

test('an endless answer to a JSON call is cut off at a bound, not read until the time limit', async (t) => {
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/signin') return json(res, 200, { success: true, message: pair(5) });
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(1 << 16, 0x20);
    const pump = () => { while (res.write(chunk)); };
    res.on('drain', pump);
    pump();
    req.socket.on('close', () => res.removeListener('drain', pump));
  });
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false, timeoutMs: 4000 });
  await assert.rejects(client.roles(), (err: unknown) => {
    assert.ok(err instanceof UnexpectedResponseError, textOf(err));
    return true;
  });
});

test('allRoles against a gateway whose pages field is garbage ends instead of looping', async (t) => {
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/signin') return json(res, 200, { success: true, message: pair(6) });
    return json(res, 200, { success: true, message: { pages: 'lots', total: 2, items: [
      { id: 1, slug: 'a', name: 'a', description: '', public: 1 }, { id: 2, slug: 'b', name: 'b', description: '', public: 0 },
    ] } });
  });
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false });
  let count = 0;
  try {
    for await (const _role of client.allRoles({ limit: 2 })) {
      if (++count > 50) break;
    }
  } catch (err) {
    assert.ok(err instanceof UnexpectedResponseError, textOf(err));
  }
  assert.ok(count <= 50, 'allRoles kept going');
});

test('no error on the sign-in and refresh paths carries the secret, its hash or the refresh token', async (t) => {
  const hash = await sha256Hex(SECRET);
  const answers: Answer[] = [
    (_req, res) => json(res, 401, { success: false, message: { code: 'invalid_credentials', description: 'nope' } }),
    (_req, res) => json(res, 503, { success: false, message: { code: 'store_unavailable', description: 'down', requestId: 'r' } }, { 'retry-after': '1' }),
    (_req, res) => res.writeHead(500, { 'content-type': 'text/html' }).end(`<p>${hash}</p>`),
    (req, res) => req.socket.destroy(),
    (_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.write('{"success":true'); setTimeout(() => res.socket?.destroy(), 20); },
  ];
  for (const answer of answers) {
    const gateway = await serve(t, answer);
    for (const credentials of [key, { refreshToken: 'refresh-token-secret' }]) {
      const client = new GatewayClient({ baseUrl: gateway.url, credentials, retry: false, timeoutMs: 2000 });
      const err = await client.signIn().then(() => assert.fail('signed in'), (e: unknown) => e);
      assert.ok(err instanceof GatewayError, textOf(err));
      const text = textOf(err);
      for (const secret of [SECRET, hash, 'refresh-token-secret']) assert.ok(!text.includes(secret), text);
    }
  }
});

test('client.fetch: odd inputs either reach the gateway under its base path or are refused; nothing reaches another origin or path', async (t) => {
  const evil = await serve(t, (_req, res) => res.writeHead(200).end('evil'));
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/gw/api/signin') return json(res, 200, { success: true, message: pair(7) });
    res.writeHead(200).end('gateway');
  });
  const evilHost = new URL(evil.url).host;
  const client = new GatewayClient({ baseUrl: `${gateway.url}/gw/`, credentials: key, retry: false });
  const inputs = [
    `//${evilHost}/x`, `https:${evilHost}/x`, `http:${evilHost}/x`, `\\\\${evilHost}/x`, `/\\${evilHost}/x`, ` ${evil.url}/x`,
    `HTTP://${evilHost}/x`, `http:/${evilHost}/x`, '../admin', '/../admin', '%2e%2e/admin', '.%2E/admin', `${gateway.url}/admin`, `${gateway.url}/gw/../admin`,
    new URL('/admin', gateway.url), new Request(`${gateway.url}/admin`), new Request(`${evil.url}/x`),
  ];
  for (const input of inputs) {
    const res = await client.fetch(input).catch((err: unknown) => err);
    if (res instanceof Response) {
      await res.text();
      continue;
    }
    assert.ok(res instanceof GatewayError && res.code === 'foreign_origin', `${String(input)}: ${textOf(res)}`);
  }
  assert.equal(evil.seen.length, 0, JSON.stringify(evil.seen.map((s) => s.url)));
  const bearers = gateway.seen.filter((s) => s.headers.authorization !== undefined);
  for (const seen of bearers) assert.ok(seen.url.startsWith('/gw/'), `the bearer token went to ${seen.url}`);
});

test('Retry-After that is neither delay-seconds nor an HTTP date is no Retry-After (not "retry at once")', async () => {
  const { parseRetryAfter } = await import('../../packages/client/src/rate-limit.js');
  for (const value of ['-5', '+10', '10.5', '-1', '1e12', 'garbage', '2 days']) assert.equal(parseRetryAfter(value), undefined, value);
  assert.equal(parseRetryAfter('7'.padStart(3, ' ')), 7000);
  assert.equal(parseRetryAfter(new Date(Date.now() + 5000).toUTCString()) !== undefined, true);
  assert.equal(parseRetryAfter('Thu, 01 Jan 1970 00:00:00 GMT'), 0);
});

/** A fake gateway whose sign-ins wait for `release()`; counts sign-ins and refreshes. */
async function slowGateway(t: TestContext, answerSignIn?: (n: number) => TokenPair) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => { release = resolve; });
  const counts = { signIns: 0, refreshes: 0 };
  const gateway = await serve(t, async (req, res, seen) => {
    if (req.url === '/api/signin') {
      counts.signIns++;
      await held;
      return json(res, 200, { success: true, message: (answerSignIn ?? pair)(counts.signIns) });
    }
    if (req.url === '/api/refresh') {
      counts.refreshes++;
      return json(res, 401, { success: false, message: { code: 'invalid_grant', description: 'dead' } });
    }
    return json(res, 200, { success: true, message: { pages: '1', items: [], total: 0, bearer: seen.headers.authorization } });
  });
  return { url: gateway.url, counts, release: () => release() };
}

test('one caller aborting while others wait for the same sign-in: the others still get through, on one sign-in', async (t) => {
  const gateway = await slowGateway(t);
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false });
  const controller = new AbortController();
  const aborted = client.roles({}, { signal: controller.signal });
  const others = [client.roles(), client.roles(), client.sign('0x52908400098527886E0F7030069857D2E4169EE7')];
  while (gateway.counts.signIns === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  controller.abort();
  await assert.rejects(aborted, { name: 'AbortError' });
  gateway.release();
  const answers = await Promise.all(others);
  assert.equal(answers.length, 3);
  assert.equal(gateway.counts.signIns, 1);
});

test('a storage hook whose save throws does not fail the call: the pair is held in memory', async (t) => {
  const gateway = await slowGateway(t);
  gateway.release();
  let saves = 0;
  const storage: TokenStorage = { load: () => undefined, save: () => { saves++; throw new Error('QuotaExceededError'); } };
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, storage, retry: false });
  const page = await client.roles().catch((err: unknown) => assert.fail(textOf(err)));
  assert.equal(page.total, 0);
  await client.roles();
  assert.equal(gateway.counts.signIns, 1);
  assert.ok(saves >= 1);
});

test('a session that ends with a throwing storage and a throwing onSessionExpired still ends in the AuthenticationError', async (t) => {
  const gateway = await slowGateway(t);
  gateway.release();
  let told = 0;
  const storage: TokenStorage = { load: () => undefined, save: () => { throw new Error('storage broken'); } };
  const client = new GatewayClient({
    baseUrl: gateway.url, credentials: { refreshToken: 'refresh-dead' }, storage, retry: false,
    onSessionExpired: () => { told++; throw new Error('app bug'); },
  });
  await assert.rejects(client.roles(), (err: unknown) => {
    assert.equal((err as GatewayError).code, 'invalid_grant', textOf(err));
    return true;
  });
  assert.equal(told, 1);
  assert.equal(gateway.counts.refreshes, 1);
});

test('a throwing storage save with a token that is not a JWT does not fail the call either', async (t) => {
  const gateway = await slowGateway(t, (n) => ({ accessToken: `opaque-${n}`, refreshToken: `refresh-${n}` }));
  gateway.release();
  const storage: TokenStorage = { load: () => undefined, save: () => { throw new Error('QuotaExceededError'); } };
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, storage, retry: false });
  await client.roles().catch((err: unknown) => assert.fail(textOf(err)));
  await client.roles();
  assert.equal(gateway.counts.signIns, 1);
});

test('a gateway that never answers, or trickles its body, ends in a TimeoutError at the call time limit', async (t) => {
  const silent = await serve(t, () => { /* never answers */ });
  const trickle = await serve(t, (req, res) => {
    if (req.url === '/api/signin') return json(res, 200, { success: true, message: pair(8) });
    res.writeHead(200, { 'content-type': 'application/json' });
    const timer = setInterval(() => res.write(' '), 50);
    req.socket.on('close', () => clearInterval(timer));
  });
  for (const url of [silent.url, trickle.url]) {
    const client = new GatewayClient({ baseUrl: url, credentials: key, retry: false });
    await assert.rejects(client.roles({}, { timeoutMs: 400 }), { name: 'TimeoutError' }, url);
    if (url === silent.url) await assert.rejects(client.fetch('/x', { timeoutMs: 400 }), { name: 'TimeoutError' }, url);
  }
  // client.fetch's limit ends with the answer's head (documented): the body is the caller's to read or cancel.
  const client = new GatewayClient({ baseUrl: trickle.url, credentials: key, retry: false });
  const controller = new AbortController();
  // A limit the sign-in and the head fit in even on a loaded machine (400 ms did not, in CI).
  const res = await client.fetch('/x', { timeoutMs: 10_000, signal: controller.signal });
  controller.abort();
  await assert.rejects(res.text());
});

test('a refresh answered 503 for ever is given up after the bounded retries', async (t) => {
  let refreshes = 0;
  const gateway = await serve(t, (_req, res) => {
    refreshes++;
    json(res, 503, { success: false, message: { code: 'store_unavailable', description: 'down' } }, { 'retry-after': '0' });
  });
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: { refreshToken: 'refresh-1' } });
  await assert.rejects(client.roles(), { name: 'ServerError' });
  assert.equal(refreshes, 3, 'the first try and two retries');
});

test('a gateway refusing every token with 401 invalid_token: one renewal, one replay, then the error; never a loop', async (t) => {
  const counts = { renewals: 0, roles: 0, fetches: 0 };
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/signin' || req.url === '/api/refresh') {
      counts.renewals++;
      return json(res, 200, { success: true, message: pair(counts.renewals) });
    }
    if (req.url?.startsWith('/api/roles')) counts.roles++;
    else counts.fetches++;
    json(res, 401, { success: false, message: { code: 'invalid_token', description: 'no' } }, { 'www-authenticate': 'Bearer error="invalid_token"' });
  });
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key });
  await assert.rejects(client.roles(), { name: 'AuthenticationError' });
  assert.deepEqual(counts, { renewals: 2, roles: 2, fetches: 0 });
  const res = await client.fetch('/svc/x');
  assert.equal(res.status, 401);
  await res.text();
  assert.deepEqual(counts, { renewals: 3, roles: 2, fetches: 2 });
});

test('access tokens with odd lifetimes (exp before iat, no exp, exp far off, not a JWT) sign in once, not at every call', async (t) => {
  const now = Math.floor(Date.now() / 1000);
  for (const accessToken of [jwt({ iat: now, exp: now - 10 }), jwt({ iat: now }), jwt({ iat: now, exp: 1e308 }), jwt({ iat: -1e308, exp: 1e308 }), 'opaque', 'a.%%%.b']) {
    let renewals = 0;
    const gateway = await serve(t, (req, res) => {
      if (req.url === '/api/signin' || req.url === '/api/refresh') {
        renewals++;
        return json(res, 200, { success: true, message: { accessToken, refreshToken: 'r' } });
      }
      return json(res, 200, { success: true, message: { pages: '1', items: [], total: 0 } });
    });
    const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false });
    for (let i = 0; i < 3; i++) await client.roles();
    assert.equal(renewals, 1, accessToken);
  }
});

test('the owner client: no error carries the password, and a foreign cookie is not adopted', async (t) => {
  const password = 'hunter2-owner-password';
  const answers: Answer[] = [
    (_req, res) => json(res, 401, { success: false, message: { code: 'invalid_credentials', description: 'no' } }),
    (_req, res) => json(res, 200, { success: true, message: { csrfToken: 'c' } }, { 'set-cookie': 'other=1; Path=/' }),
    (_req, res) => json(res, 200, { success: true, message: { csrfToken: 'c' } }, { 'set-cookie': 'gw_session_x=1' }),
    (_req, res) => res.writeHead(500, { 'content-type': 'text/plain' }).end(password),
    (req) => req.socket.destroy(),
  ];
  for (const answer of answers) {
    const gateway = await serve(t, answer);
    const owner = new OwnerClient({ baseUrl: gateway.url, email: 'o@example.com', password, retry: false });
    const err = await owner.getSession().then(() => assert.fail('got a session'), (e: unknown) => e);
    assert.ok(err instanceof GatewayError, textOf(err));
    assert.ok(!textOf(err).includes(password), textOf(err));
    assert.equal(gateway.seen.length, 1, 'one sign-in, nothing sent with a foreign cookie');
  }
});

test("the owner client: an id of '.' or '..' (or empty) never turns a call into another operation", async (t) => {
  const gateway = await serve(t, (_req, res) => json(res, 200, { success: true, message: { deleted: true } }));
  const owner = new OwnerClient({ baseUrl: gateway.url, adminToken: 'gwadm_test', retry: false });
  const calls: [string, () => Promise<unknown>][] = [
    ['keys.delete(1, "..")', () => owner.keys.delete('1', '..')],
    ['keys.delete(1, ".")', () => owner.keys.delete('1', '.')],
    ['keys.delete(1, "")', () => owner.keys.delete('1', '')],
    ['accounts.delete("..")', () => owner.accounts.delete('..')],
    ['settingsTokens.revoke(1, "..")', () => owner.settingsTokens.revoke('1', '..')],
    ['signRecords.delete("..", "x")', () => owner.signRecords.delete('..', 'x')],
  ];
  for (const [what, run] of calls) {
    await run().then(() => assert.fail(`${what} was sent`), (err: unknown) => assert.ok(err instanceof Error, what));
  }
  assert.deepEqual(gateway.seen.map((s) => `${s.method} ${s.url}`), []);
});

test('timeoutMs of Infinity or past the 32-bit timer range means no limit, not an immediate timeout', async (t) => {
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/signin') return json(res, 200, { success: true, message: pair(9) });
    setTimeout(() => json(res, 200, { success: true, message: { pages: '1', items: [], total: 0 } }), 30);
  });
  for (const timeoutMs of [Infinity, 2 ** 31, 1e12]) {
    const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false, timeoutMs });
    await client.roles().catch((err: unknown) => assert.fail(`client timeoutMs ${timeoutMs}: ${textOf(err)}`));
    const other = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false });
    await other.roles({}, { timeoutMs }).catch((err: unknown) => assert.fail(`call timeoutMs ${timeoutMs}: ${textOf(err)}`));
    const res = await other.fetch('/x', { timeoutMs });
    await res.text();
  }
});

test('credentials read from a file with a trailing newline still work; one with a line break inside is refused without being quoted', async (t) => {
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/refresh') return json(res, 200, { success: true, message: pair(10) });
    json(res, 200, { success: true, message: { pages: '1', items: [], total: 0, bearer: req.headers.authorization } });
  });
  const settings = new GatewayClient({ baseUrl: gateway.url, credentials: { settingsToken: 'gwst_abc\n' }, retry: false });
  assert.equal(((await settings.roles()) as unknown as { bearer: string }).bearer, 'Bearer gwst_abc');
  const session = new GatewayClient({ baseUrl: gateway.url, credentials: { refreshToken: 'refresh-abc\r\n' }, retry: false });
  await session.roles();
  assert.equal(JSON.parse(gateway.seen.find((s) => s.url === '/api/refresh')!.body).refreshToken, 'refresh-abc');
  for (const make of [
    () => new GatewayClient({ baseUrl: gateway.url, credentials: { settingsToken: 'gwst_secret\nx' } }),
    () => new GatewayClient({ baseUrl: gateway.url, credentials: { refreshToken: 'refresh_secret\nx' } }),
    () => new OwnerClient({ baseUrl: gateway.url, adminToken: 'gwadm_secret\nx' }),
  ]) {
    const err = await (async () => make())().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof GatewayError, 'refused at construction');
    assert.ok(!textOf(err).includes('secret'), textOf(err));
  }
  const owner = new OwnerClient({ baseUrl: gateway.url, adminToken: 'gwadm_abc\n', retry: false });
  await owner.accounts.list();
  assert.equal(gateway.seen.at(-1)!.headers.authorization, 'Bearer gwadm_abc');
});

test('a base URL with a user and password is refused at construction, without quoting the password', async (t) => {
  const gateway = await serve(t, (_req, res) => json(res, 200, { success: true, message: pair(11) }));
  const withUser = gateway.url.replace('http://', 'http://admin:pa55word@');
  for (const make of [
    () => new GatewayClient({ baseUrl: withUser, credentials: key }),
    () => new OwnerClient({ baseUrl: withUser, adminToken: 'gwadm_x' }),
  ]) {
    const err = await (async () => {
      const client = make();
      await (client instanceof GatewayClient ? client.signIn() : client.accounts.list());
    })().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof GatewayError, String(err));
    assert.equal(err.name, 'ConfigurationError', textOf(err));
    assert.ok(!textOf(err).includes('pa55word'), textOf(err));
  }
  assert.equal(gateway.seen.length, 0);
});

test('an onRateLimit hook that throws does not fail the call it observes (nor the sign-in under it)', async (t) => {
  const limits = { ratelimit: '"calls";r=5;t=1', 'ratelimit-policy': '"calls";q=10;w=1' };
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/signin') return json(res, 200, { success: true, message: pair(12) }, limits);
    json(res, 200, { success: true, message: { pages: '1', items: [], total: 0 } }, limits);
  });
  let seen = 0;
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, retry: false, onRateLimit: () => { seen++; throw new Error('hook bug'); } });
  await client.roles().catch((err: unknown) => assert.fail(textOf(err)));
  assert.equal(seen, 2);
  assert.equal(client.rateLimit?.tightest.remaining, 5);
});

test('the owner client: a listing whose cursors go round in a circle ends in an error, not a loop', async (t) => {
  const gateway = await serve(t, (req, res) => {
    const cursor = new URL(req.url ?? '/', 'http://x').searchParams.get('cursor');
    json(res, 200, { success: true, message: { items: [{ id: `acc-${cursor}` }], nextCursor: cursor === 'a' ? 'b' : 'a' } });
  });
  const owner = new OwnerClient({ baseUrl: gateway.url, adminToken: 'gwadm_x', retry: false });
  let count = 0;
  const err = await (async () => {
    for await (const _account of owner.accounts.all()) if (++count > 50) break;
  })().then(() => undefined, (e: unknown) => e);
  assert.ok(count <= 50, 'accounts.all kept going');
  assert.ok(err instanceof UnexpectedResponseError, textOf(err));
});

test('forget() while the storage hook is still loading: the pair it loads is not adopted', async (t) => {
  const bearers: (string | undefined)[] = [];
  let signIns = 0;
  const gateway = await serve(t, (req, res) => {
    if (req.url === '/api/signin') {
      signIns++;
      return json(res, 200, { success: true, message: pair(100 + signIns) });
    }
    bearers.push(req.headers.authorization);
    json(res, 200, { success: true, message: { pages: '1', items: [], total: 0 } });
  });
  const old = pair(13);
  let finishLoad!: (p: TokenPair | undefined) => void;
  // The first load is slow; the storage is empty once forget() has cleared it.
  let loads = 0;
  const storage: TokenStorage = { load: () => (loads++ === 0 ? new Promise((resolve) => { finishLoad = resolve; }) : undefined), save: () => {} };
  const client = new GatewayClient({ baseUrl: gateway.url, credentials: key, storage, retry: false });
  const first = client.roles();
  while (finishLoad === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
  await client.forget();
  finishLoad(old);
  await first;
  assert.equal(bearers.length, 1);
  assert.notEqual(bearers[0], `Bearer ${old.accessToken}`, 'the forgotten pair was sent');
  assert.equal(signIns, 1);
});
