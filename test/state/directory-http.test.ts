/**
 * HttpDirectory against a real node:http upstream on 127.0.0.1 that serves the directory
 * fixture in the interface's representation: the envelope {success, message}, a listing with
 * `pages` as a string, string ids, `public` as 0/1, times as `YYYY-MM-DD HH:MM:SS` (UTC), for
 * even-numbered accounts of the data; bare objects with numbers and booleans for the others.
 * Tests may take over the upstream's answers (`upstream.respond`) and count what reached it.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { StoreTimeout, StoreUnavailable } from '../../src/errors/errors.js';
import type { DataFile } from '../../src/state/data-file/data-file.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { HttpDirectory } from '../../src/state/directory/http.js';
import { DIRECTORY_FIXTURE, runDirectoryContract } from '../contracts/directory.contract.js';
import { ADDRESS, expectBadStoreData, PROMPT_MS, rejection, timedPromise } from '../helpers/directory.js';
import { ROOT, startNode, tempDir } from '../helpers/process.js';
import { closedPort, eventually } from '../helpers/proxy.js';
import { silentLog } from '../helpers/redis.js';

// ADDRESS (the fixture's sign record), PROMPT_MS, timedPromise, rejection and expectBadStoreData:
// test/helpers/directory.ts; eventually: test/helpers/proxy.ts.
const TOKEN = 'svc-token-Abc.123';

interface Arrival {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
}

interface Upstream {
  url: string;
  /** Every request that reached the upstream, in arrival order. */
  arrivals: Arrival[];
  /** Takes over the answers while set: return true when the request was handled (or is left hanging). */
  respond: ((arrival: Arrival) => boolean) | undefined;
  /** Resolves with the next request to arrive. */
  nextArrival(): Promise<Arrival>;
  close(): Promise<void>;
}

const localTime = (epochMs: number) => new Date(epochMs).toISOString().slice(0, 19).replace('T', ' ');

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** The upstream's own answer from `data`, as the mapping in directory.http.ts describes it. */
function serveData(data: DataFile, { url, res }: Arrival): void {
  const parts = url.pathname.split('/');
  const index = data.accounts.findIndex((a) => a.id === decodeURIComponent(parts[2] ?? ''));
  const account = data.accounts[index];
  const interfaceForm = index % 2 === 0;
  const notFound = () => sendJson(res, 404, { success: false, message: { code: 'not_found' } });
  if (parts[1] !== 'accounts' || account === undefined) return notFound();

  if (parts.length === 5 && parts[3] === 'sign') {
    const address = decodeURIComponent(parts[4]!).toLowerCase();
    const s = account.signRecords.find((r) => r.address.toLowerCase() === address);
    if (s === undefined) return notFound();
    const record = { did: address, signedNonce: s.signedNonce, signedAt: localTime(Date.parse(s.signedAt)), signedExpiredAt: localTime(Date.parse(s.signedExpiredAt)) };
    return sendJson(res, 200, interfaceForm ? { success: true, message: { ...record, signedNonce: String(s.signedNonce) } } : record);
  }
  if (parts.length === 4 && parts[3] === 'roles') {
    if (account.roles.length === 0) return notFound();
    const page = Number(url.searchParams.get('page') ?? '1');
    const limit = Number(url.searchParams.get('limit') ?? '10');
    const name = url.searchParams.get('name');
    const roles = account.roles
      .filter((r) => name === null || r.name.toLowerCase().includes(name.toLowerCase()))
      .sort((a, b) => a.id - b.id);
    const items = roles.slice((page - 1) * limit, page * limit);
    if (!interfaceForm) return sendJson(res, 200, { items, total: roles.length });
    return sendJson(res, 200, {
      success: true,
      message: {
        pages: String(Math.ceil(roles.length / limit)),
        items: items.map((r) => ({ ...r, id: String(r.id), public: r.public ? 1 : 0 })),
        total: roles.length,
      },
    });
  }
  notFound();
}

