/**
 * Shared by the directory tests, in two parts:
 *
 * - "The gateway's directory API" (test/http/directory-stores.test.ts, test/redis/directory.test.ts):
 *   acct_alice's records in config/demo-data.json as GET /api/sign and GET /api/roles answer
 *   them, the cache settings both files give their gateways, the calls, and the assertions on
 *   the answers and the time things take (reading the log and timing a call: helpers/gateway.ts).
 * - "Directory stores called directly" (test/state/directory-http.test.ts,
 *   test/state/directory-redis.test.ts): timing a store call and taking its rejection apart.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { BadStoreData } from '../../src/errors/errors.js';
import { readDataFile } from '../../src/state/data-file/data-file.js';
import type { Role } from '../../src/state/directory/store.js';
import { call, DEMO, show, timed, type JsonResponse } from './gateway.js';

// ---------------------------------------------------------------------------------------------
// Both kinds of test

/** Generous: answers that wait on nothing (or on a timeout of ≤ 300 ms) must come well within
 * this; the point of a bound is "it did not hang", on a loaded 2-core machine. */
export const PROMPT_MS = 2000;

// ---------------------------------------------------------------------------------------------
// The gateway's directory API: the demo data

export const DEMO_FILE = fileURLToPath(new URL('../../config/demo-data.json', import.meta.url));
export const ACCOUNT = DEMO.alice.accountId;

/** The sign records of acct_alice in config/demo-data.json, as the gateway must answer them. */
export const ALICE_CAPS = { address: '0x52908400098527886E0F7030069857D2E4169EE7', signedNonce: 42, signedAt: '2026-03-01 12:00:00', signedExpiredAt: '2026-03-31 12:00:00' };
export const ALICE_LOWER = { address: '0x8617e340b3d01fa5f11f306f4090fd50e238070d', signedNonce: 7, signedAt: '2026-05-20 08:30:15', signedExpiredAt: '2027-05-20 08:30:15' };
/** An address nobody has a record for (its hex holds no "abc": the bad-data tests search the log for that). */
export const UNKNOWN = '0xfeedface00000000000000000000000000000d0d';

/** acct_alice's roles in config/demo-data.json, in id order. */
export const DEMO_ROLES: Role[] = readDataFile(DEMO_FILE).accounts.find((a) => a.id === ACCOUNT)!.roles
  .map((r) => ({ ...r }))
  .sort((a, b) => a.id - b.id);
/** A role in the listing representation: `public` 0 or 1, fields the gateway does not use dropped. */
export const listed = (r: Role) => ({ id: r.id, slug: r.slug, name: r.name, description: r.description, public: r.public ? 1 : 0 });
/** acct_alice's roles in id order, in the listing representation. */
export const ALICE_ROLES = DEMO_ROLES.map(listed);
export const FIRST_PAGE = { pages: '2', total: 12, items: ALICE_ROLES.slice(0, 10) };
export const SECOND_PAGE = { pages: '2', total: 12, items: ALICE_ROLES.slice(10) };

// ---------------------------------------------------------------------------------------------
// The gateway's directory API: cache settings and deadlines

/** Far above anything the polls wait: a change seen sooner was pushed (or reloaded), not expired. */
export const TTL_MS = 60_000;
export const SWR_MS = 1000;
export const MAX_STALE_MS = 120_000;
/** Past ttl + staleWhileRevalidate: a cached copy is no longer served without asking the store. */
export const PAST_FRESH_MS = TTL_MS + SWR_MS + 1000;
/** How long a change or a recovery may take to show, polled (the default of `until`). */
export const DEADLINE_MS = 10_000;

// ---------------------------------------------------------------------------------------------
// The gateway's directory API: calls and assertions

export const signCall = (gw: { url: string }, token: string, address: string) => call(`${gw.url}/api/sign?address=${address}`, { token });
export const rolesCall = (gw: { url: string }, token: string, query = '') => call(`${gw.url}/api/roles${query === '' ? '' : `?${query}`}`, { token });

export function assertPrompt(ms: number, what: string, bound = PROMPT_MS): void {
  assert.ok(ms < bound, `${what} took ${Math.round(ms)} ms (bound ${bound} ms)`);
}

/** The sign record in the interface's representation; `did` is the caller's own spelling. */
export function assertSign(res: JsonResponse, spelling: string, expected: { signedNonce: number; signedAt: string; signedExpiredAt: string }, what: string): void {
  assert.equal(res.status, 200, `${what}: ${show(res)}`);
  assert.equal(res.headers.get('cache-control'), 'no-store', what);
  assert.deepEqual(res.body, {
    success: true,
    message: { did: spelling, signedNonce: expected.signedNonce, signedAt: expected.signedAt, signedExpiredAt: expected.signedExpiredAt },
  }, what);
}

