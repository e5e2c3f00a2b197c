/**
 * GET /api/sign and GET /api/roles end to end, through the gateway's HTTP API, over the two
 * directory stores that need no Redis: an HTTP upstream (a real node:http server on 127.0.0.1
 * speaking the interface's envelope) and the data file, reloaded while the gateway runs.
 *
 * What is proved: concurrent misses cost the upstream one request; "no record" is cached for
 * negativeTtlMs and no longer; while the upstream fails (500s, refused connections, silence)
 * cached copies are served until maxStaleMs and uncached keys are answered promptly with
 * 503/504 in the envelope with Retry-After; bad data is a 502 whose log line does not carry the
 * value; the gateway recovers by itself. Time that matters to the cache is the ManualClock's
 * (gateway.clock.advance); real time only bounds how long an answer may take ("promptly") and
 * how long recovery may take, polled against a deadline, never slept.
 */
import assert from 'node:assert/strict';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  ACCOUNT, ALICE_CAPS, ALICE_LOWER, ALICE_ROLES, assertListing, assertNotFound, assertPrompt, assertSign, assertStaleServed, assertStoreError, DEADLINE_MS,
  DEMO_FILE, FIRST_PAGE, MAX_STALE_MS, PAST_FRESH_MS, rolesCall, SECOND_PAGE, signCall, SWR_MS, TTL_MS, UNKNOWN, until,
} from '../helpers/directory.js';
import { DEMO, logged, logLines, postJson, sha256Hex, show, signIn, startGateway, timed, type TestGateway } from '../helpers/gateway.js';
import { tempDir } from '../helpers/process.js';

// acct_alice's records and roles (ALICE_CAPS, ALICE_LOWER, ALICE_ROLES, FIRST_PAGE, SECOND_PAGE), the
// cache settings (TTL_MS, SWR_MS, MAX_STALE_MS), PROMPT_MS and DEADLINE_MS: test/helpers/directory.ts.
const SERVICE_TOKEN = 'svc_directory_token_4f1c';

/** From PAST_FRESH_MS, past ttl + maxStale: the copy may not be served even when the store fails. */
const PAST_MAX_STALE_MS = MAX_STALE_MS;

interface DataRole { id: number; slug: string; name: string; description: string; public: boolean }
interface DataSign { address: string; signedNonce: number; signedAt: string; signedExpiredAt: string }
interface DemoData { accounts: { id: string; apiKeys: { id: string; disabled?: boolean }[]; roles: DataRole[]; signRecords: DataSign[] }[] }

/** config/demo-data.json as it is written (a fresh copy each time: the file-store test changes it). */
function demoData(): DemoData {
  return JSON.parse(readFileSync(DEMO_FILE, 'utf8')) as DemoData;
}

/** "2026-03-01T12:00:00Z" → "2026-03-01 12:00:00": the interface's representation (UTC). */
function wireTime(iso: string): string {
  return new Date(iso).toISOString().slice(0, 19).replace('T', ' ');
}

// ---------------------------------------------------------------------------------------------
// The upstream

interface UpstreamRequest {
  kind: 'sign' | 'roles' | 'other';
  path: string;
  query: URLSearchParams;
  authorization: string | undefined;
  account: string | undefined;
  accept: string | undefined;
}

interface Upstream {
  signUrl: string;
  rolesUrl: string;
  /** acct_alice's sign records, by lowercase address, as the upstream holds them. */
  signs: Map<string, Record<string, unknown>>;
  /** acct_alice's roles in id order, in the listing representation (bad values allowed). */
  roles: Record<string, unknown>[];
  /** ok: answers; error: 500 to everything; hang: never answers. Read when a request arrives. */
  mode: 'ok' | 'error' | 'hang';
  /** How long each answer is held back. */
  delayMs: number;
  /** When set and it answers, it answers instead of the upstream's own logic (mode 'ok' only). */
  override: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;
  requests: UpstreamRequest[];
  count(kind: UpstreamRequest['kind']): number;
  /** Stops listening and drops every connection: from now on connections are refused. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
}

/**
 * The existing HTTP backend the gateway reads from, after the mapping of
 * src/state/directory/http.ts (and the example URLs of docs/directory.md):
 *   GET /accounts/{accountId}/sign?address={address}  → 200 {success:true, message:record} | 404
 *   GET /accounts/{accountId}/roles?page&limit[&name] → 200 {success:true, message:{pages,items,total}} | 404
 * It insists on the service credential and the account header, as such a backend would.
 */
async function startUpstream(t: TestContext): Promise<Upstream> {
  const account = demoData().accounts.find((a) => a.id === ACCOUNT)!;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => handle(req, res));
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  await listen(0);
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;

