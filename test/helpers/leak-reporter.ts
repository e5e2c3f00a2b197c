/**
 * GitHub's side of secret scanning, for tests: a key server publishing one P-256 public key in
 * GitHub's format (what LEAK_REPORT_KEYS_URL points at), and reports signed with its private key
 * as GitHub signs them (ECDSA with SHA-256 over the raw body, DER, base64).
 */
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { createServer } from 'node:http';
import type { TestContext } from 'node:test';
import { call, type JsonResponse } from './gateway.js';

export const KEY_ID = 'leak-test-key-1';

export interface KeyServer {
  url: string;
  privateKey: KeyObject;
  /** How many times the keys were fetched. */
  fetches(): number;
}

/** An HTTP server answering GitHub's public-keys document with one P-256 key made here. */
export async function startKeyServer(t: TestContext): Promise<KeyServer> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  let fetched = 0;
  const server = createServer((_req, res) => {
    fetched++;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ public_keys: [{ key_identifier: KEY_ID, key: pem, is_current: true }] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}/meta/public_keys/secret_scanning`, privateKey, fetches: () => fetched };
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