async function startUpstream(t: TestContext | undefined, data: DataFile = DIRECTORY_FIXTURE): Promise<Upstream> {
  const sockets = new Set<Socket>();
  const waiters: ((a: Arrival) => void)[] = [];
  const upstream: Upstream = {
    url: '',
    arrivals: [],
    respond: undefined,
    nextArrival: () => new Promise((resolve) => waiters.push(resolve)),
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
  const server = createServer((req, res) => {
    const arrival = { req, res, url: new URL(req.url ?? '/', 'http://upstream') };
    upstream.arrivals.push(arrival);
    for (const wake of waiters.splice(0)) wake(arrival);
    if (upstream.respond?.(arrival)) return;
    serveData(data, arrival);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t?.after(() => upstream.close());
  return upstream;
}

type HttpSettings = Config['directory']['http'];

/** The settings as the gateway's config would hold them (validated by loadConfig). */
function settingsFor(base: string, extra: Partial<HttpSettings> = {}): HttpSettings {
  const config = loadConfig({
    env: {},
    overrides: {
      directory: {
        store: 'http',
        http: {
          signUrl: `${base}/accounts/{accountId}/sign/{address}`,
          rolesUrl: `${base}/accounts/{accountId}/roles`,
          token: TOKEN,
          timeoutMs: 2000,
          maxResponseBytes: 64 * 1024,
          // High: only the breaker's own test lets it open.
          breakerFailures: 1000,
          breakerCooldownMs: 1000,
          ...extra,
        },
      },
    },
  });
  return config.directory.http;
}

function newDirectory(settings: HttpSettings, accountHeader = 'X-Account-Id'): HttpDirectory {
  return new HttpDirectory(settings, { records: createRecordReader('UTC'), accountHeader, log: silentLog });
}

async function expectUnavailable(promise: Promise<unknown>, what: string, retryAfter = '1'): Promise<StoreUnavailable> {
  const err = await rejection(promise, what);
  assert.ok(err instanceof StoreUnavailable, `${what}: expected StoreUnavailable, got ${String(err)}`);
  assert.equal(err.status, 503, what);
  assert.equal(err.code, 'store_unavailable', what);
  assert.equal(err.headers['Retry-After'], retryAfter, `${what}: Retry-After`);
  return err;
}

runDirectoryContract('http', async (data) => {
  const upstream = await startUpstream(undefined, data);
  return { directory: newDirectory(settingsFor(upstream.url)), close: () => upstream.close() };
});

test('HttpDirectory: reads both the interface\'s envelope form and bare objects', async (t) => {
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url));
  const expected = { address: ADDRESS, signedNonce: 42, signedAt: Date.UTC(2026, 2, 1, 12), signedExpiredAt: Date.UTC(2026, 2, 31, 10) };
  const record = { did: ADDRESS, signedNonce: 42, signedAt: '2026-03-01 12:00:00', signedExpiredAt: '2026-03-31 10:00:00' };
  const forms: [string, unknown][] = [
    ['bare, local times', record],
    ['envelope, nonce as digits', { success: true, message: { ...record, signedNonce: '42' } }],
    ['envelope, epoch ms and ISO 8601', { success: true, message: { signedNonce: 42, signedAt: expected.signedAt, signedExpiredAt: '2026-03-31T12:00:00+02:00' } }],
  ];
  for (const [what, body] of forms) {
    upstream.respond = ({ res }) => (sendJson(res, 200, body), true);
    assert.deepEqual(await directory.findSignRecord('acct_a', ADDRESS), expected, what);
  }

  const items = [{ id: 1, slug: 'r1', name: 'One', description: 'd', public: true }, { id: 2, slug: 'r2', name: 'Two', description: '', public: false }];
  const pages: [string, unknown][] = [
    ['bare', { items, total: 7 }],
    ['the interface\'s listing in the envelope', { success: true, message: { pages: '4', total: 7, items: items.map((r) => ({ ...r, id: String(r.id), public: r.public ? 1 : 0 })) } }],
    ['public as "true"/"0", description null', { success: true, message: { pages: '4', total: 7, items: [{ ...items[0], public: 'true' }, { ...items[1], public: '0', description: null }] } }],
  ];
  for (const [what, body] of pages) {
    upstream.respond = ({ res }) => (sendJson(res, 200, body), true);
    assert.deepEqual(await directory.listRoles('acct_a', { offset: 2, limit: 2 }), { items, total: 7 }, what);
  }
});

test('HttpDirectory: what the upstream receives', async (t) => {
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url));

  await t.test('the service credential, the account header, and an encoded account id and address', async () => {
    const before = upstream.arrivals.length;
    assert.equal(await directory.findSignRecord('team:ops@eu', ADDRESS), undefined, 'the fixture has no such account: 404');
    const { req, url } = upstream.arrivals[before]!;
    assert.equal(upstream.arrivals.length, before + 1, 'one request');
    assert.equal(req.method, 'GET');
    assert.equal(url.pathname, `/accounts/team%3Aops%40eu/sign/${ADDRESS}`);
    assert.equal(req.headers.authorization, `Bearer ${TOKEN}`);
    assert.equal(req.headers['x-account-id'], 'team:ops@eu');
    assert.match(req.headers.accept ?? '', /application\/json/);
  });

  await t.test('placeholders never break out of their path segment', async () => {
    const before = upstream.arrivals.length;
    await directory.findSignRecord('a/../b c?d#e%f', '0x/../x');
    await directory.listRoles('a/../b c?d#e%f', { offset: 0, limit: 10 });
    const [sign, roles] = upstream.arrivals.slice(before);
    assert.equal(sign!.url.pathname, '/accounts/a%2F..%2Fb%20c%3Fd%23e%25f/sign/0x%2F..%2Fx');
    assert.equal(sign!.url.search, '');
    assert.equal(roles!.url.pathname, '/accounts/a%2F..%2Fb%20c%3Fd%23e%25f/roles');
    assert.equal(roles!.req.headers['x-account-id'], 'a/../b c?d#e%f');
  });

  await t.test('page, limit and name in the query', async () => {
    const before = upstream.arrivals.length;
    await directory.listRoles('acct_a', { offset: 0, limit: 10 });
    await directory.listRoles('acct_a', { offset: 20, limit: 10, nameContains: 'Role & Co=1 +ü%' });
    await directory.listRoles('acct_a', { offset: 6, limit: 3, nameContains: 'odd' });
    const [first, searched, third] = upstream.arrivals.slice(before).map((a) => a.url);
    assert.deepEqual([...first!.searchParams], [['page', '1'], ['limit', '10']], 'no name without a search');
    assert.equal(first!.pathname, '/accounts/acct_a/roles');
    assert.deepEqual(Object.fromEntries(searched!.searchParams), { page: '3', limit: '10', name: 'Role & Co=1 +ü%' });
    assert.deepEqual(Object.fromEntries(third!.searchParams), { page: '3', limit: '3', name: 'odd' });
  });

  await t.test('a page that does not start on a page boundary is refused without a request', async () => {
    const before = upstream.arrivals.length;
    await assert.rejects(directory.listRoles('acct_a', { offset: 5, limit: 10 }), RangeError);
    assert.equal(upstream.arrivals.length, before);
  });

  await t.test('a query already in rolesUrl is kept; another account header; no token, no Authorization', async () => {
    const settings = settingsFor(upstream.url, { rolesUrl: `${upstream.url}/accounts/{accountId}/roles?v=2&format=json` });
    const other = newDirectory({ ...settings, token: undefined }, 'X-Tenant');
    const before = upstream.arrivals.length;
    assert.equal((await other.listRoles('acct_a', { offset: 0, limit: 2 })).total, 5);
    const { req, url } = upstream.arrivals[before]!;
    assert.deepEqual(Object.fromEntries(url.searchParams), { v: '2', format: 'json', page: '1', limit: '2' });
    assert.equal(req.headers.authorization, undefined);
    assert.equal(req.headers['x-tenant'], 'acct_a');
    assert.equal(req.headers['x-account-id'], undefined);
  });
});