  const up: Upstream = {
    signUrl: `${base}/accounts/{accountId}/sign?address={address}`,
    rolesUrl: `${base}/accounts/{accountId}/roles`,
    signs: new Map(account.signRecords.map((s) => [s.address.toLowerCase(), {
      signedNonce: s.signedNonce,
      signedAt: wireTime(s.signedAt),
      signedExpiredAt: wireTime(s.signedExpiredAt),
    }])),
    roles: ALICE_ROLES.map((r) => ({ ...r })),
    mode: 'ok',
    delayMs: 0,
    override: undefined,
    requests: [],
    count: (kind) => up.requests.filter((r) => r.kind === kind).length,
    async stop() {
      if (!server.listening) return;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    start: () => listen(port),
  };
  t.after(() => up.stop());

  function send(res: ServerResponse, status: number, body: unknown): void {
    if (res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', base);
    const sign = /^\/accounts\/([^/]+)\/sign$/.exec(url.pathname);
    const roles = /^\/accounts\/([^/]+)\/roles$/.exec(url.pathname);
    const header = (name: string) => (typeof req.headers[name] === 'string' ? req.headers[name] as string : undefined);
    up.requests.push({
      kind: sign !== null ? 'sign' : roles !== null ? 'roles' : 'other',
      path: url.pathname,
      query: url.searchParams,
      authorization: header('authorization'),
      account: header('x-account-id'),
      accept: header('accept'),
    });
    if (up.mode === 'hang') return; // never answered; dropped by stop()
    const mode = up.mode;
    const answer = () => {
      if (mode === 'error') return send(res, 500, { success: false, message: { code: 'internal_error', description: 'upstream broken' } });
      if (up.override?.(req, res)) return;
      if (req.headers.authorization !== `Bearer ${SERVICE_TOKEN}`) return send(res, 401, { success: false, message: { code: 'unauthorized' } });
      const notFound = () => send(res, 404, { success: false, message: { code: 'not_found', description: 'no such thing' } });
      if (sign !== null) {
        const address = url.searchParams.get('address') ?? '';
        const record = decodeURIComponent(sign[1]!) === ACCOUNT ? up.signs.get(address) : undefined;
        return record === undefined ? notFound() : send(res, 200, { success: true, message: { did: address, ...record } });
      }
      if (roles !== null) {
        if (decodeURIComponent(roles[1]!) !== ACCOUNT) return notFound();
        const page = Number(url.searchParams.get('page') ?? '1');
        const limit = Number(url.searchParams.get('limit') ?? '10');
        const name = (url.searchParams.get('name') ?? '').toLowerCase();
        const matching = up.roles.filter((r) => String(r.name).toLowerCase().includes(name));
        const items = matching.slice((page - 1) * limit, page * limit);
        return send(res, 200, { success: true, message: { pages: String(Math.ceil(matching.length / limit)), items, total: matching.length } });
      }
      return notFound();
    };
    if (up.delayMs > 0) setTimeout(answer, up.delayMs);
    else answer();
  }

  return up;
}

function startGatewayOn(t: TestContext, up: Upstream, { http = {}, cache = {} }: { http?: Record<string, unknown>; cache?: Record<string, unknown> } = {}): Promise<TestGateway> {
  return startGateway(t, {
    overrides: {
      directory: {
        store: 'http',
        http: { signUrl: up.signUrl, rolesUrl: up.rolesUrl, token: SERVICE_TOKEN, timeoutMs: 2000, ...http },
        cache: { ttlMs: TTL_MS, staleWhileRevalidateMs: SWR_MS, negativeTtlMs: 2000, maxStaleMs: MAX_STALE_MS, ...cache },
      },
    },
  });
}

// ---------------------------------------------------------------------------------------------
// HTTP upstream

test('HTTP upstream: 100 concurrent calls for one key cost the upstream one request, and all 100 are answered', async (t) => {
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up);
  const { accessToken } = await signIn(gw);
  up.delayMs = 200;

  await t.test('GET /api/sign: 100 at once, in three spellings of one address', async () => {
    const spellings = [ALICE_CAPS.address, ALICE_CAPS.address.toLowerCase(), `0x${ALICE_CAPS.address.slice(2, 22).toLowerCase()}${ALICE_CAPS.address.slice(22)}`];
    const readsBefore = gw.services.directory.storeReads;
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => signCall(gw, accessToken, spellings[i % 3]!)));
    answers.forEach((res, i) => assertSign(res, spellings[i % 3]!, ALICE_CAPS, `sign call #${i}`));
    assert.equal(up.count('sign'), 1, 'the upstream was asked once');
    assert.equal(gw.services.directory.storeReads - readsBefore, 1, 'one store read began');
    const [asked] = up.requests;
    assert.equal(asked?.path, `/accounts/${ACCOUNT}/sign`, 'in the caller\'s account');
    assert.deepEqual([...asked!.query], [['address', ALICE_CAPS.address.toLowerCase()]], 'asked by the lowercase address');
    assert.equal(asked?.authorization, `Bearer ${SERVICE_TOKEN}`, 'with the service credential');
    assert.equal(asked?.account, ACCOUNT, 'with the account header');
    assert.equal(asked?.accept, 'application/json');
  });

