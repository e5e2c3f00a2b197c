/**
 * The OpenAPI document against the real gateway. The document is valid OpenAPI 3.1, and a walk
 * through every route it lists meets each status it documents at least once, with every answer
 * checked against the document (helpers/openapi.ts): an undocumented status or field fails.
 * The walk reads the owner operations from the document itself, so it grows with them: generic
 * probes (no credentials, a foreign Origin, an oversized or mistyped body, an unknown field, an
 * account that is not there, a lockout) reach every operation by its shape, and the scenario
 * below reaches the successes and each operation's own errors by their agreed method and path.
 * Only store failures (502, 503, 504) are left out: docs/api.md and the store suites cover them.
 */
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Secret, TOTP } from 'otpauth';
import { z } from 'zod';
import { buildOpenApiDocument } from '../../src/http/openapi/document.js';
import { operationStatuses } from '../../src/http/openapi/schemas.js';
import { operation } from '../../src/http/owner/operation.js';
import { VERIFY_TOKEN_PREFIX } from '../../src/owner/email-verification.js';
import { makeOneTimeToken } from '../../src/owner/one-time-tokens.js';
import { RESET_TOKEN_PREFIX } from '../../src/owner/password-reset.js';
import { DEMO, sha256Hex, startGateway, type TestGateway } from '../helpers/gateway.js';
import { signedReport, startKeyServer } from '../helpers/leak-reporter.js';
import { ROOT, tempDir } from '../helpers/process.js';
import { redisSuite, startRedis } from '../helpers/redis.js';
import { conformance, type Conformance, type DocumentedOperation } from '../helpers/openapi.js';
import { drive, startLoginProvider, SSO_CLIENT_ID, SSO_CLIENT_SECRET } from '../helpers/oidc-login.js';
import { makeAdminToken, newPassword, OwnerApi, operatorCredential, PREFIX, sessionCredential, type Credential } from '../helpers/owner-api.js';
import { softPasskey } from '../helpers/webauthn.js';

const ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';
const NO_ADDRESS = `0x${'0'.repeat(40)}`;
const EVIL_ORIGIN = 'https://evil.example';

/** A value for a path parameter that names nothing (or, for `accountId`, the account given). */
function placeholder(name: string, accountId: string): string {
  if (name === 'accountId') return accountId;
  if (name === 'address') return NO_ADDRESS;
  if (name === 'roleId') return '999999';
  return `${name.replace(/Id$/, '')}_nope`;
}

function fill(op: DocumentedOperation, accountId: string, override: Record<string, string> = {}): string {
  return op.path.replaceAll(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(override[name] ?? placeholder(name, accountId)));
}

const isOwner = (op: DocumentedOperation) => op.path.startsWith(`${PREFIX}/`);
const auth = (op: DocumentedOperation) => {
  const security = op.operation.security ?? [];
  if (security.length === 0) return 'public';
  return security.some((s) => 'adminToken' in s) ? 'caller' : 'session';
};
const takesBody = (op: DocumentedOperation) => op.operation.requestBody !== undefined;