test('HttpDirectory: 404 is "none"; other statuses, redirects included, are StoreUnavailable', async (t) => {
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url));

  upstream.respond = ({ res }) => (res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'), true);
  assert.equal(await directory.findSignRecord('acct_a', ADDRESS), undefined, 'a 404 with an HTML body');
  assert.deepEqual(await directory.listRoles('acct_a', { offset: 0, limit: 10 }), { items: [], total: 0 });
  assert.deepEqual(await directory.listRoles('acct_a', { offset: 0, limit: 10, nameContains: 'x' }), { items: [], total: 0 });

  for (const status of [500, 502, 503, 401, 403, 400, 204, 201, 429]) {
    upstream.respond = ({ res }) => (sendJson(res, status, { success: true, message: { signedNonce: 1, signedAt: 0, signedExpiredAt: 0 } }), true);
    await expectUnavailable(directory.findSignRecord('acct_a', ADDRESS), `sign record, ${status}`);
    await expectUnavailable(directory.listRoles('acct_a', { offset: 0, limit: 10 }), `roles, ${status}`);
  }

  // A redirect is not followed: the target is never asked.
  upstream.respond = ({ url, res }) => {
    if (url.pathname.startsWith('/elsewhere')) return false;
    res.writeHead(302, { location: `${upstream.url}/elsewhere` }).end();
    return true;
  };
  await expectUnavailable(directory.findSignRecord('acct_a', ADDRESS), 'a redirect');
  assert.ok(!upstream.arrivals.some((a) => a.url.pathname.startsWith('/elsewhere')), 'the redirect was not followed');

  upstream.respond = undefined;
  assert.equal((await directory.findSignRecord('acct_a', ADDRESS))?.signedNonce, 42, 'answers again');
});