  await t.test('GET /api/roles?page=1&limit=10: 100 at once', async () => {
    const readsBefore = gw.services.directory.storeReads;
    const answers = await Promise.all(Array.from({ length: 100 }, () => rolesCall(gw, accessToken, 'page=1&limit=10')));
    answers.forEach((res, i) => assertListing(res, FIRST_PAGE, `roles call #${i}`));
    assert.equal(up.count('roles'), 1, 'the upstream was asked once');
    assert.equal(gw.services.directory.storeReads - readsBefore, 1, 'one store read began');
    const asked = up.requests.find((r) => r.kind === 'roles')!;
    assert.equal(asked.path, `/accounts/${ACCOUNT}/roles`);
    assert.deepEqual([...asked.query].sort(), [['limit', '10'], ['page', '1']], 'whole pages, asked as page and limit');
    assert.equal(asked.authorization, `Bearer ${SERVICE_TOKEN}`);
    assert.equal(asked.account, ACCOUNT);
  });

  await t.test('another page and a name search are keys of their own, once each', async () => {
    up.delayMs = 0;
    const [second, search] = await Promise.all([
      Promise.all(Array.from({ length: 20 }, () => rolesCall(gw, accessToken, 'page=2&limit=10'))),
      Promise.all(Array.from({ length: 20 }, () => rolesCall(gw, accessToken, 'name=MANAGER'))),
    ]);
    second.forEach((res, i) => assertListing(res, SECOND_PAGE, `page 2 #${i}`));
    const managers = ALICE_ROLES.filter((r) => r.name.endsWith('Manager'));
    search.forEach((res, i) => assertListing(res, { pages: '1', total: 2, items: managers }, `search #${i}`));
    assert.equal(up.count('roles'), 3, 'page 1 (cached), page 2 and the search: three upstream requests in all');
    assert.equal(up.requests.filter((r) => r.query.get('name') === 'MANAGER').length, 1, 'the search was passed on as name=');
  });
});

test('HTTP upstream: between ttlMs and ttlMs + staleWhileRevalidateMs the copy is served at once while one call refreshes it', async (t) => {
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up, { http: { timeoutMs: 10_000 }, cache: { staleWhileRevalidateMs: 5000 } });
  const { accessToken } = await signIn(gw);
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'first read');
  assert.equal(up.count('sign'), 1);

  // The record changes upstream, and the upstream turns slow: 3 s per answer (within timeoutMs).
  up.signs.get(ALICE_CAPS.address.toLowerCase())!.signedNonce = 43;
  up.delayMs = 3000;
  gw.clock.advance(TTL_MS + 1000);
  const answers = await Promise.all(Array.from({ length: 20 }, () => timed(() => signCall(gw, accessToken, ALICE_CAPS.address))));
  answers.forEach(({ res, ms }, i) => {
    assertSign(res, ALICE_CAPS.address, ALICE_CAPS, `call #${i} within staleWhileRevalidate: the copy`);
    assertPrompt(ms, `call #${i}, which must not wait for the 3 s refresh`);
  });
  await until('the background refresh reaches the upstream', async () => up.count('sign') === 2, 3000);
  await until('the refreshed record served', async () => (await signCall(gw, accessToken, ALICE_CAPS.address)).body?.message?.signedNonce === 43, DEADLINE_MS);
  assert.equal(up.count('sign'), 2, 'one refresh for all of them');
});

