/**
 * Bad input to the owner API, one table across its operations: each row is answered with a 4xx
 * in the error envelope, naming the field at fault where there is one, and never a 500; and
 * nothing the rows tried was written. The rows run against one account and owner made through
 * the API (operator, initial password, change), with one object of each kind, some deleted.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBase62 } from '../../src/domain/random.js';
import { show, type JsonResponse } from '../helpers/gateway.js';
import { ManualClock } from '../helpers/clock.js';
import { accountWithOwner, anonymous, operator as operatorClient, signIn as signInOwner, startOwnerGateway, type OwnerSession } from '../helpers/owner.js';

const A = 'acct_valid_alice';
const ROLE = { id: 1, slug: 'reader', name: 'Reader', description: 'Reads.', public: true };
const WRITER = { id: 3, slug: 'writer', name: 'Writer', description: '', public: false };
const RECORD = { address: `0x${'ab'.repeat(20)}`, signedNonce: 1, signedAt: '2026-01-01T00:00:00Z', signedExpiredAt: '2027-01-01T00:00:00Z' };
const IDLE_SECONDS = 600;

interface Row {
  what: string;
  send: () => Promise<JsonResponse>;
  status: number;
  code: string;
  /** The `field` the answer must name; absent: it must name none. */
  field?: string;
}

function assertRefused(res: JsonResponse, row: Row): void {
  const what = `${row.what}: ${show(res)}`;
  assert.ok(res.status >= 400 && res.status < 500, what);
  assert.equal(res.status, row.status, what);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, what);
  assert.deepEqual(Object.keys(res.body).sort(), ['message', 'success'], what);
  assert.equal(res.body.success, false, what);
  assert.deepEqual(Object.keys(res.body.message).sort(), row.field === undefined ? ['code', 'description'] : ['code', 'description', 'field'], what);
  assert.equal(res.body.message.code, row.code, what);
  assert.equal(typeof res.body.message.description, 'string', what);
  assert.equal(res.body.message.field, row.field, what);
}

/** A request the JSON helpers cannot send: raw text, any content type. */
async function fetchRaw(gw: { url: string }, session: OwnerSession, method: string, path: string, body: string, contentType = 'application/json'): Promise<JsonResponse> {
  const res = await fetch(`${gw.url}/owner/v1${path}`, { method, headers: { cookie: session.cookie, 'x-csrf-token': session.csrfToken, 'content-type': contentType }, body });
  const text = await res.text();
  let parsed: unknown;
  try { parsed = JSON.parse(text); } catch { parsed = { unparsed: text }; }
  return { status: res.status, headers: res.headers, body: parsed };
}