test('HttpDirectory: an upstream that does not answer is StoreTimeout after about timeoutMs, and the request is abandoned', async (t) => {
  const timeoutMs = 300;
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url, { timeoutMs }));

  const cases: [string, (a: Arrival) => boolean][] = [
    ['no answer at all', () => true],
    ['a head, then a body that never ends', ({ res }) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"items":[');
      return true;
    }],
  ];
  for (const [what, respond] of cases) {
    upstream.respond = respond;
    const arrived = upstream.nextArrival();
    const { value: err, ms } = await timedPromise(rejection(directory.listRoles('acct_a', { offset: 0, limit: 10 }), what));
    assert.ok(err instanceof StoreTimeout, `${what}: expected StoreTimeout, got ${String(err)}`);
    assert.equal(err.status, 504);
    assert.equal(err.code, 'store_timeout');
    assert.equal(err.headers['Retry-After'], '1');
    assert.ok(ms < timeoutMs + PROMPT_MS, `${what}: took ${Math.round(ms)} ms with timeoutMs ${timeoutMs}`);
    const { req } = await arrived;
    await eventually(() => req.socket.destroyed, `${what}: the abandoned request's connection is closed`, PROMPT_MS);
  }
  const { value: err } = await timedPromise(rejection(directory.findSignRecord('acct_a', ADDRESS), 'sign record'));
  assert.ok(err instanceof StoreTimeout, `sign record: ${String(err)}`);

  upstream.respond = undefined;
  assert.equal((await directory.listRoles('acct_a', { offset: 0, limit: 10 })).total, 5, 'answers again');
});

