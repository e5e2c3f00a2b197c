/**
 * A small client of the owner API for tests: an operator (admin token) or an owner (session
 * cookie + CSRF token), each call returning status and parsed body. It goes through any
 * fetch-like function, so the OpenAPI conformance wrapper (helpers/openapi.ts) can check every
 * answer of a walk.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { randomBase62 } from '../../src/domain/random.js';
import { call, show, type JsonResponse } from './gateway.js';

export type Fetcher = (path: string, init?: RequestInit & { token?: string; json?: unknown }) => Promise<JsonResponse>;

/** Plain fetch against `baseUrl`, JSON in (`json`) and out. */
export function plainFetcher(baseUrl: string): Fetcher {
  return (path, init = {}) => {
    const { json, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (json !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json');
    return call(new URL(path, baseUrl).href, { ...rest, headers, ...(json === undefined ? {} : { body: JSON.stringify(json) }) });
  };
}

/** A fresh admin token and the digest `owner.adminTokenDigests` holds for it. */
export function makeAdminToken(): { token: string; digest: string } {
  const token = `gwadm_${randomBase62(43)}`;
  return { token, digest: `sha256:${createHash('sha256').update(token, 'utf8').digest('hex')}` };
}

export interface Credential {
  /** Headers for a read. */
  read: Record<string, string>;
  /** Headers for a change (a session adds its CSRF token). */
  write: Record<string, string>;
}

export function operatorCredential(token: string): Credential {
  const headers = { authorization: `Bearer ${token}` };
  return { read: headers, write: headers };
}

/** The session cookie's value from a Set-Cookie answer (either cookie name). */
export function sessionCookie(res: JsonResponse): string {
  const cookies = res.headers.getSetCookie();
  const found = cookies.map((c) => /^((?:__Host-)?gw_session)=([^;]*)/.exec(c)).find((m) => m !== null && m[2] !== '');
  assert.ok(found, `a session cookie is set: ${cookies.join(' | ')}`);
  return `${found[1]}=${found[2]}`;
}

export function sessionCredential(res: JsonResponse): Credential {
  const cookie = sessionCookie(res);
  const csrf = res.body.message.csrfToken as string;
  assert.equal(typeof csrf, 'string', 'the session answer carries its CSRF token');
  return { read: { cookie }, write: { cookie, 'x-csrf-token': csrf } };
}

export const PREFIX = '/owner/v1';

export class OwnerApi {
  readonly fetch: Fetcher;
  readonly who: Credential;

  constructor(fetch: Fetcher, who: Credential) {
    this.fetch = fetch;
    this.who = who;
  }

  as(who: Credential): OwnerApi {
    return new OwnerApi(this.fetch, who);
  }

  get(path: string): Promise<JsonResponse> {
    return this.fetch(`${PREFIX}${path}`, { headers: this.who.read });
  }

  send(method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, json?: unknown): Promise<JsonResponse> {
    return this.fetch(`${PREFIX}${path}`, { method, headers: this.who.write, ...(json === undefined ? {} : { json }) });
  }

  post(path: string, json?: unknown) { return this.send('POST', path, json); }
  put(path: string, json?: unknown) { return this.send('PUT', path, json); }
  patch(path: string, json?: unknown) { return this.send('PATCH', path, json); }
  delete(path: string) { return this.send('DELETE', path); }

  /** The call's `message`, failing the test unless it answered `status`. */
  async expect(status: number, res: Promise<JsonResponse>): Promise<any> {
    const answer = await res;
    assert.equal(answer.status, status, show(answer));
    return answer.body.message;
  }
}

/** Signs an owner in: the session credential and the session answer. */
export async function signInOwner(fetcher: Fetcher, email: string, password: string): Promise<{ who: Credential; session: any }> {
  const res = await fetcher(`${PREFIX}/session`, { method: 'POST', json: { email, password } });
  assert.equal(res.status, 200, show(res));
  return { who: sessionCredential(res), session: res.body.message };
}

/** A password of the documented length (15–256). */
export function newPassword(): string {
  return `pw-${randomBase62(24)}`;
}

/** What /api/signin takes for a secret: its SHA-256 in hex. */
export function secretHash(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}