test('HTTP upstream: "no record" is cached for negativeTtlMs, then the upstream is asked again', async (t) => {
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up, { cache: { negativeTtlMs: 2000 } });
  const { accessToken } = await signIn(gw);
  const spelling = `0x${UNKNOWN.slice(2).toUpperCase()}`;

  assertNotFound(await signCall(gw, accessToken, spelling), 'an address the upstream does not know');
  assert.equal(up.count('sign'), 1);

  // The record is written upstream; within negativeTtlMs the gateway does not ask again.
  up.signs.set(UNKNOWN, { signedNonce: 5, signedAt: '2026-07-01 00:00:00', signedExpiredAt: '2026-08-01 00:00:00' });
  gw.clock.advance(1000);
  assertNotFound(await signCall(gw, accessToken, spelling), '1 s later');
  gw.clock.advance(900);
  assertNotFound(await signCall(gw, accessToken, UNKNOWN), '1.9 s later, in another spelling');
  assert.equal(up.count('sign'), 1, 'no upstream request within negativeTtlMs');

  gw.clock.advance(200);
  assertSign(await signCall(gw, accessToken, spelling), spelling, { signedNonce: 5, signedAt: '2026-07-01 00:00:00', signedExpiredAt: '2026-08-01 00:00:00' }, 'past negativeTtlMs');
  assert.equal(up.count('sign'), 2, 'the upstream was asked again');

  // Now a positive entry: cached for ttlMs, far longer than negativeTtlMs.
  gw.clock.advance(10_000);
  assert.equal((await signCall(gw, accessToken, UNKNOWN)).status, 200);
  assert.equal(up.count('sign'), 2, 'a found record is cached for ttlMs');
});

test('HTTP upstream answering 500: cached copies served stale until maxStaleMs, uncached keys 503 at once; recovery without a restart', async (t) => {
  const up = await startUpstream(t);
  // A breaker that never opens here: every call goes to the upstream (the breaker has a test of its own).
  const gw = await startGatewayOn(t, up, { http: { breakerFailures: 1000 } });
  const { accessToken } = await signIn(gw);

  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'before the failure');
  assertListing(await rolesCall(gw, accessToken), FIRST_PAGE, 'roles before the failure');

  // The record changes upstream, then the upstream breaks: what the gateway serves is its copy.
  up.signs.get(ALICE_CAPS.address.toLowerCase())!.signedNonce = 43;
  up.mode = 'error';
  gw.clock.advance(PAST_FRESH_MS);
  const asked = up.requests.length;

  await assertStaleServed(gw, accessToken, 'cached record while the upstream answers 500', 'cached roles while the upstream answers 500');
  assert.equal(up.requests.length - asked, 2, 'both were asked for again (and failed) before the copies were served');

  // The failing entry is asked for again at most once a second (of the gateway's clock).
  for (let i = 0; i < 5; i++) assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, `the stale record again, #${i}`);
  assert.equal(up.count('sign'), 2, 'not asked again within the second');
  gw.clock.advance(1000);
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'the stale record a second later');
  assert.equal(up.count('sign'), 3, 'asked again once the second has passed');

  const uncached = await timed(() => signCall(gw, accessToken, ALICE_LOWER.address));
  assertStoreError(uncached.res, 503, 'an uncached record while the upstream answers 500');
  assertPrompt(uncached.ms, 'the uncached record');
  assertStoreError(await rolesCall(gw, accessToken, 'page=2'), 503, 'an uncached page while the upstream answers 500');
  assert.equal(logged(gw, 'directory store failing: cached copies are served while they are within directory.cache.maxStaleMs').length, 1, 'the failure was logged once');
  const notServed = logged(gw, 'request not served').filter((l) => l.code === 'store_unavailable');
  assert.ok(notServed.length >= 2, 'each 503 has its log line');
  for (const line of notServed) assert.match(String(line.cause), /answered 500/, 'the log says why');

  gw.clock.advance(PAST_MAX_STALE_MS);
  assertStoreError(await signCall(gw, accessToken, ALICE_CAPS.address), 503, 'the cached record past maxStaleMs');
  assertStoreError(await rolesCall(gw, accessToken), 503, 'the cached roles past maxStaleMs');

  up.mode = 'ok';
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, { ...ALICE_CAPS, signedNonce: 43 }, 'the record once the upstream answers again');
  assertSign(await signCall(gw, accessToken, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, 'the formerly uncached record');
  assertListing(await rolesCall(gw, accessToken), FIRST_PAGE, 'roles once the upstream answers again');
  assertListing(await rolesCall(gw, accessToken, 'page=2'), SECOND_PAGE, 'page 2 once the upstream answers again');
  assert.equal(logged(gw, 'directory store answering again').length, 1, 'the recovery was logged');
});