test('HttpDirectory: an answer larger than maxResponseBytes is StoreUnavailable; one of exactly that size is read', async (t) => {
  const maxResponseBytes = 1024;
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url, { maxResponseBytes }));
  /** A valid sign record padded with spaces to `size` bytes. */
  const padded = (size: number) => {
    const text = JSON.stringify({ signedNonce: 5, signedAt: 0, signedExpiredAt: 0 });
    return text + ' '.repeat(size - Buffer.byteLength(text));
  };

  upstream.respond = ({ res }) => (res.writeHead(200, { 'content-type': 'application/json' }).end(padded(maxResponseBytes)), true);
  assert.equal((await directory.findSignRecord('acct_a', ADDRESS))?.signedNonce, 5, 'exactly maxResponseBytes');

  // One byte more. (Kept small, so that the whole answer sits in the socket buffers: see the
  // next test for answers that do not.)
  upstream.respond = ({ res }) => (res.writeHead(200, { 'content-type': 'application/json' }).end(padded(maxResponseBytes + 1)), true);
  const err = await expectUnavailable(directory.findSignRecord('acct_a', ADDRESS), 'one byte more');
  assert.match(String((err.cause as Error).message), /more than 1024 bytes/);
  upstream.respond = ({ res }) => (res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: [], total: 0, pad: 'x'.repeat(2000) })), true);
  await expectUnavailable(directory.listRoles('acct_a', { offset: 0, limit: 10 }), 'roles, 2 kB');
});

/**
 * The refused answer's body must be let go: an answer bigger than the socket buffers holds
 * more data back, and when `timeoutMs` later aborts the fetch, that body must not fail where
 * nobody listens (an unhandled 'error' event ends the process: src/main.ts has no handler).
 * Run in a child process, so that such a failure shows as that process dying, not as noise in
 * this file's other tests.
 */
test('HttpDirectory: an oversized answer bigger than the socket buffers leaves the process running after timeoutMs', async (t) => {
  const dir = tempDir(t, 'directory-http-');
  const script = join(dir, 'oversized.mts');
  const src = (path: string) => JSON.stringify(pathToFileURL(join(ROOT, 'src', path)).href);
  writeFileSync(script, `
    import { createServer } from 'node:http';
    import { setTimeout as sleep } from 'node:timers/promises';
    import { HttpDirectory } from ${src('state/directory/http.ts')};
    import { createRecordReader } from ${src('state/directory/records.ts')};
    import { createLogger } from ${src('telemetry/log.ts')};
    const [mode, timeoutMs] = [process.argv[2], Number(process.argv[3])];
    const huge = 64 * 1024 * 1024;
    let written = 0;
    let closedAt;
    const server = createServer((req, res) => {
      req.socket.once('close', () => { closedAt ??= performance.now(); });
      res.writeHead(200, { 'content-type': 'application/json' });
      if (mode === 'complete') return void res.end(Buffer.alloc(2 * 1024 * 1024, 0x20));
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = () => {
        while (written < huge && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = 'http://127.0.0.1:' + server.address().port;
    const directory = new HttpDirectory(
      { signUrl: base + '/s/{accountId}/{address}', rolesUrl: base + '/r/{accountId}', token: 't', timeoutMs, maxResponseBytes: 1048576, breakerFailures: 5, breakerCooldownMs: 1000 },
      { records: createRecordReader('UTC'), accountHeader: 'X-Account-Id', log: createLogger('silent') },
    );
    const started = performance.now();
    let error;
    try { await directory.listRoles('acct_a', { offset: 0, limit: 10 }); } catch (err) { error = err; }
    const rejectedAfterMs = performance.now() - started;
    // Past the time limit of the abandoned call: a late failure would end the process here.
    await sleep(Math.max(0, timeoutMs + 300 - (performance.now() - started)));
    const closedAfterMs = closedAt === undefined ? null : closedAt - started;
    console.log(JSON.stringify({ error: error?.name, status: error?.status, cause: String(error?.cause?.message), rejectedAfterMs, closedAfterMs, written }));
    server.closeAllConnections();
    server.close();
  `);
  const timeoutMs = 500;
  for (const [mode, what] of [['complete', 'a complete 2 MiB answer (limit 1 MiB)'], ['endless', 'an endless chunked answer (limit 1 MiB)']] as const) {
    await t.test(what, async (t) => {
      const child = startNode(t, [script, mode, String(timeoutMs)]);
      const exit = await child.exited;
      assert.deepEqual(exit, { code: 0, signal: null }, `${what}: the process died ${timeoutMs} ms after the call was refused:\n${child.stderr()}`);
      const result = JSON.parse(child.stdout().trim().split('\n').at(-1)!);
      t.diagnostic(JSON.stringify(result));
      assert.equal(result.error, 'StoreUnavailable', what);
      assert.match(result.cause, /more than 1048576 bytes/, what);
      assert.ok(result.rejectedAfterMs < PROMPT_MS, `${what}: refused after ${Math.round(result.rejectedAfterMs)} ms`);
      assert.notEqual(result.closedAfterMs, null, `${what}: the connection of the refused answer was closed`);
      if (mode === 'endless') assert.ok(result.written < 64 * 1024 * 1024, `${what}: not read to its end`);
    });
  }
});