test('GET /openapi.json is a valid OpenAPI 3.1 document naming every public route', async (t) => {
  const gw = await startGateway(t);
  const res = await fetch(`${gw.url}/openapi.json`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('cache-control'), 'public, max-age=300');
  const document = await res.json() as { openapi: string; paths: Record<string, Record<string, { operationId: string }>> };
  assert.equal(document.openapi, '3.1.0');
  const validator = new Validator();
  const result = await validator.validate(document);
  assert.ok(result.valid, JSON.stringify(result.errors, null, 1));
  for (const [method, path] of [['post', '/api/signin'], ['post', '/api/refresh'], ['post', '/api/reset'], ['get', '/api/sign'], ['post', '/api/sign'],
    ['get', '/api/roles'], ['get', '/.well-known/jwks.json'], ['get', '/healthz'], ['get', '/readyz'],
    ['post', '/api/token'], ['get', '/.well-known/oauth-authorization-server'], ['get', '/.well-known/openid-configuration']] as const) {
    assert.ok(document.paths[path]?.[method] !== undefined, `${method} ${path} is described`);
  }
  const ids = Object.values(document.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
  assert.equal(new Set(ids).size, ids.length, 'operation ids are unique');
});

test('an owner operation is described from its own schemas: params, query, body, envelope and every status it can answer', () => {
  const op = operation({
    operationId: 'renameThing',
    method: 'patch',
    path: '/owner/v1/accounts/{accountId}/things/{thingId}',
    summary: 'Rename a thing',
    tag: 'things',
    auth: 'caller',
    params: z.strictObject({ accountId: z.string(), thingId: z.string() }),
    query: z.strictObject({ dryRun: z.enum(['yes', 'no']).optional() }),
    body: z.strictObject({ name: z.string().min(1).max(100) }),
    response: z.object({ id: z.string(), name: z.string() }),
    errors: [409],
    handle: async () => ({ id: 'x', name: 'y' }),
  });
  const document = buildOpenApiDocument([op]) as any;
  const described = document.paths['/owner/v1/accounts/{accountId}/things/{thingId}'].patch;
  assert.equal(described.operationId, 'renameThing');
  assert.deepEqual(described.parameters.map((p: any) => `${p.in}:${p.name}:${p.required === true}`), ['path:accountId:true', 'path:thingId:true', 'query:dryRun:false']);
  assert.equal(described.requestBody.content['application/json'].schema.additionalProperties, false, 'unknown body fields are refused, and documented so');
  assert.deepEqual(Object.keys(described.responses).map(Number), [200, 400, 401, 403, 404, 409, 413, 415, 429, 503]);
  assert.deepEqual(operationStatuses(op), [200, 400, 401, 403, 404, 409, 413, 415, 429, 503]);
  const ok = described.responses['200'].content['application/json'].schema;
  assert.deepEqual(ok.required, ['success', 'message']);
  assert.equal(ok.properties.success.const, true);
  assert.equal(described.responses['409'].content['application/json'].schema.$ref, '#/components/schemas/ErrorEnvelope');
  assert.deepEqual(described.security, [{ sessionCookie: [], csrfToken: [] }, { adminToken: [] }], 'a change needs the CSRF token with a session, not with an admin token');
  assert.throws(() => buildOpenApiDocument([op, op]), /Two owner operations/);
  // The error envelope as documented is what errors/boundary.ts writes.
  assert.deepEqual(document.components.schemas.ErrorMessage.required, ['code', 'description']);
});

test('every documented status of every route is met by the real gateway, each answer valid against the document', redisSuite(), async (t) => {
  const admin = makeAdminToken();
  const file = join(tempDir(t), 'data.json');
  copyFileSync(join(ROOT, 'config/demo-data.json'), file);
  const owner = { adminTokenDigests: [admin.digest] };
  // Webhooks may reach 127.0.0.1 here: the test sends go to a closed port, refused at once.
  const gw = await startGateway(t, { overrides: { owner, data: { file }, webhooks: { allowPrivateNetworks: true, allowHttp: true } } });
  const api = await conformance(gw.url);
  await walkPublicRoutes(api, gw);
  const state = await walkOwnerScenario(api, admin.token, gw);
  await probeOwnerOperations(api, admin.token, state.accountId, state.email === undefined ? undefined : { email: state.email, password: state.password! });
  await walkMailFlows(api, gw);

  // The same data file under a gateway that only reads it (Redis configured, keys from the file,
  // roles from Redis): every change, and every role or sign-record call, is 409 read_only_store.
  const redis = await startRedis(t);
  const readOnly = await startGateway(t, { overrides: { owner, data: { file, keySource: 'file' }, directory: { store: 'redis' }, redis: { url: redis.url } } });
  const readOnlyApi = await conformance(readOnly.url);
  await walkReadOnly(readOnlyApi, admin.token, state);

  // Lockouts and quotas: a gateway whose limits trip at once.
  const strict = await startGateway(t, {
    overrides: {
      owner,
      limits: {
        mode: 'enforce',
        signIn: { failuresPerKeyAndAddress: [{ limit: 1, seconds: 60 }], failuresPerAddress: [{ limit: 1, seconds: 60 }] },
        ownerSignIn: { failuresPerAddress: [{ limit: 1, seconds: 60 }] },
        adminToken: { failuresPerAddress: [{ limit: 1, seconds: 60 }] },
        ownerMail: { perAddress: [{ limit: 1, seconds: 60 }] },
        refresh: { perFamily: [{ limit: 1, seconds: 60 }], perAddress: [{ limit: 1, seconds: 60 }] },
        calls: { perAccount: [{ limit: 1, seconds: 60 }] },
      },
    },
  });
  const limited = await conformance(strict.url);
  await walkLimits(limited, admin.token);

  await walkOwnSessions(api, state);
  const sso = await walkSso(t, owner);

  for (const pair of [...readOnlyApi.seen, ...limited.seen, ...sso.seen]) api.seen.add(pair);
  for (const pair of await walkTokenLifecycle(t)) api.seen.add(pair);
  for (const pair of await walkLeakReports(t)) api.seen.add(pair);
  // Store failures are left to the store suites (docs/api.md): a Redis outage, an upstream's bad data.
  // A GET's 403 is the initial-password gate, which needs an owner session: none until sessions are served.
  const sessions = api.operations.some((op) => op.key === `POST ${PREFIX}/session`);
  const unmet = api.unmet((op, status) => status === 502 || status === 503 || status === 504 || (!sessions && status === 403 && op.method === 'get'));
  assert.deepEqual(unmet, [], `documented but never met:\n${unmet.join('\n')}`);
});

async function walkPublicRoutes(api: Conformance, gw: TestGateway): Promise<void> {
  const alice = { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) };
  const expect = async (status: number, res: Promise<{ status: number; body: any }>) => {
    const answer = await res;
    assert.equal(answer.status, status, JSON.stringify(answer.body));
    return answer.body;
  };
  const big = JSON.stringify({ apiKey: 'x'.repeat(gw.services.config.server.bodyLimitBytes + 10), apiSecret: 'y' });
  for (const path of ['/api/signin', '/api/refresh', '/api/reset']) {
    await expect(400, api.fetch(path, { method: 'POST', json: {} }));
    await expect(413, api.fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big }));
    await expect(415, api.fetch(path, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' }));
  }
  const pair = (await expect(200, api.fetch('/api/signin', { method: 'POST', json: alice }))).message;
  await expect(401, api.fetch('/api/signin', { method: 'POST', json: { ...alice, apiSecret: sha256Hex('wrong') } }));
  await expect(200, api.fetch('/api/refresh', { method: 'POST', json: { refreshToken: pair.refreshToken } }));
  await expect(401, api.fetch('/api/refresh', { method: 'POST', json: { refreshToken: 'not-a-refresh-token' } }));
  await expect(401, api.fetch('/api/reset', { method: 'POST', json: { ...alice, apiSecret: sha256Hex('wrong') } }));

  const fresh = (await expect(200, api.fetch('/api/signin', { method: 'POST', json: alice }))).message;
  for (const method of ['GET', 'POST']) {
    await expect(200, api.fetch(`/api/sign?address=${ADDRESS}`, { method, token: fresh.accessToken }));
    await expect(404, api.fetch(`/api/sign?address=${NO_ADDRESS}`, { method, token: fresh.accessToken }));
    await expect(400, api.fetch('/api/sign?address=0x12', { method, token: fresh.accessToken }));
    await expect(401, api.fetch(`/api/sign?address=${ADDRESS}`, { method }));
  }
  await expect(413, api.fetch(`/api/sign?address=${ADDRESS}`, { method: 'POST', token: fresh.accessToken, body: 'x'.repeat(gw.services.config.server.bodyLimitBytes + 10) }));
  const roles = await expect(200, api.fetch('/api/roles?limit=2&name=e', { token: fresh.accessToken }));
  assert.ok(roles.message.items.length > 0);
  await expect(400, api.fetch('/api/roles?limit=0', { token: fresh.accessToken }));
  await expect(401, api.fetch('/api/roles', { token: 'not.a.token' }));
  const keys = await expect(200, api.fetch('/.well-known/jwks.json'));
  assert.ok(keys.keys.length > 0);
  await expect(200, api.fetch('/healthz'));
  await expect(200, api.fetch('/readyz'));
  await walkOAuth(api, gw, expect);
  await expect(200, api.fetch('/api/reset', { method: 'POST', json: { ...alice, scope: 'key' } }));
}

/** The token endpoint and the metadata (docs/oauth.md): their answers are the RFCs' shapes, held to the document like the rest. */
async function walkOAuth(api: Conformance, gw: TestGateway, expect: (status: number, res: Promise<{ status: number; body: any }>) => Promise<any>): Promise<void> {
  const form = (fields: Record<string, string>, headers: Record<string, string> = {}) => api.fetch('/api/token', {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(fields).toString(),
  });
  const client = { client_id: DEMO.alice.apiKey, client_secret: DEMO.alice.secret };
  const pair = await expect(200, form({ grant_type: 'client_credentials', ...client }));
  await expect(200, form({ grant_type: 'refresh_token', refresh_token: pair.refresh_token, ...client }));
  await expect(400, form({ grant_type: 'refresh_token', refresh_token: 'not-a-refresh-token', ...client }));
  await expect(400, api.fetch('/api/token', { method: 'POST', json: { grant_type: 'client_credentials', ...client } }));
  await expect(401, form({ grant_type: 'client_credentials', ...client, client_secret: 'wrong' }));
  for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
    const metadata = await expect(200, api.fetch(path));
    assert.equal(metadata.token_endpoint, `${gw.url}/api/token`);
  }
}

/** What the scenario leaves in place, for the probes and the read-only walk. */
interface ScenarioState {
  accountId: string;
  email?: string;
  password?: string;
  ownerId?: string;
  keyId?: string;
  tokenId?: string;
  inviteId?: string;
  inviteToken?: string;
  roleId?: number;
  address?: string;
  webhookId?: string;
}