test('HTTP upstream answering 500 while a copy is within staleWhileRevalidateMs: the failing entry is asked for at most once a second', async (t) => {
  // docs/directory.md, "When the store fails": a cached entry is answered from the cache while it is younger
  // than ttlMs + maxStaleMs, "whatever its state; meanwhile the store is asked for it again at
  // most once a second". The breaker is kept out of the way: what is counted is the cache's restraint.
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up, { http: { breakerFailures: 1000 }, cache: { staleWhileRevalidateMs: 5000 } });
  const { accessToken } = await signIn(gw);
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'first read');

  up.mode = 'error';
  gw.clock.advance(TTL_MS + 1000); // past ttlMs, within staleWhileRevalidateMs; the clock then stands still
  const asked = up.count('sign');
  const readsBefore = gw.services.directory.storeReads;
  for (let i = 0; i < 10; i++) {
    assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, `call #${i}: the copy`);
    // Each refresh begun has reached the upstream (and been answered 500) before the next call.
    const begun = gw.services.directory.storeReads - readsBefore;
    await until(`refresh #${begun} answered`, async () => up.count('sign') - asked >= begun, 3000);
  }
  assert.ok(up.count('sign') - asked <= 1, `the failing upstream was asked ${up.count('sign') - asked} times for one entry while the gateway's clock stood still`);
});

test('HTTP upstream failures of other kinds: a redirect (not followed) and an oversized answer are 503, a body that is not JSON is 502', async (t) => {
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up, { http: { breakerFailures: 1000, maxResponseBytes: 1024 } });
  const { accessToken } = await signIn(gw);
  up.override = (req, res) => {
    const address = new URL(req.url ?? '/', 'http://upstream').searchParams.get('address');
    if (address === ALICE_CAPS.address.toLowerCase()) {
      res.writeHead(302, { location: `/accounts/${ACCOUNT}/sign?address=${ALICE_LOWER.address}`, 'content-length': '0' });
      res.end();
      return true;
    }
    if (address === ALICE_LOWER.address) {
      const body = JSON.stringify({ success: true, message: { signedNonce: 7, signedAt: '2026-05-20 08:30:15', signedExpiredAt: '2027-05-20 08:30:15', note: 'x'.repeat(2000) } });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return true;
    }
    if (address === UNKNOWN) {
      res.writeHead(200, { 'content-type': 'text/html', 'content-length': '17' });
      res.end('<html>oops</html>');
      return true;
    }
    return false;
  };

  assertStoreError(await signCall(gw, accessToken, ALICE_CAPS.address), 503, 'a redirect');
  assert.equal(up.count('sign'), 1, 'the redirect was not followed');
  assertStoreError(await signCall(gw, accessToken, ALICE_LOWER.address), 503, 'an answer over maxResponseBytes');
  assertStoreError(await signCall(gw, accessToken, UNKNOWN), 502, 'an answer that is not JSON', null);
  const causes = logged(gw, 'request not served').map((l) => String(l.cause));
  assert.ok(causes.some((c) => /could not be reached/.test(c)), causes.join(' | '));
  assert.ok(causes.some((c) => /answered more than 1024 bytes/.test(c)), causes.join(' | '));
  assert.ok(causes.some((c) => /not JSON/.test(c)), causes.join(' | '));

  up.override = undefined;
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'once the upstream answers plainly');
  assertSign(await signCall(gw, accessToken, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, 'once the upstream answers plainly');
  assertNotFound(await signCall(gw, accessToken, UNKNOWN), 'once the upstream answers plainly');
});

