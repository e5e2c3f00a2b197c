/**
 * The owner API from a test's side: a gateway with an operator token configured and its own
 * copy of the demo data file (owner changes may be written back to it), and small clients for
 * an operator (admin token) and an owner (session cookie + X-CSRF-Token).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import { call, show, startGateway, type GatewayOptions, type JsonResponse, type TestGateway } from './gateway.js';

export const ADMIN_TOKEN = `gwadm_${'A1b2C3d4E5'.repeat(4)}xyz`;
export const OWNER_PREFIX = '/owner/v1';

/** A gateway serving the owner API, with ADMIN_TOKEN accepted and a data file of its own. */
export async function startOwnerGateway(t: TestContext, { overrides = {}, clock }: GatewayOptions = {}): Promise<TestGateway> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-owner-'));
  const file = join(dir, 'data.json');
  copyFileSync(resolve('config/demo-data.json'), file);
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const owner = { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)], ...((overrides.owner as Record<string, unknown>) ?? {}) };
  const data = { file, ...((overrides.data as Record<string, unknown>) ?? {}) };
  return startGateway(t, { overrides: { ...overrides, owner, data }, ...(clock !== undefined ? { clock } : {}) });
}

export interface Client {
  get(path: string, headers?: Record<string, string>): Promise<JsonResponse>;
  send(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<JsonResponse>;
}

/** Calls with the admin token. */
export function operator(gw: TestGateway, token = ADMIN_TOKEN): Client {
  return client(gw, { authorization: `Bearer ${token}` });
}

/** Calls with no credential. */
export function anonymous(gw: TestGateway): Client {
  return client(gw, {});
}

export interface OwnerSession extends Client {
  cookie: string;
  csrfToken: string;
  /** The sign-in answer. */
  signIn: JsonResponse;
}

/** Signs in and returns a client that sends the cookie, and the CSRF token on changes. */
export async function signIn(gw: TestGateway, email: string, password: string): Promise<OwnerSession> {
  const res = await anonymous(gw).send('POST', '/session', { email, password });
  assert.equal(res.status, 200, `sign-in of ${email}: ${show(res)}`);
  return sessionFrom(gw, res);
}

export function sessionFrom(gw: TestGateway, res: JsonResponse): OwnerSession {
  const cookie = sessionCookie(res);
  assert.ok(cookie !== undefined, 'a session cookie is set');
  const csrfToken = res.body.message.csrfToken as string;
  const pair = cookie.split(';')[0]!;
  const base = client(gw, { cookie: pair });
  return {
    cookie: pair,
    csrfToken,
    signIn: res,
    get: base.get,
    send: (method, path, body, headers = {}) => base.send(method, path, body, { 'x-csrf-token': csrfToken, ...headers }),
  };
}

/** The Set-Cookie of the session cookie (either name), whole. */
export function sessionCookie(res: JsonResponse): string | undefined {
  return res.headers.getSetCookie().find((c) => /^(__Host-)?gw_session=/.test(c));
}

function client(gw: TestGateway, base: Record<string, string>): Client {
  const url = (path: string): string => `${gw.url}${path.startsWith('/owner') || path.startsWith('/api') ? '' : OWNER_PREFIX}${path}`;
  return {
    get: (path, headers = {}) => call(url(path), { headers: { ...base, ...headers } }),
    send: (method, path, body, headers = {}) => call(url(path), {
      method,
      headers: { ...base, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }),
  };
}

/** Creates an account and a first owner who has already changed the initial password; returns the owner's session. */
export async function accountWithOwner(gw: TestGateway, { accountId, email, password }: { accountId: string; email: string; password: string }): Promise<OwnerSession> {
  const op = operator(gw);
  const made = await op.send('POST', '/accounts', { id: accountId, name: `Account ${accountId}` });
  assert.equal(made.status, 201, show(made));
  const initial = `initial-${password}`;
  const added = await op.send('POST', `/accounts/${accountId}/owners`, { email, initialPassword: initial });
  assert.equal(added.status, 201, show(added));
  const first = await signIn(gw, email, initial);
  const changed = await first.send('POST', '/session/password', { currentPassword: initial, newPassword: password });
  assert.equal(changed.status, 200, show(changed));
  return sessionFrom(gw, changed);
}