test('HttpDirectory: an answer that cannot be read is BadStoreData, naming the field, never the value', async (t) => {
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url));
  const raw = (body: string, type = 'application/json') => ({ res }: Arrival) => (res.writeHead(200, { 'content-type': type }).end(body), true);
  const json = (body: unknown) => raw(JSON.stringify(body));

  const notJson: [string, (a: Arrival) => boolean][] = [
    ['an HTML page', raw('<html>SECRET</html>', 'text/html')],
    ['an empty body', raw('')],
    ['cut-off JSON', raw('{"success":true,"message":{"items":[')],
  ];
  for (const [what, respond] of notJson) {
    upstream.respond = respond;
    const err = await expectBadStoreData(directory.listRoles('acct_a', { offset: 0, limit: 10 }), what);
    assert.match(String((err.cause as Error).message), /not JSON/, what);
    await expectBadStoreData(directory.findSignRecord('acct_a', ADDRESS), `sign record: ${what}`);
  }

  for (const envelope of [{ success: false, message: { code: 'SECRET' } }, { success: 'true', message: {} }, { success: 0, message: null }]) {
    upstream.respond = json(envelope);
    const err = await expectBadStoreData(directory.findSignRecord('acct_a', ADDRESS), `envelope ${JSON.stringify(envelope)}`);
    assert.match(String((err.cause as Error).message), /success/);
    await expectBadStoreData(directory.listRoles('acct_a', { offset: 0, limit: 10 }), `roles in envelope ${JSON.stringify(envelope)}`);
  }

  const role = { id: 1, slug: 's', name: 'n', description: '', public: 0 };
  const badPages: [string, unknown, RegExp][] = [
    ['id "SECRET"', { items: [{ ...role, id: 'SECRET' }], total: 1 }, /items\.0\.id/],
    ['public "SECRET"', { items: [{ ...role, public: 'SECRET' }], total: 1 }, /items\.0\.public/],
    ['public 2', { success: true, message: { pages: '1', items: [{ ...role, public: 2 }], total: 1 } }, /items\.0\.public/],
    ['no slug', { items: [role, { ...role, id: 2, slug: undefined }], total: 2 }, /items\.1\.slug/],
    ['total below the items', { items: [role, { ...role, id: 2 }], total: 1 }, /total is less than/],
    ['total "SECRET"', { items: [], total: 'SECRET' }, /total/],
    ['total -1', { items: [], total: -1 }, /total/],
    ['no items', { total: 3, pages: '1' }, /items/],
    ['items not an array', { items: { 0: role }, total: 1 }, /items/],
    ['a bare array', [role], /\(record\)|items/],
  ];
  for (const [what, body, mentions] of badPages) {
    upstream.respond = json(body);
    const err = await expectBadStoreData(directory.listRoles('acct_a', { offset: 0, limit: 10 }), what);
    const message = String((err.cause as Error).message);
    assert.match(message, mentions, what);
    assert.ok(!message.includes('SECRET') && !err.message.includes('SECRET'), `${what}: the value is in the message: ${message}`);
  }

  const sign = { signedNonce: 1, signedAt: '2026-03-01 12:00:00', signedExpiredAt: '2026-03-31 10:00:00' };
  const badRecords: [string, unknown, RegExp][] = [
    ['month 13', { ...sign, signedAt: '2026-13-01 00:00:00' }, /signedAt/],
    ['ISO 8601 without an offset', { ...sign, signedExpiredAt: '2026-03-31T10:00:00' }, /signedExpiredAt/],
    ['a time in words', { success: true, message: { ...sign, signedAt: 'SECRET noon' } }, /signedAt/],
    ['nonce -1', { ...sign, signedNonce: -1 }, /signedNonce/],
    ['nonce "SECRET"', { ...sign, signedNonce: 'SECRET' }, /signedNonce/],
    ['nonce 1.5', { ...sign, signedNonce: 1.5 }, /signedNonce/],
    ['no nonce', { signedAt: sign.signedAt, signedExpiredAt: sign.signedExpiredAt }, /signedNonce/],
    ['null', null, /\(record\)/],
    ['the envelope around a string', { success: true, message: 'SECRET' }, /\(record\)/],
  ];
  for (const [what, body, mentions] of badRecords) {
    upstream.respond = json(body);
    const err = await expectBadStoreData(directory.findSignRecord('acct_a', ADDRESS), what);
    const message = String((err.cause as Error).message);
    assert.match(message, mentions, what);
    assert.ok(!message.includes('SECRET') && !err.message.includes('SECRET'), `${what}: the value is in the message: ${message}`);
  }
});