test('HTTP upstream refusing connections: 503 with Retry-After, the breaker opens; recovery by itself after the cooldown', async (t) => {
  const up = await startUpstream(t);
  const cooldownMs = 2000;
  const gw = await startGatewayOn(t, up, { http: { breakerFailures: 2, breakerCooldownMs: cooldownMs } });
  const retryAfter = String(cooldownMs / 1000);
  const { accessToken } = await signIn(gw);
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'before the upstream goes away');

  await up.stop();
  gw.clock.advance(PAST_FRESH_MS);

  const stale = await timed(() => signCall(gw, accessToken, ALICE_CAPS.address));
  assertSign(stale.res, ALICE_CAPS.address, ALICE_CAPS, 'the cached record with the upstream gone');
  assertPrompt(stale.ms, 'the stale record');
  for (const [i, address] of [ALICE_LOWER.address, UNKNOWN, ALICE_LOWER.address, UNKNOWN].entries()) {
    const { res, ms } = await timed(() => signCall(gw, accessToken, address));
    assertStoreError(res, 503, `uncached call #${i} with the upstream gone`, retryAfter);
    assertPrompt(ms, `uncached call #${i}`);
  }
  assert.ok(logged(gw, 'directory upstream circuit breaker open: calls fail at once').length >= 1, 'the breaker opened, and said so');
  const causes = logged(gw, 'request not served').map((l) => String(l.cause));
  assert.ok(causes.some((c) => /could not be reached/.test(c)), `a refused connection is logged as such: ${causes.join(' | ')}`);
  assert.ok(causes.some((c) => /circuit breaker open/.test(c)), 'and then the open breaker');
  // With the breaker open the stale copy is still served.
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'the cached record with the breaker open');

  await up.start();
  const recoveredMs = await until('the uncached record answered once the upstream is back', async () => {
    const res = await signCall(gw, accessToken, ALICE_LOWER.address);
    if (res.status === 200) {
      assertSign(res, ALICE_LOWER.address, ALICE_LOWER, 'after the recovery');
      return true;
    }
    assertStoreError(res, 503, 'while the breaker cools down', retryAfter);
    return false;
  });
  t.diagnostic(`answered ${Math.round(recoveredMs)} ms after the upstream came back`);
  assertNotFound(await signCall(gw, accessToken, UNKNOWN), 'an unknown address after the recovery');
  assert.ok(logged(gw, 'directory upstream circuit breaker closed').length >= 1, 'the breaker closed, and said so');
});

test('HTTP upstream that never answers: 504 after timeoutMs, cached copies served stale until maxStaleMs; recovery', async (t) => {
  const up = await startUpstream(t);
  const timeoutMs = 300;
  const gw = await startGatewayOn(t, up, { http: { timeoutMs, breakerFailures: 1000 } });
  const { accessToken } = await signIn(gw);
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'before the upstream stalls');
  assertListing(await rolesCall(gw, accessToken), FIRST_PAGE, 'roles before the upstream stalls');

  up.mode = 'hang';
  const uncached = await timed(() => signCall(gw, accessToken, ALICE_LOWER.address));
  assertStoreError(uncached.res, 504, 'an uncached record with the upstream silent');
  assertPrompt(uncached.ms, 'the 504');
  assert.ok(uncached.ms >= timeoutMs - 50, `the gateway waited for the upstream (${Math.round(uncached.ms)} ms)`);
  assertStoreError(await rolesCall(gw, accessToken, 'page=2'), 504, 'an uncached page with the upstream silent');

  gw.clock.advance(PAST_FRESH_MS);
  const stale = await timed(() => signCall(gw, accessToken, ALICE_CAPS.address));
  assertSign(stale.res, ALICE_CAPS.address, ALICE_CAPS, 'the cached record with the upstream silent');
  assertPrompt(stale.ms, 'the stale record');
  assertListing(await rolesCall(gw, accessToken), FIRST_PAGE, 'the cached roles with the upstream silent');
  const causes = logged(gw, 'request not served').filter((l) => l.code === 'store_timeout').map((l) => String(l.cause));
  assert.ok(causes.length >= 2 && causes.every((c) => c.includes(`did not answer within ${timeoutMs} ms`)), causes.join(' | '));

  gw.clock.advance(PAST_MAX_STALE_MS);
  const tooOld = await timed(() => signCall(gw, accessToken, ALICE_CAPS.address));
  assertStoreError(tooOld.res, 504, 'the cached record past maxStaleMs');
  assertPrompt(tooOld.ms, 'the 504 past maxStaleMs');

  up.mode = 'ok';
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'the record once the upstream answers');
  assertSign(await signCall(gw, accessToken, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, 'the formerly uncached record');
  assertListing(await rolesCall(gw, accessToken, 'page=2'), SECOND_PAGE, 'page 2 once the upstream answers');
});

