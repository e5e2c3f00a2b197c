/**
 * GitHub's side of secret scanning, for tests: a key server publishing one P-256 public key in
 * GitHub's format (what LEAK_REPORT_KEYS_URL points at), and reports signed with its private key
 * as GitHub signs them (ECDSA with SHA-256 over the raw body, DER, base64).
 */
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { createServer } from 'node:http';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { call, postJson, show, type JsonResponse } from './gateway.js';
import { secretHash } from './owner-api.js';

export const KEY_ID = 'leak-test-key-1';
export const URL_FOUND = 'https://github.com/someone/repo/blob/abc/config.env';

export interface KeyServer {
  url: string;
  privateKey: KeyObject;
  /** How many times the keys were fetched. */
  fetches(): number;
  /** GitHub rotates its keys: the document lists a new key (and the old one no more); its private key. */
  rotate(keyId: string): KeyObject;
}

/** An HTTP server answering GitHub's public-keys document with one P-256 key made here. */
export async function startKeyServer(t: TestContext): Promise<KeyServer> {
  const make = () => {
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    return { privateKey: pair.privateKey, pem: pair.publicKey.export({ type: 'spki', format: 'pem' }).toString() };
  };
  const { privateKey, pem } = make();
  let published = { id: KEY_ID, pem };
  let fetched = 0;
  const server = createServer((_req, res) => {
    fetched++;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ public_keys: [{ key_identifier: published.id, key: published.pem, is_current: true }] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}/meta/public_keys/secret_scanning`, privateKey, fetches: () => fetched,
    rotate(keyId) {
      const next = make();
      published = { id: keyId, pem: next.pem };
      return next.privateKey;
    },
  };
}

export function report(gw: { url: string }, body: string, { key, keyId = KEY_ID, signature }: { key: KeyObject; keyId?: string; signature?: string }): Promise<JsonResponse> {
  return call(`${gw.url}/api/leaks/github`, signedReport(body, key, { keyId, ...(signature !== undefined ? { signature } : {}) }));
}


/** The request init of a report signed with `key` (or carrying `signature` as it is). */
export function signedReport(body: string, key: KeyObject, { keyId = KEY_ID, signature }: { keyId?: string; signature?: string } = {}): RequestInit & { headers: Record<string, string> } {
  const sig = signature ?? sign('sha256', Buffer.from(body), key).toString('base64');
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'github-public-key-identifier': keyId, 'github-public-key-signature': sig },
    body,
  };
}

export function api(gw: { url: string }, admin: string, path: string, { method = 'GET', json }: { method?: string; json?: unknown } = {}) {
  return call(`${gw.url}/owner/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${admin}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });
}

export function signInWith(gw: { url: string }, apiKey: string, apiSecret: string) {
  return postJson(`${gw.url}/api/signin`, { apiKey, apiSecret: secretHash(apiSecret) });
}

export interface Secrets {
  keyId: string;
  apiKey: string;
  apiSecret: string;
  accessToken: string;
  refreshToken: string;
  settingsToken: string;
  settingsTokenId: string;
}

/** A key (signed in once) and a settings token in `accountId`. */
export async function makeSecrets(gw: { url: string }, admin: string, accountId: string): Promise<Secrets> {
  const made = await api(gw, admin, `/accounts/${accountId}/keys`, { method: 'POST', json: { name: 'leaky' } });
  assert.equal(made.status, 201, show(made));
  const { key, apiSecret } = made.body.message;
  const signedIn = await signInWith(gw, key.apiKey, apiSecret);
  assert.equal(signedIn.status, 200, show(signedIn));
  const st = await api(gw, admin, `/accounts/${accountId}/settings-tokens`, { method: 'POST', json: { name: 'leaky token' } });
  assert.equal(st.status, 201, show(st));
  return {
    keyId: key.id, apiKey: key.apiKey, apiSecret,
    accessToken: signedIn.body.message.accessToken, refreshToken: signedIn.body.message.refreshToken,
    settingsToken: st.body.message.token, settingsTokenId: st.body.message.settingsToken.id,
  };
}

export const roles = (gw: { url: string }, token: string) => call(`${gw.url}/api/roles`, { token });
export const refresh = (gw: { url: string }, refreshToken: string) => postJson(`${gw.url}/api/refresh`, { refreshToken });

/** Every secret still works: nothing was revoked. */
export async function assertAlive(gw: { url: string }, s: Secrets, what: string): Promise<void> {
  assert.equal((await signInWith(gw, s.apiKey, s.apiSecret)).status, 200, `${what}: the API secret signs in`);
  assert.equal((await roles(gw, s.accessToken)).status, 200, `${what}: the access token works`);
  assert.equal((await roles(gw, s.settingsToken)).status, 200, `${what}: the settings token works`);
}

export function reportOf(tokens: { token: string; type: string }[]): string {
  return JSON.stringify(tokens.map((t) => ({ ...t, url: URL_FOUND, source: 'content' })));
}

export async function newAccount(gw: { url: string }, admin: string, id: string): Promise<void> {
  const res = await api(gw, admin, '/accounts', { method: 'POST', json: { id, name: id } });
  assert.equal(res.status, 201, show(res));
}