/** The listing representation: `pages` a string, `id` a number, `public` 0 or 1. */
export function assertListing(res: JsonResponse, expected: { pages: string; total: number; items: unknown[] }, what: string): void {
  assert.equal(res.status, 200, `${what}: ${show(res)}`);
  assert.equal(res.body.success, true, what);
  const message = res.body.message;
  assert.deepEqual(Object.keys(message).sort(), ['items', 'pages', 'total'], what);
  assert.equal(typeof message.pages, 'string', `${what}: pages is a string`);
  for (const item of message.items) {
    assert.ok(Number.isInteger(item.id), `${what}: id is a JSON number`);
    assert.ok(item.public === 0 || item.public === 1, `${what}: public is 0 or 1`);
  }
  assert.deepEqual(message, expected, what);
}

export function assertNotFound(res: JsonResponse, what: string): void {
  assert.equal(res.status, 404, `${what}: ${show(res)}`);
  assert.deepEqual(res.body, { success: false, message: { code: 'sign_record_not_found', description: 'There is no sign record for this address.' } }, what);
}

/** A store failure: the error envelope with the request id, Retry-After, never an auth challenge. */
export function assertStoreError(res: JsonResponse, status: 502 | 503 | 504, what: string, retryAfter: string | null = '1'): void {
  const code = { 502: 'bad_store_data', 503: 'store_unavailable', 504: 'store_timeout' }[status];
  assert.equal(res.status, status, `${what}: ${show(res)}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, what);
  assert.equal(res.headers.get('cache-control'), 'no-store', what);
  assert.deepEqual(Object.keys(res.body).sort(), ['message', 'success'], what);
  assert.equal(res.body.success, false, what);
  assert.deepEqual(Object.keys(res.body.message).sort(), ['code', 'description', 'requestId'], what);
  assert.equal(res.body.message.code, code, what);
  assert.match(res.body.message.description, /^A store the gateway depends on /, what);
  assert.equal(res.body.message.requestId, res.headers.get('x-request-id'), `${what}: the envelope names the request`);
  assert.equal(res.headers.get('retry-after'), retryAfter, `${what}: Retry-After`);
  assert.equal(res.headers.get('www-authenticate'), null, `${what}: a store failure is not an authentication challenge`);
}

/**
 * With the store failing and the cache past ttl + staleWhileRevalidate: acct_alice's cached
 * record (ALICE_CAPS) and first page of roles are served, each promptly.
 */
export async function assertStaleServed(gw: { url: string }, token: string, recordWhat: string, rolesWhat: string): Promise<void> {
  const stale = await timed(() => signCall(gw, token, ALICE_CAPS.address));
  assertSign(stale.res, ALICE_CAPS.address, ALICE_CAPS, recordWhat);
  assertPrompt(stale.ms, 'the stale record');
  const staleRoles = await timed(() => rolesCall(gw, token));
  assertListing(staleRoles.res, FIRST_PAGE, rolesWhat);
  assertPrompt(staleRoles.ms, 'the stale roles');
}

/**
 * Polls `attempt` every 25 ms until it returns true; each attempt may assert on what it sees in
 * between. Returns how long it took; fails after `deadlineMs`.
 */
export async function until(what: string, attempt: () => Promise<boolean>, deadlineMs = DEADLINE_MS): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < deadlineMs) {
    if (await attempt()) return performance.now() - started;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`${what}: not within ${deadlineMs} ms`);
}

// ---------------------------------------------------------------------------------------------
// Directory stores called directly

/** DIRECTORY_FIXTURE's one sign record (acct_a), by its lowercase address. */
export const ADDRESS = '0x52908400098527886e0f7030069857d2e4169ee7';

/** Awaits `promise` and measures how long it took to settle (from this call). */
export async function timedPromise<T>(promise: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await promise;
  return { value, ms: performance.now() - started };
}

/** Settles `promise` as a rejection and returns the error (fails when it resolves). */
export async function rejection(promise: Promise<unknown>, what: string): Promise<unknown> {
  try {
    const value = await promise;
    assert.fail(`${what}: expected a rejection, got ${JSON.stringify(value)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    return err;
  }
}

/** The BadStoreData `promise` rejects with (a 502 bad_store_data), its cause matching `mentions` when given. */
export async function expectBadStoreData(promise: Promise<unknown>, what: string, mentions?: RegExp): Promise<BadStoreData> {
  const err = await rejection(promise, what);
  assert.ok(err instanceof BadStoreData, `${what}: expected BadStoreData, got ${String(err)}`);
  assert.equal(err.status, 502, what);
  assert.equal(err.code, 'bad_store_data', what);
  if (mentions !== undefined) assert.match(String((err.cause as Error | undefined)?.message), mentions, what);
  return err;
}