test('HTTP upstream sending bad data: 502 bad_store_data, not cached, the value kept out of the log, the breaker left closed', async (t) => {
  const up = await startUpstream(t);
  const gw = await startGatewayOn(t, up, { http: { breakerFailures: 2 } });
  const { accessToken } = await signIn(gw);

  // A role whose id is not a number, on page 2; a role whose `public` is neither 0/1 nor a boolean, on page 1.
  up.roles[11] = { ...up.roles[11], id: 'abc' };
  up.roles[2] = { ...up.roles[2], public: 'maybe' };
  up.signs.set(ALICE_LOWER.address, { ...up.signs.get(ALICE_LOWER.address), signedNonce: 'abc' });

  for (let i = 0; i < 3; i++) {
    assertStoreError(await rolesCall(gw, accessToken, 'page=1'), 502, `page 1 (public "maybe"), call #${i}`, null);
    assertStoreError(await rolesCall(gw, accessToken, 'page=2'), 502, `page 2 (id "abc"), call #${i}`, null);
    assertStoreError(await signCall(gw, accessToken, ALICE_LOWER.address), 502, `sign record (signedNonce "abc"), call #${i}`, null);
  }
  assert.equal(up.count('roles'), 6, 'bad data is not cached: every call asked again');
  assert.equal(up.count('sign'), 3);

  // Bad data is the upstream answering: the breaker (2 failures) stays closed, other keys are served.
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'a good record of the same upstream');
  assertListing(await rolesCall(gw, accessToken, 'name=Admin'), { pages: '1', total: 1, items: [ALICE_ROLES[0]] }, 'a page without the bad roles');
  assert.deepEqual(logged(gw, 'directory upstream circuit breaker open: calls fail at once'), [], 'the breaker did not open');
  assert.deepEqual(logged(gw, 'directory store failing: cached copies are served while they are within directory.cache.maxStaleMs'), [], 'bad data is not an outage');

  const bad = logged(gw, 'request not served').filter((l) => l.code === 'bad_store_data');
  assert.equal(bad.length, 9, 'each 502 has its log line');
  const causes = bad.map((l) => String(l.cause));
  assert.ok(causes.some((c) => /items\.2\.public/.test(c)), `the field path of "public" is named: ${causes.join(' | ')}`);
  assert.ok(causes.some((c) => /items\.1\.id/.test(c)), `the field path of "id" is named: ${causes.join(' | ')}`);
  assert.ok(causes.some((c) => /signedNonce/.test(c)), `the sign record's field is named: ${causes.join(' | ')}`);

  // Once the upstream sends good data, the same keys are served (nothing bad was cached).
  up.roles[11] = { ...ALICE_ROLES[11]! };
  up.roles[2] = { ...ALICE_ROLES[2]! };
  up.signs.set(ALICE_LOWER.address, { signedNonce: 7, signedAt: '2026-05-20 08:30:15', signedExpiredAt: '2027-05-20 08:30:15' });
  assertListing(await rolesCall(gw, accessToken, 'page=1'), FIRST_PAGE, 'page 1 once fixed');
  assertListing(await rolesCall(gw, accessToken, 'page=2'), SECOND_PAGE, 'page 2 once fixed');
  assertSign(await signCall(gw, accessToken, ALICE_LOWER.address), ALICE_LOWER.address, ALICE_LOWER, 'the record once fixed');

  // Bad data for a key that is cached: the last good copy is served, and the log says so.
  up.roles[2] = { ...ALICE_ROLES[2]!, public: 'maybe' };
  gw.clock.advance(PAST_FRESH_MS);
  assertListing(await rolesCall(gw, accessToken, 'page=1'), FIRST_PAGE, 'page 1, cached, when the upstream sends bad data');
  const served = logged(gw, 'directory store returned data the gateway cannot use: served the last good copy');
  assert.equal(served.length, 1, 'the stale answer to bad data is logged');
  assert.match(String(served[0]!.problem), /items\.2\.public/, 'naming the field');

  // No line holds the bad values (request ids, which are hex, and times are left out of the search).
  for (const line of logLines(gw)) {
    const { requestId: _r, time: _t, ...rest } = line;
    const text = JSON.stringify(rest);
    assert.ok(!text.includes('abc') && !text.includes('maybe'), `a log line carries a bad value: ${text}`);
  }
});

// ---------------------------------------------------------------------------------------------
// The data file

