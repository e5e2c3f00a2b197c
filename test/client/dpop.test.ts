/**
 * The client package's DPoP (packages/client/src/dpop.ts, docs/dpop.md) against a real gateway
 * process (its own clock, as a client's proofs need) that requires server nonces, with a proxied
 * route to an echo backend: the client's first proof is refused `use_dpop_nonce` and it retries
 * with the nonce; its tokens come bound to its key (a non-extractable Web Crypto key, or a Node
 * KeyObject); every call, `fetch` on the proxied route included, carries a fresh proof; a refresh
 * does too; and the token copied out of the client is refused as a bearer token.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { calculateJwkThumbprint, decodeJwt, type JWK } from 'jose';
import { GatewayClient, type TokenPair } from '../../packages/client/src/index.js';
import { startBackend } from '../helpers/backend.js';
import { call, DEMO } from '../helpers/gateway.js';
import { startGatewayProcess } from '../helpers/process.js';

interface Seen {
  url: string;
  headers: Record<string, string>;
  status: number;
}

/** The platform's fetch, recording each request's URL and headers and its answer's status. */
function recordingFetch(): { fetch: typeof fetch; calls: Seen[] } {
  const calls: Seen[] = [];
  const recording: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    const seen: Seen = { url: request.url, headers: Object.fromEntries(request.headers), status: 0 };
    calls.push(seen);
    const res = await fetch(request);
    seen.status = res.status;
    return res;
  };
  return { fetch: recording, calls };
}

const alice = { apiKey: DEMO.alice.apiKey, apiSecret: DEMO.alice.secret };

test('the client does DPoP against a gateway that requires nonces', async (t) => {
  const backend = await startBackend(t);
  const gw = await startGatewayProcess(t, { DPOP_NONCE: 'required', ROUTES: JSON.stringify([{ prefix: '/things', targets: [backend.url] }]) });

  await t.test('a non-extractable Web Crypto key: bound tokens, a proof on every call, the nonce learnt once', async () => {
    const { fetch, calls } = recordingFetch();
    const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, dpop: true, fetch });
    const page = await client.roles();
    assert.ok(Array.isArray(page.items));
    const token = await client.accessToken();
    const jkt = (decodeJwt(token).cnf as { jkt?: string } | undefined)?.jkt;
    assert.equal(typeof jkt, 'string', 'the token is DPoP-bound');
    const signIns = calls.filter((c) => c.url.endsWith('/api/signin'));
    assert.deepEqual(signIns.map((c) => c.status), [401, 200], 'refused for the nonce once, then signed in');
    const roleCalls = calls.filter((c) => c.url.includes('/api/roles'));
    assert.ok(roleCalls.every((c) => c.headers.authorization?.startsWith('DPoP ') && c.headers.dpop !== undefined), 'DPoP scheme and a proof');

    const res = await client.fetch('/things/1?x=2');
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(backend.received.at(-1)!.headers['x-dpop-jkt'], [jkt]);
    assert.ok(res.headers.get('dpop-nonce') !== null, 'a proxied answer hands out the current nonce too');
    await client.roles();
    const proofs = calls.map((c) => c.headers.dpop).filter((p): p is string => p !== undefined);
    assert.equal(new Set(proofs).size, proofs.length, 'a new proof each time');

    const copied = await call(`${gw.url}/api/roles`, { token });
    assert.equal(copied.status, 401, 'the token copied out is no bearer token');
    assert.match(copied.headers.get('www-authenticate') ?? '', /^DPoP error="invalid_token"/);
  });

  await t.test('a stored pair bound to an earlier key: the client renews, signs in again and binds its own', async () => {
    let stored: TokenPair | undefined;
    const storage = { load: () => stored, save: (pair: TokenPair | undefined) => { stored = pair; } };
    await new GatewayClient({ baseUrl: gw.url, credentials: alice, dpop: true, storage }).roles();
    const earlier = (decodeJwt(stored!.accessToken).cnf as { jkt: string }).jkt;
    const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, dpop: true, storage });
    const page = await client.roles();
    assert.ok(Array.isArray(page.items));
    const now = (decodeJwt(await client.accessToken()).cnf as { jkt: string }).jkt;
    assert.notEqual(now, earlier, 'bound to the new client\'s key');
  });

  await t.test('a Node KeyObject: the binding is its key\'s thumbprint, and refreshes carry proofs too', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { fetch, calls } = recordingFetch();
    // Renewal at once: the second call refreshes.
    const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, dpop: { privateKey }, fetch, renewBeforeMs: 900_000 });
    await client.roles();
    await client.roles();
    const refreshes = calls.filter((c) => c.url.endsWith('/api/refresh'));
    assert.ok(refreshes.length > 0 && refreshes.at(-1)!.status === 200, `refreshed: ${JSON.stringify(refreshes.map((c) => c.status))}`);
    assert.ok(refreshes.every((c) => c.headers.dpop !== undefined));
    const token = await client.accessToken();
    const expected = await calculateJwkThumbprint(publicKey.export({ format: 'jwk' }) as JWK, 'sha256');
    assert.deepEqual(decodeJwt(token).cnf, { jkt: expected });
  });
});