/** Accounts, the first owner, sessions, members and invites: undefined until those operations are served. */
async function walkAccounts(api: Conformance, O: OwnerApi): Promise<{ state: ScenarioState; owner: OwnerApi; spare: string } | undefined> {
  const has = (key: string) => api.operations.some((op) => op.key === key);
  if (!has(`POST ${PREFIX}/accounts`) || !has(`POST ${PREFIX}/accounts/{accountId}/owners`) || !has(`POST ${PREFIX}/session`)) return undefined;
  const accountId = (await O.expect(201, O.post('/accounts', { name: 'Conformance Ltd' }))).id as string;
  await O.expect(409, O.post('/accounts', { id: accountId, name: 'Again' }));
  const a = `/accounts/${accountId}`;
  if (has(`GET ${PREFIX}/accounts`)) await O.expect(200, O.get('/accounts?limit=5'));
  if (has(`GET ${PREFIX}/accounts/{accountId}`)) await O.expect(200, O.get(a));
  if (has(`PATCH ${PREFIX}/accounts/{accountId}`)) await O.expect(200, O.patch(a, { name: 'Conformance Limited' }));
  const spare = (await O.expect(201, O.post('/accounts', { name: 'Spare' }))).id as string;

  // The first owner, with an initial password to change.
  const email = `first-${Date.now()}@example.com`;
  const initial = newPassword();
  const member = await O.expect(201, O.post(`${a}/owners`, { email, initialPassword: initial }));
  await O.expect(409, O.post(`${a}/owners`, { email, initialPassword: initial }));
  await O.expect(401, api.fetch(`${PREFIX}/session`, { method: 'POST', json: { email, password: `${initial}-wrong` } }));
  const first = await api.fetch(`${PREFIX}/session`, { method: 'POST', json: { email, password: initial } });
  assert.equal((await O.expect(200, Promise.resolve(first))).owner.mustChangePassword, true);
  const gated = O.as(sessionCredential(first));
  // Every caller operation answers 403 password_change_required until the password changes.
  for (const op of api.operations.filter((op) => isOwner(op) && auth(op) === 'caller')) {
    const res = await api.fetch(fill(op, accountId), { method: op.method.toUpperCase(), headers: op.method === 'get' ? gated.who.read : gated.who.write, ...(takesBody(op) ? { json: {} } : {}) });
    assert.equal(res.status, 403, `${op.key}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.message.code, 'password_change_required');
  }
  const password = newPassword();
  await gated.expect(401, gated.post('/session/password', { currentPassword: `${initial}-wrong`, newPassword: password }));
  const changed = await api.fetch(`${PREFIX}/session/password`, { method: 'POST', headers: gated.who.write, json: { currentPassword: initial, newPassword: password } });
  assert.equal(changed.status, 200, JSON.stringify(changed.body));
  const owner = O.as(sessionCredential(changed));
  const state: ScenarioState = { accountId, email, password, ownerId: member.ownerId };
  await owner.expect(200, owner.get('/session'));
  await owner.expect(403, owner.post('/accounts', { name: 'Not mine to make' }));

  // Invites: accepted by a newcomer, by an existing owner (wrong password first), revoked, and one left pending.
  if (has(`POST ${PREFIX}/accounts/{accountId}/invites`) && has(`POST ${PREFIX}/invites/accept`)) {
    await O.expect(409, O.post(`${a}/invites`, { email }));
    const second = `second-${Date.now()}@example.com`;
    const invited = await O.expect(201, O.post(`${a}/invites`, { email: second }));
    await O.expect(200, O.get(`${a}/invites`));
    const accepted = await O.expect(200, api.fetch(`${PREFIX}/invites/accept`, { method: 'POST', json: { token: invited.token, password: newPassword() } }));
    await O.expect(404, api.fetch(`${PREFIX}/invites/accept`, { method: 'POST', json: { token: invited.token, password: newPassword() } }));
    await O.expect(200, O.get(`${a}/members`));
    await O.expect(200, O.delete(`${a}/members/${accepted.ownerId}`));
    const members = (await O.expect(200, O.get(`${a}/members`))).items as { ownerId: string }[];
    assert.equal(members.length, 1);
    await O.expect(409, O.delete(`${a}/members/${members[0]!.ownerId}`));

    const toSpare = await O.expect(201, O.post(`/accounts/${spare}/invites`, { email }));
    await O.expect(401, api.fetch(`${PREFIX}/invites/accept`, { method: 'POST', json: { token: toSpare.token, password: `${password}-wrong` } }));
    await O.expect(200, api.fetch(`${PREFIX}/invites/accept`, { method: 'POST', json: { token: toSpare.token, password } }));

    const overtaken = `third-${Date.now()}@example.com`;
    const late = await O.expect(201, O.post(`${a}/invites`, { email: overtaken }));
    await O.expect(201, O.post(`${a}/owners`, { email: overtaken, initialPassword: newPassword() }));
    await O.expect(409, api.fetch(`${PREFIX}/invites/accept`, { method: 'POST', json: { token: late.token, password: newPassword() } }));

    const revoked = await O.expect(201, O.post(`${a}/invites`, { email: `fourth-${Date.now()}@example.com` }));
    await O.expect(200, O.delete(`${a}/invites/${revoked.invite.id}`));
    await O.expect(409, O.delete(`${a}/invites/${invited.invite.id}`));
    const pending = await O.expect(201, O.post(`${a}/invites`, { email: `fifth-${Date.now()}@example.com` }));
    Object.assign(state, { inviteId: pending.invite.id, inviteToken: pending.token });
  }
  return { state, owner, spare };
}

/**
 * The owner API end to end, as an operator and as owners, through every agreed operation
 * present in the document; a step whose operation is not served yet is passed over. It leaves
 * one of each object in place (the account, its first owner, a key, a settings token, a pending
 * invite, a role, a sign record); what it deletes it makes twice.
 */
async function walkOwnerScenario(api: Conformance, adminToken: string, gw: TestGateway): Promise<ScenarioState> {
  const has = (key: string) => api.operations.some((op) => op.key === key);
  const O = new OwnerApi(api.fetch, operatorCredential(adminToken));
  const accounts = await walkAccounts(api, O);
  // Without the accounts slice, the operator works on a demo account.
  const state: ScenarioState = accounts?.state ?? { accountId: 'acct_alice' };
  const owner = accounts?.owner ?? O;
  const a = `/accounts/${state.accountId}`;

  // Keys: one deleted, one kept.
  if (has(`POST ${PREFIX}/accounts/{accountId}/keys`)) {
    const kept = await owner.expect(201, owner.post(`${a}/keys`, { name: 'kept' }));
    state.keyId = kept.key.id;
    const made = await owner.expect(201, owner.post(`${a}/keys`, { name: 'ci', description: 'The CI runner', scopes: ['read'] }));
    const k = `${a}/keys/${made.key.id}`;
    await owner.expect(200, owner.get(`${a}/keys`));
    await owner.expect(200, owner.get(k));
    await owner.expect(200, owner.patch(k, { description: 'Still the CI runner' }));
    await owner.expect(200, owner.post(`${k}/roll`, { overlapSeconds: 60 }));
    await owner.expect(200, owner.post(`${k}/reset`));
    await owner.expect(200, owner.delete(k));
    await owner.expect(200, owner.post(`${a}/reset`));
  }

  // API settings tokens (after the account reset, which revokes them): one revoked, one kept.
  if (has(`POST ${PREFIX}/accounts/{accountId}/settings-tokens`)) {
    const made = await owner.expect(201, owner.post(`${a}/settings-tokens`, { name: 'dashboard', expiresInSeconds: 3600 }));
    const s = `${a}/settings-tokens/${made.settingsToken.id}`;
    await owner.expect(200, owner.get(`${a}/settings-tokens`));
    await owner.expect(200, owner.get(s));
    await owner.expect(200, owner.delete(s));
    state.tokenId = (await owner.expect(201, owner.post(`${a}/settings-tokens`, { name: 'kept' }))).settingsToken.id;
  }

  // Webhooks: one deleted, one kept; a test send, and a second at once refused.
  if (has(`POST ${PREFIX}/accounts/{accountId}/webhooks`)) {
    const made = await owner.expect(201, owner.post(`${a}/webhooks`, { url: 'http://127.0.0.1:9/closed', events: ['key.created'] }));
    const w = `${a}/webhooks/${made.webhook.id}`;
    await owner.expect(200, owner.get(`${a}/webhooks`));
    await owner.expect(200, owner.get(w));
    await owner.expect(200, owner.patch(w, { description: 'conformance' }));
    const sent = await owner.expect(200, owner.post(`${w}/test`));
    assert.equal(sent.ok, false, 'nothing listens there');
    await owner.expect(429, owner.post(`${w}/test`));
    await owner.expect(200, owner.get(`${w}/deliveries`));
    await owner.expect(200, owner.post(`${w}/roll-secret`));
    await owner.expect(200, owner.delete(w));
    state.webhookId = (await owner.expect(201, owner.post(`${a}/webhooks`, { url: 'https://hooks.example.com/kept', enabled: false }))).webhook.id;
  }

  // Roles and sign records: one of each deleted, one kept.
  if (has(`POST ${PREFIX}/accounts/{accountId}/roles`)) {
    const role = { id: 9001, slug: 'conformance', name: 'Conformance', description: 'Made by the OpenAPI walk.', public: false };
    await owner.expect(201, owner.post(`${a}/roles`, role));
    await owner.expect(409, owner.post(`${a}/roles`, role));
    await owner.expect(200, owner.get(`${a}/roles?limit=2`));
    await owner.expect(200, owner.get(`${a}/roles/9001`));
    await owner.expect(200, owner.put(`${a}/roles/9001`, { ...role, id: 9002 }));
    await owner.expect(200, owner.delete(`${a}/roles/9002`));
    await owner.expect(201, owner.post(`${a}/roles`, { ...role, id: 9003 }));
    state.roleId = 9003;
  }
  if (has(`POST ${PREFIX}/accounts/{accountId}/sign-records`)) {
    const times = { signedAt: '2026-01-01T00:00:00.000Z', signedExpiredAt: '2027-01-01T00:00:00.000Z' };
    const address = `0x${'ab'.repeat(20)}`;
    const record = { address, signedNonce: 1, ...times };
    await owner.expect(201, owner.post(`${a}/sign-records`, record));
    await owner.expect(409, owner.post(`${a}/sign-records`, record));
    const r = `${a}/sign-records/${address}`;
    await owner.expect(200, owner.get(r));
    if (has(`GET ${PREFIX}/accounts/{accountId}/sign-records/{address}/served`)) await owner.expect(200, owner.get(`${r}/served`));
    await owner.expect(200, owner.put(r, { signedNonce: 2, ...times }));
    await owner.expect(200, owner.delete(r));
    state.address = `0x${'cd'.repeat(20)}`;
    await owner.expect(201, owner.post(`${a}/sign-records`, { ...record, address: state.address }));
  }
  if (has(`GET ${PREFIX}/accounts/{accountId}/usage`)) {
    await owner.expect(200, owner.get(`${a}/usage?hours=1`));
    await owner.expect(400, owner.get(`${a}/usage?hours=25`));
  }
  if (has(`GET ${PREFIX}/accounts/{accountId}/audit`)) {
    const audit = await owner.expect(200, owner.get(`${a}/audit?limit=100`));
    assert.ok(audit.items.length > 0, 'the changes above are in the audit');
  }
  if (accounts !== undefined && has(`POST ${PREFIX}/session/totp`)) await walkSecondFactors(api, gw, owner, O, state);
  if (accounts !== undefined) {
    await owner.expect(200, owner.delete('/session'));
    await O.expect(200, O.delete(`/accounts/${accounts.spare}`));
  }
  return state;
}

/** An owner's own sessions: one ended by another (listOwnSessions, endOwnSession). */
async function walkOwnSessions(api: Conformance, state: ScenarioState): Promise<void> {
  if (state.email === undefined || !api.operations.some((op) => op.key === `DELETE ${PREFIX}/sessions/{sessionId}`)) return;
  const signIn = async () => sessionCredential(await api.fetch(`${PREFIX}/session`, { method: 'POST', json: { email: state.email, password: state.password } }));
  const [first, second] = [await signIn(), await signIn()];
  const listed = await api.fetch(`${PREFIX}/sessions`, { headers: second.read });
  const other = listed.body.message.items.find((s: { current: boolean }) => !s.current).id;
  assert.equal((await api.fetch(`${PREFIX}/sessions/${other}`, { method: 'DELETE', headers: second.write })).status, 200);
  assert.equal((await api.fetch(`${PREFIX}/session`, { headers: first.read })).status, 401);
  // Where single sign-on is not configured, its navigations are not found.
  assert.deepEqual((await api.fetch(`${PREFIX}/sso`)).body.message, { enabled: false });
  assert.equal((await api.fetch(`${PREFIX}/sso/start`, { redirect: 'manual' })).status, 404);
  assert.equal((await api.fetch(`${PREFIX}/sso/callback?state=x&code=y`, { redirect: 'manual' })).status, 404);
}

/**
 * Single sign-on against a real provider, on a gateway without the dashboard (so that its
 * refusals are answered in the envelope): a sign-in (303), an unverified email (403), a
 * callback without its transaction (400), then throttled (429).
 */
async function walkSso(t: TestContext, owner: Record<string, unknown>): Promise<Conformance> {
  const idp = await startLoginProvider(t, { alice: { email: 'alice@demo.example', email_verified: true }, eve: { email: 'eve@example.com', email_verified: false } });
  const file = join(tempDir(t), 'data.json');
  copyFileSync(join(ROOT, 'config/demo-data.json'), file);
  const gw = await startGateway(t, {
    overrides: {
      owner: { ...owner, sso: { issuer: idp.issuer, clientId: SSO_CLIENT_ID, clientSecret: SSO_CLIENT_SECRET } },
      data: { file }, dashboard: { enabled: false },
      limits: { mode: 'enforce', ownerSignIn: { failuresPerAddress: [{ limit: 2, seconds: 60 }] } },
    },
  });
  idp.register(`${gw.url}${PREFIX}/sso/callback`);
  const api = await conformance(gw.url);
  assert.equal((await api.fetch(`${PREFIX}/sso`)).body.message.enabled, true);
  assert.equal((await api.fetch(`${PREFIX}/sso/start`, { redirect: 'manual' })).status, 303);
  const callback = async (user: string) => {
    idp.loginAs(user);
    let url: URL | undefined;
    const { callback: res } = await drive(`${gw.url}${PREFIX}/sso/start`, { beforeCallback: (u) => (url = u) });
    return api.check('get', url!, res.status, res.headers.get('content-type'), await res.text());
  };
  await callback('alice');
  await callback('eve');
  const bare = () => api.fetch(`${PREFIX}/sso/callback?state=x&code=y`, { redirect: 'manual' });
  assert.equal((await bare()).status, 400);
  assert.equal((await bare()).status, 429);
  for (const status of [303, 403]) assert.ok(api.seen.has(`GET ${PREFIX}/sso/callback ${status}`), `the callback answered ${status}`);
  return api;
}

/**
 * Second factors, as the scenario's first owner: TOTP enrolled (codes computed at the gateway's
 * clock), recovery codes renewed, TOTP off again; a software passkey registered, used
 * passwordless, removed; the account's requirement set and cleared. The owner ends as they began:
 * a password alone signs them in.
 */
async function walkSecondFactors(api: Conformance, gw: TestGateway, owner: OwnerApi, O: OwnerApi, state: ScenarioState): Promise<void> {
  const code = (secret: string) => TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: gw.clock.now() });
  await owner.expect(200, owner.get('/session/second-factors'));
  const { secret } = await owner.expect(200, owner.post('/session/totp'));
  await owner.expect(400, owner.post('/session/totp/confirmation', { code: '000000' }));
  const { recoveryCodes } = await owner.expect(200, owner.post('/session/totp/confirmation', { code: code(secret) }));
  await owner.expect(409, owner.post('/session/totp'));
  const renewed = await owner.expect(200, owner.post('/session/recovery-codes', { code: recoveryCodes[0] }));
  await owner.expect(200, owner.post('/session/totp/disable', { code: renewed.recoveryCodes[0] }));
  await owner.expect(409, owner.post('/session/totp/disable', { code: '123456' }));

  const passkey = softPasskey();
  const started = await owner.expect(200, owner.post('/session/passkeys/options'));
  const added = await owner.expect(201, owner.post('/session/passkeys', { ceremonyId: started.ceremonyId, name: 'walk', response: passkey.register(started.options, gw.url) }));
  const signIn = await owner.expect(200, api.fetch(`${PREFIX}/session/passkey/options`, { method: 'POST' }));
  await owner.expect(200, api.fetch(`${PREFIX}/session/passkey`, { method: 'POST', json: { ceremonyId: signIn.ceremonyId, response: passkey.authenticate(signIn.options, gw.url) } }));
  await owner.expect(401, api.fetch(`${PREFIX}/session/passkey`, { method: 'POST', json: { ceremonyId: signIn.ceremonyId, response: passkey.authenticate(signIn.options, gw.url) } }));
  await owner.expect(200, owner.delete(`/session/passkeys/${added.id}`));
  await owner.expect(404, owner.delete(`/session/passkeys/${added.id}`));

  const requirement = `/accounts/${state.accountId}/second-factor-requirement`;
  await owner.expect(200, owner.get(requirement));
  await owner.expect(200, owner.put(requirement, { required: true }));
  await owner.expect(200, O.put(requirement, { required: false }));
  const reset = `/accounts/${state.accountId}/members/${state.ownerId}/second-factors`;
  await owner.expect(403, owner.delete(reset));
  await O.expect(200, O.delete(reset));
}

/** Every operation that documents a 409, on a gateway that may not change its store: read_only_store. */
async function walkReadOnly(api: Conformance, adminToken: string, state: ScenarioState): Promise<void> {
  const operator = operatorCredential(adminToken);
  let session: Credential | undefined;
  if (state.email !== undefined) {
    const signedIn = await api.fetch(`${PREFIX}/session`, { method: 'POST', json: { email: state.email, password: state.password } });
    assert.equal(signedIn.status, 200, `owners still sign in where the store is read-only: ${JSON.stringify(signedIn.body)}`);
    session = sessionCredential(signedIn);
  }
  const ids: Record<string, string> = {
    ...(state.keyId === undefined ? {} : { keyId: state.keyId }),
    ...(state.tokenId === undefined ? {} : { tokenId: state.tokenId }),
    ...(state.inviteId === undefined ? {} : { inviteId: state.inviteId }),
    ...(state.ownerId === undefined ? {} : { ownerId: state.ownerId }),
    ...(state.roleId === undefined ? {} : { roleId: String(state.roleId) }),
    ...(state.address === undefined ? {} : { address: state.address }),
    ...(state.webhookId === undefined ? {} : { webhookId: state.webhookId }),
  };
  // A session of the owner's own, so that ending it gets past load to the store's refusal.
  if (session !== undefined && api.operations.some((op) => op.key === `GET ${PREFIX}/sessions`)) {
    const listed = await api.fetch(`${PREFIX}/sessions`, { headers: session.read });
    ids.sessionId = listed.body.message.items[0].id;
  }
  const bodies: Record<string, unknown> = {
    [`POST ${PREFIX}/accounts`]: { name: 'Read-only' },
    [`POST ${PREFIX}/session/password`]: { currentPassword: state.password, newPassword: newPassword() },
    [`POST ${PREFIX}/invites/accept`]: { token: state.inviteToken, password: newPassword() },
    [`POST ${PREFIX}/password-reset/complete`]: { token: MADE_UP_RESET, password: newPassword() },
    [`POST ${PREFIX}/email-verification`]: { token: MADE_UP_VERIFY },
  };
  for (const op of api.operations.filter((op) => isOwner(op) && op.statuses.includes(409))) {
    const kind = auth(op);
    const who = kind === 'session' ? session : kind === 'caller' ? operator : { read: {}, write: {} };
    assert.ok(who !== undefined, `${op.key}: a session operation is served, so the scenario made an owner`);
    const body = bodies[op.key] ?? (takesBody(op) ? sampleBody(op) : undefined);
    const res = await api.fetch(fill(op, state.accountId, ids), { method: op.method.toUpperCase(), headers: op.method === 'get' ? who.read : who.write, ...(body === undefined ? {} : { json: body }) });
    assert.deepEqual([res.status, res.body.message?.code], [409, 'read_only_store'], `${op.key}: ${JSON.stringify(res.body)}`);
  }
}

/** Well-formed mailed tokens that no owner holds. */
const MADE_UP_RESET = `${RESET_TOKEN_PREFIX}${'a'.repeat(43)}.own_nope`;
const MADE_UP_VERIFY = `${VERIFY_TOKEN_PREFIX}${'a'.repeat(43)}.own_nope`;

/**
 * Password reset and email verification: asked for (the same 202 for any email), then completed
 * with the tokens a mail would carry (this gateway sends none: they are kept on a demo owner as
 * the gateway keeps them), and refused for tokens no owner holds.
 */
async function walkMailFlows(api: Conformance, gw: TestGateway): Promise<void> {
  const has = (key: string) => api.operations.some((op) => op.key === key);
  if (!has(`POST ${PREFIX}/password-reset`)) return;
  const post = (path: string, json: unknown) => api.fetch(`${PREFIX}${path}`, { method: 'POST', json });
  const expect = async (status: number, res: Promise<{ status: number; body: any }>) => assert.equal((await res).status, status);
  await expect(202, post('/password-reset', { email: 'nobody@example.com' }));
  await expect(404, post('/password-reset/complete', { token: MADE_UP_RESET, password: newPassword() }));
  await expect(404, post('/email-verification', { token: MADE_UP_VERIFY }));
  const store = gw.services.ownerStore;
  const owner = (await store.findOwnerByEmail('bob@demo.example'))!;
  const expiresAt = new Date(gw.clock.now() + 600_000).toISOString();
  const reset = makeOneTimeToken(RESET_TOKEN_PREFIX, owner.id);
  const verify = makeOneTimeToken(VERIFY_TOKEN_PREFIX, owner.id);
  await store.updateOwner(owner.id, (o) => ({ owner: { ...o, passwordReset: { digest: reset.digest, expiresAt }, emailVerification: { digest: verify.digest, expiresAt, email: o.email } }, result: undefined }));
  await expect(200, post('/email-verification', { token: verify.token }));
  await expect(200, post('/password-reset/complete', { token: reset.token, password: newPassword() }));
}

/** A body each operation takes, for probes that must get past body validation. */
function sampleBody(op: DocumentedOperation): unknown {
  const role = { id: 424242, slug: 'probe', name: 'Probe', description: '', public: false };
  const times = { signedNonce: 1, signedAt: '2026-01-01T00:00:00.000Z', signedExpiredAt: '2027-01-01T00:00:00.000Z' };
  const samples: Record<string, unknown> = {
    [`PATCH ${PREFIX}/accounts/{accountId}`]: { name: 'Probe' },
    [`POST ${PREFIX}/accounts/{accountId}/owners`]: { email: 'probe@example.com', initialPassword: newPassword() },
    [`POST ${PREFIX}/accounts/{accountId}/invites`]: { email: 'probe@example.com' },
    [`POST ${PREFIX}/accounts/{accountId}/keys`]: { name: 'probe' },
    [`PATCH ${PREFIX}/accounts/{accountId}/keys/{keyId}`]: { name: 'probe' },
    [`POST ${PREFIX}/accounts/{accountId}/keys/{keyId}/roll`]: { overlapSeconds: 0 },
    [`POST ${PREFIX}/accounts/{accountId}/settings-tokens`]: { name: 'probe' },
    [`POST ${PREFIX}/accounts/{accountId}/webhooks`]: { url: 'https://hooks.example.com/probe' },
    [`PATCH ${PREFIX}/accounts/{accountId}/webhooks/{webhookId}`]: { description: 'probe' },
    [`POST ${PREFIX}/accounts/{accountId}/roles`]: role,
    [`PUT ${PREFIX}/accounts/{accountId}/roles/{roleId}`]: role,
    [`POST ${PREFIX}/accounts/{accountId}/sign-records`]: { address: NO_ADDRESS, ...times },
    [`PUT ${PREFIX}/accounts/{accountId}/sign-records/{address}`]: times,
    [`PUT ${PREFIX}/accounts/{accountId}/second-factor-requirement`]: { required: true },
    [`POST ${PREFIX}/session/totp/confirmation`]: { code: '123456' },
    [`POST ${PREFIX}/session/totp/disable`]: { code: '123456' },
    [`POST ${PREFIX}/session/recovery-codes`]: { code: '123456' },
    [`POST ${PREFIX}/session/passkeys`]: { ceremonyId: 'A'.repeat(32), name: 'probe', response: { id: 'AA', rawId: 'AA', type: 'public-key', response: { clientDataJSON: 'AA', attestationObject: 'AA' }, clientExtensionResults: {} } },
  };
  return samples[op.key] ?? {};
}

/**
 * What every owner operation answers by its shape alone, whatever it does: as the operator, or
 * for the session's own operations as the owner the scenario left signed up.
 */
async function probeOwnerOperations(api: Conformance, adminToken: string, accountId: string, owner: { email: string; password: string } | undefined): Promise<void> {
  const operator: Credential = operatorCredential(adminToken);
  let session: Credential | undefined;
  if (owner !== undefined) {
    const res = await api.fetch(`${PREFIX}/session`, { method: 'POST', json: { email: owner.email, password: owner.password } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    session = sessionCredential(res);
  }
  for (const op of api.operations.filter(isOwner)) {
    const method = op.method.toUpperCase();
    const kind = auth(op);
    const path = fill(op, accountId);
    const expect = async (status: number, res: Promise<{ status: number; body: any }>, why: string) => {
      const answer = await res;
      assert.equal(answer.status, status, `${op.key} (${why}): ${JSON.stringify(answer.body)}`);
      return answer;
    };
    const who = kind === 'public' ? { read: {}, write: {} } : kind === 'session' ? session : operator;
    const as = method === 'GET' ? who?.read : who?.write;
    if (kind !== 'public') await expect(401, api.fetch(path, { method }), 'no credentials');
    if (kind === 'session') await expect(404, api.fetch(path, { method, headers: operator.write }), 'operators have no session');
    if (method !== 'GET') await expect(403, api.fetch(path, { method, headers: { ...as, origin: EVIL_ORIGIN } }), 'a foreign origin');
    if (as === undefined) continue;
    if (method !== 'GET') {
      await expect(413, api.fetch(path, { method, headers: { ...as, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x'.repeat(20_000) }) }), 'a body over the limit');
    }
    if (takesBody(op)) {
      await expect(415, api.fetch(path, { method, headers: { ...as, 'content-type': 'text/plain' }, body: 'hello' }), 'not JSON');
      const res = await expect(400, api.fetch(path, { method, headers: as, json: { '%unknown': 1 } }), 'an unknown field');
      assert.equal(typeof res.body.message.field, 'string', `${op.key}: the 400 names the field`);
    } else if (op.operation.parameters?.some((p) => p.in === 'query')) {
      // A page's limit of 0, or else a value longer than any parameter takes.
      const query = op.operation.parameters.filter((p) => p.in === 'query');
      const outOfRange = query.some((p) => p.name === 'limit') ? 'limit=0' : `${query[0]!.name}=${'x'.repeat(5000)}`;
      await expect(400, api.fetch(`${path}?${outOfRange}`, { method, headers: as }), 'a query parameter out of range');
    } else if (op.path.includes('{')) {
      const bad = { accountId: 'bad id!', keyId: 'bad id!', tokenId: 'bad id!', inviteId: 'bad id!', ownerId: 'bad id!', sessionId: 'bad id!', roleId: 'one', address: '0x12', passkeyId: 'bad id!' };
      await expect(400, api.fetch(fill(op, 'bad id!', bad), { method, headers: as }), 'a malformed path parameter');
    }
    if (op.path.includes('{accountId}')) {
      await expect(404, api.fetch(fill(op, 'acct_nope'), { method, headers: as, ...(takesBody(op) ? { json: sampleBody(op) } : {}) }), 'an account that is not there');
    }
  }
}

/**
 * Over the limits: every route the limits count answers 429 once its one allowed attempt is
 * spent. Successes first (they give their attempt back), then one failure of each kind, which
 * locks this address out of that kind: API keys, owners' passwords and admin tokens are each
 * counted apart.
 */
async function walkLimits(api: Conformance, adminToken: string): Promise<void> {
  const has = (key: string) => api.operations.some((op) => op.key === key);
  const signedIn = await api.fetch('/api/signin', { method: 'POST', json: { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) } });
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  const { accessToken, refreshToken } = signedIn.body.message;
  await api.fetch('/api/refresh', { method: 'POST', json: { refreshToken } });
  assert.equal((await api.fetch('/api/refresh', { method: 'POST', json: { refreshToken } })).status, 429, '/api/refresh');
  await api.fetch(`/api/sign?address=${ADDRESS}`, { token: accessToken });
  for (const method of ['GET', 'POST']) assert.equal((await api.fetch(`/api/sign?address=${ADDRESS}`, { method, token: accessToken })).status, 429, `${method} /api/sign`);
  await api.fetch('/api/roles', { token: accessToken });
  assert.equal((await api.fetch('/api/roles', { token: accessToken })).status, 429, '/api/roles');
  // The token endpoint's refresh_token, counted per family and address like /api/refresh: the address's one refresh is spent.
  const client = { client_id: DEMO.alice.apiKey, client_secret: DEMO.alice.secret };
  const oauthRefresh = await api.fetch('/api/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, ...client }).toString() });
  assert.equal(oauthRefresh.status, 429, `/api/token: ${JSON.stringify(oauthRefresh.body)}`);
  assert.equal(oauthRefresh.body.error, 'slow_down');

  // An existing owner invited to another account: accepting checks their password, a counted guess.
  let invite: { email: string; token: string } | undefined;
  if (has(`POST ${PREFIX}/invites/accept`) && has(`POST ${PREFIX}/accounts/{accountId}/owners`)) {
    const O = new OwnerApi(api.fetch, operatorCredential(adminToken));
    const email = `limited-${Date.now()}@example.com`;
    const [a, b] = [await O.expect(201, O.post('/accounts', { name: 'A' })), await O.expect(201, O.post('/accounts', { name: 'B' }))];
    await O.expect(201, O.post(`/accounts/${a.id}/owners`, { email, initialPassword: newPassword() }));
    invite = { email, token: (await O.expect(201, O.post(`/accounts/${b.id}/invites`, { email }))).token };
  }

  const wrong = { apiKey: DEMO.bob.apiKey, apiSecret: sha256Hex('wrong') };
  assert.equal((await api.fetch('/api/signin', { method: 'POST', json: wrong })).status, 401);
  for (const path of ['/api/signin', '/api/reset']) {
    const res = await api.fetch(path, { method: 'POST', json: wrong });
    assert.equal(res.status, 429, `${path}: ${JSON.stringify(res.body)}`);
  }
  if (has(`POST ${PREFIX}/session`)) {
    const attempt = () => api.fetch(`${PREFIX}/session`, { method: 'POST', json: { email: invite?.email ?? 'nobody@example.com', password: newPassword() } });
    assert.equal((await attempt()).status, 401, 'owner sign-ins are counted apart from API keys');
    const res = await attempt();
    assert.equal(res.status, 429, `owner sign-in: ${JSON.stringify(res.body)}`);
  }
  // Passkey ceremonies are counted by the same owner sign-in limits: locked out with the address.
  if (has(`POST ${PREFIX}/session/passkey/options`)) {
    const started = await api.fetch(`${PREFIX}/session/passkey/options`, { method: 'POST' });
    assert.equal(started.status, 429, `a passkey ceremony's start: ${JSON.stringify(started.body)}`);
    const response = { id: 'AA', rawId: 'AA', type: 'public-key', clientExtensionResults: {}, response: { clientDataJSON: 'AA', authenticatorData: 'AA', signature: 'AA', userHandle: 'AA' } };
    const answered = await api.fetch(`${PREFIX}/session/passkey`, { method: 'POST', json: { ceremonyId: 'A'.repeat(32), response } });
    assert.equal(answered.status, 429, `a passkey sign-in: ${JSON.stringify(answered.body)}`);
  }
  if (invite !== undefined) {
    const res = await api.fetch(`${PREFIX}/invites/accept`, { method: 'POST', json: { token: invite.token, password: newPassword() } });
    assert.equal(res.status, 429, `an existing owner's invite: ${JSON.stringify(res.body)}`);
  }
  // The mail flows count per address, apart from sign-ins: one call, then every one of them is refused.
  if (has(`POST ${PREFIX}/password-reset`)) {
    assert.equal((await api.fetch(`${PREFIX}/password-reset`, { method: 'POST', json: { email: 'nobody@example.com' } })).status, 202);
    for (const [path, json] of [['/password-reset', { email: 'nobody@example.com' }], ['/password-reset/complete', { token: MADE_UP_RESET, password: newPassword() }], ['/email-verification', { token: MADE_UP_VERIFY }]] as const) {
      const res = await api.fetch(`${PREFIX}${path}`, { method: 'POST', json });
      assert.equal(res.status, 429, `${path}: ${JSON.stringify(res.body)}`);
    }
  }
  // Admin tokens are counted on their own: after one wrong one, every call presenting one is refused.
  assert.equal((await api.fetch(`${PREFIX}/accounts`, { token: `gwadm_${'x'.repeat(43)}` })).status, 401, 'admin tokens are counted apart from sign-ins');
  for (const op of api.operations.filter((op) => isOwner(op) && auth(op) !== 'public')) {
    const res = await api.fetch(fill(op, 'acct_alice'), { method: op.method.toUpperCase(), token: `gwadm_${'x'.repeat(43)}` });
    assert.equal(res.status, 429, `${op.key}: ${JSON.stringify(res.body)}`);
  }
}

test('the conformance check refuses an undocumented status, a field the schema does not name, and a path the document does not list', async (t) => {
  const document = {
    openapi: '3.1.0',
    info: { title: 'x', version: '1' },
    paths: {
      '/thing/{id}': {
        get: {
          responses: {
            200: { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } },
          },
        },
      },
    },
    components: { schemas: { Thing: { type: 'object', properties: { success: { const: true }, name: { type: 'string' } }, required: ['success'] } } },
  };
  const server = createServer((req, res) => {
    const answers: Record<string, [number, unknown]> = {
      '/openapi.json': [200, document],
      '/thing/good': [200, { success: true, name: 'a' }],
      '/thing/extra': [200, { success: true, name: 'a', secret: 'b' }],
      '/thing/wrong-type': [200, { success: true, name: 1 }],
      '/thing/teapot': [418, { success: false }],
    };
    const [status, body] = answers[req.url ?? ''] ?? [404, {}];
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const api = await conformance(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  assert.equal((await api.fetch('/thing/good')).status, 200);
  await assert.rejects(api.fetch('/thing/extra'), /does not match the document/);
  await assert.rejects(api.fetch('/thing/wrong-type'), /does not match the document/);
  await assert.rejects(api.fetch('/thing/teapot'), /undocumented status/);
  await assert.rejects(api.fetch('/other'), /not in the OpenAPI document/);
  assert.deepEqual([...api.seen], ['GET /thing/{id} 200']);
  assert.deepEqual(api.unmet(), []);
});

/**
 * POST /api/revoke and POST /api/introspect (RFC 7009, RFC 7662), on gateways of their own: bob's
 * key may introspect; a second gateway's refresh limits and quotas trip at once.
 */
async function walkTokenLifecycle(t: TestContext): Promise<Set<string>> {
  const file = join(tempDir(t), 'data.json');
  const data = JSON.parse(readFileSync(join(ROOT, 'config/demo-data.json'), 'utf8'));
  for (const account of data.accounts) for (const key of account.apiKeys) if (key.id === DEMO.bob.keyId) key.scopes = ['introspect'];
  writeFileSync(file, JSON.stringify(data));
  const form = (token: string, caller?: string, extra = '') => ({
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `token=${encodeURIComponent(token)}${extra}`,
    ...(caller === undefined ? {} : { token: caller }),
  });
  const signIn = async (api: Conformance, who: { apiKey: string; secret: string }) => (await api.fetch('/api/signin', { method: 'POST', json: { apiKey: who.apiKey, apiSecret: sha256Hex(who.secret) } })).body.message;
  const expect = async (status: number, res: Promise<{ status: number; body: any }>) => {
    const answer = await res;
    assert.equal(answer.status, status, JSON.stringify(answer.body));
    return answer.body;
  };

  const gw = await startGateway(t, { overrides: { data: { file } } });
  const api = await conformance(gw.url);
  const checker = (await signIn(api, DEMO.bob)).accessToken;
  const pair = await signIn(api, DEMO.alice);
  const big = 'x'.repeat(gw.services.config.server.bodyLimitBytes + 10);
  for (const path of ['/api/revoke', '/api/introspect']) {
    await expect(400, api.fetch(path, { ...form('', checker) }));
    await expect(413, api.fetch(path, { ...form(big, checker) }));
    await expect(415, api.fetch(path, { method: 'POST', token: checker, json: { token: pair.accessToken } }));
  }
  assert.equal((await expect(200, api.fetch('/api/introspect', form(pair.accessToken, checker, '&token_type_hint=access_token')))).active, true);
  assert.equal((await expect(200, api.fetch('/api/introspect', form(pair.refreshToken, checker)))).active, true);
  await expect(401, api.fetch('/api/introspect', form(pair.accessToken)));
  await expect(403, api.fetch('/api/introspect', form(pair.accessToken, pair.accessToken)));
  await expect(200, api.fetch('/api/revoke', form(pair.accessToken)));
  await expect(200, api.fetch('/api/revoke', form(pair.refreshToken, undefined, '&token_type_hint=refresh_token')));
  assert.deepEqual(await expect(200, api.fetch('/api/introspect', form(pair.accessToken, checker))), { active: false });
  await expect(400, api.fetch('/api/revoke', form(`gwst_${'A'.repeat(49)}`)));

  const strict = await startGateway(t, {
    overrides: { data: { file }, limits: { mode: 'enforce', refresh: { perAddress: [{ limit: 1, seconds: 60 }] }, calls: { perAccount: [{ limit: 1, seconds: 60 }] } } },
  });
  const limited = await conformance(strict.url);
  const limitedChecker = (await signIn(limited, DEMO.bob)).accessToken;
  await limited.fetch('/api/revoke', form('guess'));
  await expect(429, limited.fetch('/api/revoke', form('guess')));
  await limited.fetch('/api/introspect', form('x', limitedChecker));
  await expect(429, limited.fetch('/api/introspect', form('x', limitedChecker)));
  return new Set([...api.seen, ...limited.seen]);
}

/**
 * POST /api/leaks/github on gateways of their own, with a key server and reports signed by the
 * test: a live secret and an unknown token, each refusal, and the per-address quota tripped.
 */
async function walkLeakReports(t: TestContext): Promise<Set<string>> {
  const keys = await startKeyServer(t);
  const file = join(tempDir(t), 'data.json');
  copyFileSync(join(ROOT, 'config/demo-data.json'), file);
  const expect = async (status: number, res: Promise<{ status: number; body: any }>) => {
    const answer = await res;
    assert.equal(answer.status, status, JSON.stringify(answer.body));
    return answer.body;
  };
  const gw = await startGateway(t, { overrides: { data: { file }, leaks: { keysUrl: keys.url } } });
  const api = await conformance(gw.url);
  const pair = (await api.fetch('/api/signin', { method: 'POST', json: { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) } })).body.message;
  const body = JSON.stringify([{ token: pair.refreshToken, type: 'gateway_refresh_token', url: 'https://github.com/x/y', source: 'content' }, { token: 'nothing', type: 'gateway_api_secret' }]);
  const labels = await expect(200, api.fetch('/api/leaks/github', signedReport(body, keys.privateKey)));
  assert.deepEqual(labels.map((v: { label: string }) => v.label), ['true_positive', 'false_positive']);
  await expect(401, api.fetch('/api/leaks/github', signedReport(body, keys.privateKey, { keyId: 'unknown' })));
  await expect(400, api.fetch('/api/leaks/github', signedReport('{}', keys.privateKey)));
  await expect(413, api.fetch('/api/leaks/github', signedReport(JSON.stringify([{ token: 'x', type: 'y', source: 'z'.repeat(300_000) }]), keys.privateKey)));
  await expect(415, api.fetch('/api/leaks/github', { ...signedReport(body, keys.privateKey), headers: { ...signedReport(body, keys.privateKey).headers, 'content-type': 'text/plain' } }));

  const strict = await startGateway(t, { overrides: { data: { file }, leaks: { keysUrl: keys.url }, limits: { mode: 'enforce', rules: [{ route: 'leaks', perAddress: [{ limit: 1, seconds: 60 }] }] } } });
  const limited = await conformance(strict.url);
  await limited.fetch('/api/leaks/github', signedReport('[]', keys.privateKey));
  await expect(429, limited.fetch('/api/leaks/github', signedReport('[]', keys.privateKey)));
  return new Set([...api.seen, ...limited.seen]);
}