test('bad input anywhere in the owner API is a 4xx naming the field, never a 500, and writes nothing', async (t) => {
  const clock = new ManualClock(Date.parse('2026-11-23T21:00:00Z'));
  const gw = await startOwnerGateway(t, { clock, overrides: { owner: { sessionIdleSeconds: IDLE_SECONDS } } });
  const operator = operatorClient(gw);
  const email = 'alice@example.com';
  const password = `alice ${randomBase62(20)}`;
  const alice = await accountWithOwner(gw, { accountId: A, email, password });
  const nobody = anonymous(gw);
  const created = async (path: string, body: unknown) => {
    const res = await alice.send('POST', `/accounts/${A}${path}`, body);
    assert.equal(res.status, 201, `${path}: ${show(res)}`);
    return res.body.message;
  };
  await created('/roles', ROLE);
  await created('/roles', WRITER);
  await created('/sign-records', RECORD);
  const key = (await created('/keys', { name: 'kept' })).key.id as string;
  // Deleted objects, for the rows that change them.
  const goneKey = (await created('/keys', { name: 'gone' })).key.id as string;
  assert.equal((await alice.send('DELETE', `/accounts/${A}/keys/${goneKey}`)).status, 200);
  await created('/roles', { ...ROLE, id: 2, slug: 'gone' });
  assert.equal((await alice.send('DELETE', `/accounts/${A}/roles/2`)).status, 200);
  const goneAddress = `0x${'cd'.repeat(20)}`;
  await created('/sign-records', { ...RECORD, address: goneAddress });
  assert.equal((await alice.send('DELETE', `/accounts/${A}/sign-records/${goneAddress}`)).status, 200);
  const goneAccount = 'acct_valid_gone';
  assert.equal((await operator.send('POST', '/accounts', { id: goneAccount, name: 'Gone' })).status, 201);
  assert.equal((await operator.send('DELETE', `/accounts/${goneAccount}`)).status, 200);
  const aliceId = alice.signIn.body.message.owner.id as string;
  // A session that was signed out, and one left idle past the limit.
  const signedOut = await signInOwner(gw, email, password);
  assert.equal((await signedOut.send('DELETE', '/session')).status, 200);
  const idle = await signInOwner(gw, email, password);

  const auditBefore = (await operator.send('GET', `/accounts/${A}/audit?limit=100`)).body.message;
  const long = (n: number) => 'x'.repeat(n);
  const k = `/accounts/${A}/keys`;
  const rows: Row[] = [
    // Duplicates
    { what: 'a taken account id', send: () => operator.send('POST', '/accounts', { id: A, name: 'again' }), status: 409, code: 'conflict', field: 'id' },
    { what: 'a deleted account\'s id (never reused)', send: () => operator.send('POST', '/accounts', { id: goneAccount, name: 'again' }), status: 409, code: 'conflict', field: 'id' },
    { what: 'a taken role id', send: () => alice.send('POST', `/accounts/${A}/roles`, { ...ROLE, slug: 'other' }), status: 409, code: 'conflict', field: 'id' },
    { what: 'a taken role slug', send: () => alice.send('POST', `/accounts/${A}/roles`, { ...ROLE, id: 4 }), status: 409, code: 'conflict', field: 'slug' },
    { what: 'a role moved onto a taken id', send: () => alice.send('PUT', `/accounts/${A}/roles/3`, { ...WRITER, id: 1 }), status: 409, code: 'conflict', field: 'id' },
    { what: 'a role given a taken slug', send: () => alice.send('PUT', `/accounts/${A}/roles/3`, { ...WRITER, slug: ROLE.slug }), status: 409, code: 'conflict', field: 'slug' },
    { what: 'a second sign record for an address', send: () => alice.send('POST', `/accounts/${A}/sign-records`, { ...RECORD, address: RECORD.address.toUpperCase().replace('0X', '0x') }), status: 409, code: 'conflict', field: 'address' },
    { what: 'an owner added twice', send: () => operator.send('POST', `/accounts/${A}/owners`, { email: email.toUpperCase(), initialPassword: long(20) }), status: 409, code: 'conflict', field: 'email' },
    { what: 'a member invited', send: () => alice.send('POST', `/accounts/${A}/invites`, { email }), status: 409, code: 'conflict', field: 'email' },
    { what: 'the last owner removed', send: () => alice.send('DELETE', `/accounts/${A}/members/${aliceId}`), status: 409, code: 'conflict', field: 'ownerId' },
    // Oversized
    { what: 'an account name of 101', send: () => alice.send('PATCH', `/accounts/${A}`, { name: long(101) }), status: 400, code: 'invalid_request', field: 'name' },
    { what: 'a key name of 101', send: () => alice.send('POST', k, { name: long(101) }), status: 400, code: 'invalid_request', field: 'name' },
    { what: 'a key description of 4097', send: () => alice.send('PATCH', `${k}/${key}`, { description: long(4097) }), status: 400, code: 'invalid_request', field: 'description' },
    { what: 'a settings token name of 101', send: () => alice.send('POST', `/accounts/${A}/settings-tokens`, { name: long(101) }), status: 400, code: 'invalid_request', field: 'name' },
    { what: 'a role name of 257', send: () => alice.send('POST', `/accounts/${A}/roles`, { ...ROLE, id: 9, slug: 'n', name: long(257) }), status: 400, code: 'invalid_request', field: 'name' },
    { what: 'a role description of 4097', send: () => alice.send('PUT', `/accounts/${A}/roles/1`, { ...ROLE, description: long(4097) }), status: 400, code: 'invalid_request', field: 'description' },
    { what: 'an email of 255', send: () => alice.send('POST', `/accounts/${A}/invites`, { email: `${long(243)}@example.com` }), status: 400, code: 'invalid_request', field: 'email' },
    // Unknown fields
    { what: 'an unknown field in a new account', send: () => operator.send('POST', '/accounts', { id: 'acct_new', name: 'n', plan: 'gold' }), status: 400, code: 'invalid_request', field: 'plan' },
    { what: 'an unknown field in a key change', send: () => alice.send('PATCH', `${k}/${key}`, { nickname: 'k' }), status: 400, code: 'invalid_request', field: 'nickname' },
    { what: 'a digest offered for a new key', send: () => alice.send('POST', k, { name: 'k', secretDigest: `sha256:${'0'.repeat(64)}` }), status: 400, code: 'invalid_request', field: 'secretDigest' },
    { what: 'an unknown field in a sign-in', send: () => alice.send('POST', '/session', { email, password, remember: true }), status: 400, code: 'invalid_request', field: 'remember' },
    { what: 'an unknown field in a role', send: () => alice.send('PUT', `/accounts/${A}/roles/1`, { ...ROLE, color: 'red' }), status: 400, code: 'invalid_request', field: 'color' },
    { what: 'an unknown query parameter', send: () => alice.send('GET', `${k}?page=2`), status: 400, code: 'invalid_request', field: 'page' },
    // Wrong types and ranges
    { what: 'a key name as a number', send: () => alice.send('POST', k, { name: 42 }), status: 400, code: 'invalid_request', field: 'name' },
    { what: 'enabled as text', send: () => alice.send('PATCH', `${k}/${key}`, { enabled: 'no' }), status: 400, code: 'invalid_request', field: 'enabled' },
    { what: 'scopes as text', send: () => alice.send('POST', k, { name: 'k', scopes: 'read' }), status: 400, code: 'invalid_request', field: 'scopes' },
    { what: 'a scope with a space', send: () => alice.send('POST', k, { name: 'k', scopes: ['read', 'write all'] }), status: 400, code: 'invalid_request', field: 'scopes.1' },
    { what: 'an overlap as text', send: () => alice.send('POST', `${k}/${key}/roll`, { overlapSeconds: '60' }), status: 400, code: 'invalid_request', field: 'overlapSeconds' },
    { what: 'an overlap past 30 days', send: () => alice.send('POST', `${k}/${key}/roll`, { overlapSeconds: 2_592_001 }), status: 400, code: 'invalid_request', field: 'overlapSeconds' },
    { what: 'a negative token lifetime', send: () => alice.send('POST', `/accounts/${A}/settings-tokens`, { name: 't', expiresInSeconds: -1 }), status: 400, code: 'invalid_request', field: 'expiresInSeconds' },
    { what: 'a role id as text', send: () => alice.send('POST', `/accounts/${A}/roles`, { ...ROLE, id: '5' }), status: 400, code: 'invalid_request', field: 'id' },
    { what: 'public as 1', send: () => alice.send('POST', `/accounts/${A}/roles`, { ...ROLE, id: 5, public: 1 }), status: 400, code: 'invalid_request', field: 'public' },
    { what: 'a nonce as text', send: () => alice.send('PUT', `/accounts/${A}/sign-records/${RECORD.address}`, { ...RECORD, address: undefined, signedNonce: '2' }), status: 400, code: 'invalid_request', field: 'signedNonce' },
    { what: 'an expiry before signing', send: () => alice.send('PUT', `/accounts/${A}/sign-records/${RECORD.address}`, { signedNonce: 2, signedAt: RECORD.signedExpiredAt, signedExpiredAt: RECORD.signedAt }), status: 400, code: 'invalid_request', field: 'signedExpiredAt' },
    { what: 'a limit of 0', send: () => alice.send('GET', `${k}?limit=0`), status: 400, code: 'invalid_request', field: 'limit' },
    { what: 'a malformed account id in the path', send: () => alice.send('GET', `/accounts/${long(129)}`), status: 400, code: 'invalid_request', field: 'accountId' },
    { what: 'a malformed role id in the path', send: () => alice.send('GET', `/accounts/${A}/roles/-1`), status: 400, code: 'invalid_request', field: 'roleId' },
    { what: 'a malformed address in the path', send: () => alice.send('GET', `/accounts/${A}/sign-records/0x12`), status: 400, code: 'invalid_request', field: 'address' },
    // Not an email
    { what: 'an owner email that is not one', send: () => operator.send('POST', `/accounts/${A}/owners`, { email: 'not-an-email', initialPassword: long(20) }), status: 400, code: 'invalid_request', field: 'email' },
    { what: 'an invite email that is not one', send: () => alice.send('POST', `/accounts/${A}/invites`, { email: 'alice@' }), status: 400, code: 'invalid_request', field: 'email' },
    // Passwords under the minimum (15)
    { what: 'an initial password of 14', send: () => operator.send('POST', `/accounts/${A}/owners`, { email: 'dave@example.com', initialPassword: long(14) }), status: 400, code: 'invalid_request', field: 'initialPassword' },
    { what: 'a new password of 14', send: () => alice.send('POST', '/session/password', { currentPassword: password, newPassword: long(14) }), status: 400, code: 'invalid_request', field: 'newPassword' },
    { what: 'an invite accepted with a password of 14', send: () => alice.send('POST', '/invites/accept', { token: `gwinv_${long(43)}`, password: long(14) }), status: 400, code: 'invalid_request', field: 'password' },
    // Changes to deleted objects
    { what: 'a deleted key renamed', send: () => alice.send('PATCH', `${k}/${goneKey}`, { name: 'back' }), status: 404, code: 'not_found' },
    { what: 'a deleted key rolled', send: () => alice.send('POST', `${k}/${goneKey}/roll`, { overlapSeconds: 0 }), status: 404, code: 'not_found' },
    { what: 'a deleted key reset', send: () => alice.send('POST', `${k}/${goneKey}/reset`), status: 404, code: 'not_found' },
    { what: 'a deleted key deleted again', send: () => alice.send('DELETE', `${k}/${goneKey}`), status: 404, code: 'not_found' },
    { what: 'a deleted role replaced', send: () => alice.send('PUT', `/accounts/${A}/roles/2`, { ...ROLE, id: 2, slug: 'gone' }), status: 404, code: 'not_found' },
    { what: 'a deleted sign record replaced', send: () => alice.send('PUT', `/accounts/${A}/sign-records/${goneAddress}`, { signedNonce: 2, signedAt: RECORD.signedAt, signedExpiredAt: RECORD.signedExpiredAt }), status: 404, code: 'not_found' },
    { what: 'a deleted account renamed', send: () => operator.send('PATCH', `/accounts/${goneAccount}`, { name: 'back' }), status: 404, code: 'not_found' },
    { what: 'a role created in a deleted account', send: () => operator.send('POST', `/accounts/${goneAccount}/roles`, { ...ROLE, id: 50, slug: 'z' }), status: 404, code: 'not_found' },
    // Sessions and CSRF
    { what: 'a signed-out session', send: () => signedOut.send('GET', `/accounts/${A}/keys`), status: 401, code: 'session_required' },
    { what: 'a signed-out session changing something', send: () => signedOut.send('POST', k, { name: 'k' }), status: 401, code: 'session_required' },
    { what: 'a made-up session', send: () => nobody.get('/session', { cookie: `gw_session=${randomBase62(43)}` }), status: 401, code: 'session_required' },
    { what: 'no credentials at all', send: () => nobody.get(`/accounts/${A}`), status: 401, code: 'session_required' },
    { what: 'a wrong admin token', send: () => operatorClient(gw, `gwadm_${randomBase62(43)}`).get('/accounts'), status: 401, code: 'invalid_credentials' },
    { what: 'a change without the CSRF token', send: () => nobody.send('POST', k, { name: 'k' }, { cookie: alice.cookie }), status: 403, code: 'csrf_failed' },
    { what: 'a change with another session\'s CSRF token', send: () => nobody.send('DELETE', `/accounts/${A}/roles/1`, undefined, { cookie: alice.cookie, 'x-csrf-token': idle.csrfToken }), status: 403, code: 'csrf_failed' },
    { what: 'a change from another origin', send: () => alice.send('POST', k, { name: 'k' }, { origin: 'https://evil.example' }), status: 403, code: 'csrf_failed' },
    { what: 'a change from a cross-site page', send: () => alice.send('PUT', `/accounts/${A}/roles/1`, ROLE, { 'sec-fetch-site': 'cross-site' }), status: 403, code: 'csrf_failed' },
    // Bodies
    { what: 'malformed JSON', send: () => fetchRaw(gw, alice, 'POST', k, '{"name": "k",', 'application/json'), status: 400, code: 'invalid_request' },
    { what: 'a JSON array', send: () => fetchRaw(gw, alice, 'POST', k, '[{"name":"k"}]', 'application/json'), status: 400, code: 'invalid_request' },
    { what: 'JSON null', send: () => fetchRaw(gw, alice, 'PUT', `/accounts/${A}/roles/1`, 'null', 'application/json'), status: 400, code: 'invalid_request' },
    { what: 'no body where one is needed', send: () => fetchRaw(gw, alice, 'POST', `/accounts/${A}/roles`, '', 'application/json'), status: 400, code: 'invalid_request' },
    { what: 'a form body', send: () => fetchRaw(gw, alice, 'POST', k, 'name=k', 'application/x-www-form-urlencoded'), status: 415, code: 'unsupported_media_type' },
    { what: 'a text body', send: () => fetchRaw(gw, alice, 'POST', k, '{"name":"k"}', 'text/plain'), status: 415, code: 'unsupported_media_type' },
    { what: 'a huge body', send: () => fetchRaw(gw, alice, 'POST', `/accounts/${A}/roles`, JSON.stringify({ ...ROLE, id: 77, slug: 'huge', description: long(200_000) })), status: 413, code: 'payload_too_large' },
    { what: 'a huge body on a call that takes none', send: () => fetchRaw(gw, alice, 'DELETE', `/accounts/${A}/roles/1`, long(200_000)), status: 413, code: 'payload_too_large' },
  ];

  for (const row of rows) assertRefused(await row.send(), row);

  await t.test('a session left idle past the limit is refused, with the same answer as a signed-out one', async () => {
    clock.advance((IDLE_SECONDS + 1) * 1000);
    const row: Row = { what: 'an idle session', send: () => idle.send('GET', `/accounts/${A}/keys`), status: 401, code: 'session_required' };
    assertRefused(await row.send(), row);
  });

  await t.test('nothing the rows tried was written', async () => {
    const fresh = await signInOwner(gw, email, password);
    const audit = await operator.send('GET', `/accounts/${A}/audit?limit=100`);
    assert.deepEqual(audit.body.message.items.filter((e: { action: string }) => !e.action.startsWith('session.')), auditBefore.items.filter((e: { action: string }) => !e.action.startsWith('session.')));
    const roles = await fresh.send('GET', `/accounts/${A}/roles`);
    assert.deepEqual(roles.body.message.items, [ROLE, WRITER]);
    const keys = await fresh.send('GET', k);
    assert.deepEqual(keys.body.message.items.map((x: { id: string }) => x.id), [key]);
    const record = await fresh.send('GET', `/accounts/${A}/sign-records/${RECORD.address}`);
    assert.equal(record.body.message.signedNonce, RECORD.signedNonce);
  });
});