test('file store: a changed data file is served within seconds, an invalid version is ignored, a disabled key stops signing in', async (t) => {
  const dir = tempDir(t, 'gateway-directory-');
  const file = join(dir, 'data.json');
  const data = demoData();
  writeFileSync(file, JSON.stringify(data, null, 2));
  const gw = await startGateway(t, { overrides: { data: { file, watchIntervalMs: 50 }, directory: { cache: { ttlMs: TTL_MS } } } });
  const { accessToken } = await signIn(gw);
  const alice = data.accounts.find((a) => a.id === ACCOUNT)!;
  let version = 0;
  /** Writes a new file beside it and renames it over: readers never see half a file. */
  const replace = (content: string) => {
    const next = join(dir, `data.json.${++version}.tmp`);
    writeFileSync(next, content);
    renameSync(next, file);
  };
  const warned = () => logged(gw, 'data file changed but is not valid: still serving the previous version');

  // Cached before the changes: what follows is served although ttlMs (60 s) never passes.
  assertListing(await rolesCall(gw, accessToken, 'page=2'), SECOND_PAGE, 'page 2 at the start');
  assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, ALICE_CAPS, 'the record at the start');

  await t.test('a role added by renaming a new file over the old one', async () => {
    alice.roles.push({ id: 13, slug: 'reviewer', name: 'Security Reviewer', description: 'Reviews access.', public: true });
    replace(JSON.stringify(data, null, 2));
    const expected = { pages: '2', total: 13, items: [...SECOND_PAGE.items, { id: 13, slug: 'reviewer', name: 'Security Reviewer', description: 'Reviews access.', public: 1 }] };
    const ms = await until('the new role listed', async () => {
      const res = await rolesCall(gw, accessToken, 'page=2');
      if (res.body?.message?.total === 13) {
        assertListing(res, expected, 'page 2 with the new role');
        return true;
      }
      assertListing(res, SECOND_PAGE, 'page 2 before the reload');
      return false;
    }, 3000);
    t.diagnostic(`reloaded within ${Math.round(ms)} ms`);
    assertListing(await rolesCall(gw, accessToken, 'limit=5&page=3'), { pages: '3', total: 13, items: expected.items }, 'limit 5, page 3');
  });

  await t.test('a sign record changed by writing the file in place', async () => {
    alice.signRecords[0]!.signedNonce = 4242;
    alice.signRecords[0]!.signedAt = '2026-04-01T06:07:08Z';
    writeFileSync(file, JSON.stringify(data, null, 2));
    const spelling = ALICE_CAPS.address.toLowerCase();
    await until('the changed record served', async () => {
      const res = await signCall(gw, accessToken, spelling);
      assert.equal(res.status, 200, show(res));
      return res.body.message.signedNonce === 4242;
    }, 3000);
    assertSign(await signCall(gw, accessToken, spelling), spelling, { ...ALICE_CAPS, signedNonce: 4242, signedAt: '2026-04-01 06:07:08' }, 'the changed record');
  });

  await t.test('an invalid version is ignored with a warning: the last good version is served', async () => {
    const current = { ...ALICE_CAPS, signedNonce: 4242, signedAt: '2026-04-01 06:07:08' };
    // Invalid by the schema (a role id that is not a number), put in place by rename.
    const before = warned().length;
    const invalid = structuredClone(data) as unknown as { accounts: { roles: Record<string, unknown>[]; signRecords: Record<string, unknown>[] }[] };
    invalid.accounts[0]!.roles[0]!.id = 'abc';
    invalid.accounts[0]!.signRecords[0]!.signedNonce = 1;
    replace(JSON.stringify(invalid, null, 2));
    await until('a warning about the invalid version', async () => warned().length > before, 3000);
    assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, current, 'the record after the invalid version');
    assert.equal((await rolesCall(gw, accessToken, 'page=2')).body.message.total, 13, 'the roles after the invalid version');

    // Not JSON at all, written in place.
    const afterFirst = warned().length;
    writeFileSync(file, '{"accounts": [ {"id": "acct_alice", ');
    await until('a warning about the truncated version', async () => warned().length > afterFirst, 3000);
    assertSign(await signCall(gw, accessToken, ALICE_CAPS.address), ALICE_CAPS.address, current, 'the record after the truncated version');
    assertListing(await rolesCall(gw, accessToken, 'page=1'), { ...FIRST_PAGE, total: 13 }, 'page 1 after the truncated version');
    // The warning lists problems, not the file's content.
    for (const line of warned()) {
      const text = JSON.stringify(line);
      assert.ok(!text.includes('sha256:') && !text.includes('ak_demo'), `the warning carries the file's content: ${text}`);
    }
  });

  await t.test('a valid version after an invalid one is served; a key disabled in it no longer signs in', async () => {
    alice.apiKeys.find((k) => k.id === DEMO.alice.keyId)!.disabled = true;
    alice.signRecords[0]!.signedNonce = 4343;
    replace(JSON.stringify(data, null, 2));
    await until('sign-in refused', async () => {
      const res = await postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
      if (res.status === 200) return false;
      assert.equal(res.status, 401, show(res));
      assert.equal(res.body.message.code, 'invalid_credentials');
      return true;
    }, 3000);
    // The same reload brought the new record.
    const res = await signCall(gw, accessToken, ALICE_CAPS.address);
    assert.equal(res.status, 200, show(res));
    assert.equal(res.body.message.signedNonce, 4343);
    // Another key of the file still signs in.
    await signIn(gw, DEMO.bob);
    assert.ok(logged(gw, 'data file reloaded').length >= 3, 'each good version was logged as reloaded');
  });
});