test('HttpDirectory: bad data does not open the breaker (the upstream answered)', async (t) => {
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url, { breakerFailures: 2, breakerCooldownMs: 60_000 }));
  upstream.respond = ({ res }) => (res.writeHead(200).end('not json'), true);
  for (let i = 0; i < 5; i++) await expectBadStoreData(directory.findSignRecord('acct_a', ADDRESS), `bad answer #${i}`);
  assert.equal(upstream.arrivals.length, 5, 'every call reached the upstream');
  upstream.respond = undefined;
  assert.equal((await directory.findSignRecord('acct_a', ADDRESS))?.signedNonce, 42);
});

test('HttpDirectory: the breaker opens after breakerFailures failures, lets one trial call through after breakerCooldownMs, and recovers', async (t) => {
  const breakerFailures = 3;
  // Long enough that the calls made around a trial all fall inside the cooldown, even on a slow machine.
  const breakerCooldownMs = 1000;
  const retryAfter = '1';
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url, { breakerFailures, breakerCooldownMs, timeoutMs: 10_000 }));
  const call = () => directory.findSignRecord('acct_a', ADDRESS);
  const count = () => upstream.arrivals.length;

  // Failures of every kind count: a 500, a closed connection, a 503.
  const failures: ((a: Arrival) => boolean)[] = [
    ({ res }) => (res.writeHead(500).end(), true),
    ({ req }) => (req.socket.destroy(), true),
    ({ res }) => (res.writeHead(503).end(), true),
  ];
  for (const [i, fail] of failures.entries()) {
    upstream.respond = fail;
    await expectUnavailable(call(), `failure #${i + 1}`, retryAfter);
    assert.equal(count(), i + 1, `failure #${i + 1} reached the upstream`);
  }

  /** While open: fails at once, without a request. */
  async function assertOpen(what: string): Promise<void> {
    const before = count();
    const { value: err, ms } = await timedPromise(expectUnavailable(call(), what, retryAfter));
    assert.match(String((err.cause as Error).message), /circuit breaker open/, what);
    assert.equal(count(), before, `${what}: no request reached the upstream`);
    assert.ok(ms < PROMPT_MS, `${what}: took ${Math.round(ms)} ms`);
  }

  /** Calls until one reaches the upstream (the trial), which is left waiting; returns it and its call. */
  async function trialCall(): Promise<{ arrival: Arrival; result: Promise<unknown> }> {
    const deadline = Date.now() + breakerCooldownMs + 5000;
    const before = count();
    for (;;) {
      const arrived = upstream.nextArrival();
      const result = call();
      const first = await Promise.race([arrived.then((arrival) => ({ arrival })), result.then(() => ({}), () => ({}))]);
      if ('arrival' in first) return { arrival: first.arrival, result };
      await expectUnavailable(result, 'a call before the cooldown ended', retryAfter);
      assert.equal(count(), before, 'only the trial reaches the upstream');
      assert.ok(Date.now() < deadline, 'no trial call within the cooldown and 5 s');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  const held: ServerResponse[] = [];
  upstream.respond = ({ res }) => (held.push(res), true);
  await assertOpen('the first call after the failures');
  await assertOpen('the second call after the failures');

  await t.test('a failed trial opens the breaker again', async () => {
    const opened = Date.now();
    const trial = await trialCall();
    assert.ok(Date.now() - opened < breakerCooldownMs + PROMPT_MS);
    // Calls made while the trial is out do not reach the upstream: they wait for its outcome.
    const waiting = [call(), call(), call()];
    const before = count();
    trial.arrival.res.writeHead(500).end();
    await expectUnavailable(trial.result, 'the failed trial', retryAfter);
    for (const [i, w] of waiting.entries()) {
      const err = await expectUnavailable(w, `call #${i} made during the failed trial`, retryAfter);
      assert.match(String((err.cause as Error).message), /circuit breaker open/);
    }
    assert.equal(count(), before, 'only the trial reached the upstream');
    await assertOpen('right after the failed trial');
  });

  await t.test('a successful trial closes it: calls reach the upstream again', async () => {
    const trial = await trialCall();
    const waiting = [call(), call()];
    const before = count();
    upstream.respond = undefined;
    held.length = 0;
    const { res } = trial.arrival;
    sendJson(res, 200, { signedNonce: 9, signedAt: 0, signedExpiredAt: 0 });
    assert.equal(((await trial.result) as { signedNonce: number }).signedNonce, 9, 'the trial answer is served');
    for (const w of waiting) assert.equal(((await w) as { signedNonce: number }).signedNonce, 42, 'a call that waited for the trial');
    assert.equal(count(), before + 2, 'the calls that waited went to the upstream once it closed');
    for (let i = 0; i < 3; i++) assert.equal((await call())?.signedNonce, 42);
    assert.equal(count(), before + 5, 'every call reaches the upstream');
  });

  await t.test('a 404 counts as an answer: it does not open the breaker', async () => {
    const before = count();
    for (let i = 0; i < breakerFailures + 2; i++) assert.equal(await directory.findSignRecord('acct_none', ADDRESS), undefined);
    assert.equal(count(), before + breakerFailures + 2);
  });
});