/** Refused in every text field: lone surrogates (either half), NUL, ESC and bidi controls. */
const UNSAFE_ANYWHERE: [string, string][] = [
  ['a lone high surrogate', '\ud800'], ['a lone low surrogate', '\udc00'], ['NUL', '\u0000'], ['ESC', '\u001b'], ['DEL', '\u007f'],
  ['RLO', '\u202e'], ['RLI', '\u2067'], ['PDI', '\u2069'], ['ALM', '\u061c'], ['RLM', '\u200f'],
];
/** Refused in names besides (and in emails, tokens and cursors), but kept in descriptions and passwords. */
const UNSAFE_IN_NAMES: [string, string][] = [
  ['a line break', '\n'], ['a tab', '\t'], ['a line separator', '\u2028'], ['a paragraph separator', '\u2029'], ['a tag character', '\u{E0041}'], ['a cancel tag', '\u{E007F}'],
];

test('every text field of the owner API refuses lone surrogates, NUL and bidi controls, and names also line separators and tag characters, with a 400 naming the field', async (t) => {
  const gw = await startOwnerGateway(t);
  const operator = operatorClient(gw);
  const email = 'text@example.com';
  const password = `text ${randomBase62(20)}`;
  const alice = await accountWithOwner(gw, { accountId: A, email, password });
  const key = await alice.send('POST', `/accounts/${A}/keys`, { name: 'kept' });
  assert.equal(key.status, 201, show(key));
  const k = `/accounts/${A}/keys/${key.body.message.key.id}`;
  assert.equal((await alice.send('POST', `/accounts/${A}/roles`, ROLE)).status, 201);

  type Field = [what: string, field: string, send: (text: string) => Promise<JsonResponse>];
  const names: Field[] = [
    ['a new account\'s name', 'name', (x) => operator.send('POST', '/accounts', { id: 'acct_text_new', name: `a${x}` })],
    ['an account renamed', 'name', (x) => alice.send('PATCH', `/accounts/${A}`, { name: `a${x}` })],
    ['a new key\'s name', 'name', (x) => alice.send('POST', `/accounts/${A}/keys`, { name: `k${x}` })],
    ['a key renamed', 'name', (x) => alice.send('PATCH', k, { name: `k${x}` })],
    ['a settings token\'s name', 'name', (x) => alice.send('POST', `/accounts/${A}/settings-tokens`, { name: `t${x}` })],
    ['a new role\'s name', 'name', (x) => alice.send('POST', `/accounts/${A}/roles`, { ...ROLE, id: 8, slug: 'new', name: `r${x}` })],
    ['a role renamed', 'name', (x) => alice.send('PUT', `/accounts/${A}/roles/1`, { ...ROLE, name: `r${x}` })],
    ['an owner\'s email', 'email', (x) => operator.send('POST', `/accounts/${A}/owners`, { email: `d${x}@example.com`, initialPassword: 'x'.repeat(20) })],
    ['an invite\'s email', 'email', (x) => alice.send('POST', `/accounts/${A}/invites`, { email: `i${x}@example.com` })],
    ['a sign-in\'s email', 'email', (x) => alice.send('POST', '/session', { email: `text${x}@example.com`, password })],
    ['an invite token', 'token', (x) => alice.send('POST', '/invites/accept', { token: `gwinv_${x}`, password: 'x'.repeat(20) })],
  ];
  const texts: Field[] = [
    ['a new key\'s description', 'description', (x) => alice.send('POST', `/accounts/${A}/keys`, { name: 'k', description: `d${x}` })],
    ['a key\'s description changed', 'description', (x) => alice.send('PATCH', k, { description: `d${x}` })],
    ['a new role\'s description', 'description', (x) => alice.send('POST', `/accounts/${A}/roles`, { ...ROLE, id: 8, slug: 'new', description: `d${x}` })],
    ['a role\'s description changed', 'description', (x) => alice.send('PUT', `/accounts/${A}/roles/1`, { ...ROLE, description: `d${x}` })],
    ['an initial password', 'initialPassword', (x) => operator.send('POST', `/accounts/${A}/owners`, { email: 'dave@example.com', initialPassword: `x${x}${'x'.repeat(20)}` })],
    ['a new password', 'newPassword', (x) => alice.send('POST', '/session/password', { currentPassword: password, newPassword: `x${x}${'x'.repeat(20)}` })],
    ['a current password', 'currentPassword', (x) => alice.send('POST', '/session/password', { currentPassword: `${password}${x}`, newPassword: 'x'.repeat(20) })],
    ['a sign-in\'s password', 'password', (x) => alice.send('POST', '/session', { email, password: `${password}${x}` })],
    ['an invite\'s password', 'password', (x) => alice.send('POST', '/invites/accept', { token: `gwinv_${'x'.repeat(43)}`, password: `x${x}${'x'.repeat(20)}` })],
  ];
  // A query string cannot carry a lone surrogate (it has no UTF-8): the other characters only.
  const queries: Field[] = [
    ['a role search', 'name', (x) => alice.send('GET', `/accounts/${A}/roles?name=${encodeURIComponent(x)}`)],
    ['a listing cursor', 'cursor', (x) => alice.send('GET', `/accounts/${A}/keys?cursor=c${encodeURIComponent(x)}`)],
  ];

  const refuses = async ([what, field, send]: Field, [character, text]: [string, string]) => {
    const row: Row = { what: `${what} with ${character}`, send: () => send(text), status: 400, code: 'invalid_request', field };
    assertRefused(await row.send(), row);
  };
  for (const field of [...names, ...texts]) for (const bad of UNSAFE_ANYWHERE) await refuses(field, bad);
  for (const field of names) for (const bad of UNSAFE_IN_NAMES) await refuses(field, bad);
  for (const field of queries) for (const bad of [...UNSAFE_ANYWHERE, ...UNSAFE_IN_NAMES].filter(([, x]) => x.isWellFormed())) await refuses(field, bad);

  // What stays allowed: letters of any script, emoji (a surrogate pair is no lone surrogate),
  // and in descriptions, lines and tabs.
  const renamed = await alice.send('PATCH', k, { name: 'Zoë’s 鍵 😀', description: 'Line one\n\tline two 😀' });
  assert.equal(renamed.status, 200, show(renamed));
  assert.equal(renamed.body.message.description, 'Line one\n\tline two 😀');
  const role = await alice.send('PUT', `/accounts/${A}/roles/1`, { ...ROLE, name: 'Lecteur émérite 😀', description: 'a\nb' });
  assert.equal(role.status, 200, show(role));
});
