/**
 * The directory upstream of bench/directory.ts: an existing HTTP backend as the gateway's
 * "http" directory store reads it (src/state/directory/http.ts). It serves the roles and sign
 * records of the data file's accounts in the interface's representation (the envelope
 * `{success, message}`; a listing with `pages` a string, `id` a number, `public` 0 or 1; times
 * as `YYYY-MM-DD HH:MM:SS`, UTC), answers each call after a fixed delay, and counts the calls
 * per path (query included), so that the benchmark can tell how many store calls a storm of
 * callers cost.
 *
 *   PORT=<port> DATA_FILE=<data file> DELAY_MS=50 TOKEN=<service token> node bench/servers/directory-upstream.ts
 *
 *   GET /accounts/<accountId>/sign/<address>               200: the record; 404: none
 *   GET /accounts/<accountId>/roles?page=&limit=[&name=]   200: the page; 404: the account has no roles
 *   GET /__count                                           {"total": n, "byPath": {"<path?query>": n, …}}
 *
 * A call without `Authorization: Bearer <TOKEN>`, or whose account header (X-Account-Id) names
 * another account than its path, is answered 401 or 400, and counted like any other. /__count
 * is neither counted nor delayed. Plain Node, like the other servers under bench/servers; it
 * reads the data file but imports no file of the repo.
 */
import { readFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';

const port = Number(process.env.PORT);
const dataFile = process.env.DATA_FILE;
const delayMs = Number(process.env.DELAY_MS ?? '50');
const token = process.env.TOKEN;
if (!Number.isInteger(port) || port <= 0 || dataFile === undefined || token === undefined || !Number.isInteger(delayMs) || delayMs < 0) {
  throw new Error('PORT, DATA_FILE and TOKEN must be set (DELAY_MS: a whole number of ms)');
}

interface Role { id: number; slug: string; name: string; description?: string; public: boolean }
interface SignRecord { address: string; signedNonce: number; signedAt: string; signedExpiredAt: string }
interface Account { id: string; roles?: Role[]; signRecords?: SignRecord[] }

const accounts = new Map<string, { roles: Role[]; sign: Map<string, SignRecord> }>();
for (const account of (JSON.parse(readFileSync(dataFile, 'utf8')) as { accounts: Account[] }).accounts) {
  accounts.set(account.id, {
    roles: [...account.roles ?? []].sort((a, b) => a.id - b.id),
    sign: new Map((account.signRecords ?? []).map((s) => [s.address.toLowerCase(), s])),
  });
}

const counts = new Map<string, number>();
let total = 0;

/** The interface's time format, in UTC. */
const interfaceTime = (iso: string) => new Date(Date.parse(iso)).toISOString().slice(0, 19).replace('T', ' ');

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Status and body of one call of the store's API. */
function answer(path: string, query: URLSearchParams, authorization: string | undefined, accountHeader: string | undefined): [number, unknown] {
  if (authorization !== `Bearer ${token}`) return [401, { success: false, message: { code: 'unauthorized' } }];
  const m = /^\/accounts\/([^/]+)\/(?:sign\/([^/]+)|roles)$/.exec(path);
  if (m === null) return [404, { success: false, message: { code: 'not_found' } }];
  const accountId = decodeURIComponent(m[1]!);
  if (accountHeader !== accountId) return [400, { success: false, message: { code: 'account_mismatch' } }];
  const account = accounts.get(accountId);
  if (m[2] !== undefined) {
    const address = decodeURIComponent(m[2]);
    const record = account?.sign.get(address.toLowerCase());
    if (record === undefined) return [404, { success: false, message: { code: 'sign_record_not_found' } }];
    return [200, { success: true, message: { did: address, signedNonce: record.signedNonce, signedAt: interfaceTime(record.signedAt), signedExpiredAt: interfaceTime(record.signedExpiredAt) } }];
  }
  if (account === undefined || account.roles.length === 0) return [404, { success: false, message: { code: 'no_roles' } }];
  const page = Number(query.get('page') ?? '1');
  const limit = Number(query.get('limit') ?? '10');
  if (!Number.isInteger(page) || page < 1 || !Number.isInteger(limit) || limit < 1) return [400, { success: false, message: { code: 'invalid_request' } }];
  const name = query.get('name')?.toLowerCase();
  const matching = name === undefined ? account.roles : account.roles.filter((r) => r.name.toLowerCase().includes(name));
  const items = matching.slice((page - 1) * limit, page * limit).map((r) => ({ id: r.id, slug: r.slug, name: r.name, description: r.description ?? '', public: r.public ? 1 : 0 }));
  return [200, { success: true, message: { pages: String(Math.ceil(matching.length / limit)), items, total: matching.length } }];
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://upstream');
  if (url.pathname === '/__count') return send(res, 200, { total, byPath: Object.fromEntries(counts) });
  const key = `${url.pathname}${url.search}`;
  counts.set(key, (counts.get(key) ?? 0) + 1);
  total++;
  const [status, body] = answer(url.pathname, url.searchParams, req.headers.authorization, req.headers['x-account-id'] as string | undefined);
  setTimeout(() => send(res, status, body), delayMs);
});
// Longer than any pause between storms, so that the gateway's pooled connection is never closed
// by this side just as the gateway reuses it.
server.keepAliveTimeout = 300_000;
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