test('HttpDirectory: a timeout counts as a failure for the breaker', async (t) => {
  const upstream = await startUpstream(t);
  const directory = newDirectory(settingsFor(upstream.url, { timeoutMs: 100, breakerFailures: 2, breakerCooldownMs: 60_000 }));
  upstream.respond = () => true;
  for (let i = 0; i < 2; i++) assert.ok((await rejection(directory.findSignRecord('acct_a', ADDRESS), `timeout #${i}`)) instanceof StoreTimeout);
  const err = await expectUnavailable(directory.findSignRecord('acct_a', ADDRESS), 'open after two timeouts', '60');
  assert.match(String((err.cause as Error).message), /circuit breaker open/);
  // The open breaker sent nothing. (At most two arrived: on a loaded machine a request that
  // timed out after 100 ms may not have reached the upstream at all.)
  assert.ok(upstream.arrivals.length <= 2, `${upstream.arrivals.length} requests reached the upstream`);
});

test('HttpDirectory: an upstream on a closed port is StoreUnavailable promptly', async () => {
  const base = `http://127.0.0.1:${await closedPort()}`;
  const directory = newDirectory(settingsFor(base, { timeoutMs: 10_000 }));
  for (const [what, call] of [
    ['sign record', () => directory.findSignRecord('acct_a', ADDRESS)],
    ['roles', () => directory.listRoles('acct_a', { offset: 0, limit: 10 })],
  ] as const) {
    const { value: err, ms } = await timedPromise(expectUnavailable(call(), what));
    assert.match(String((err.cause as Error).message), /could not be reached/, what);
    assert.ok(ms < PROMPT_MS, `${what}: took ${Math.round(ms)} ms (timeoutMs 10000)`);
  }
});
