/**
 * GatewayClient and the gateway's refusals: a 429 with Retry-After is waited out for a GET,
 * refused at once when longer than maxRetryAfterMs; a POST /api/reset and a sign-in with the
 * wrong secret are never sent twice; the RateLimit fields reach client.rateLimit and onRateLimit.
 * The gateway's counters follow real time here (its windows must end while the client waits).
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { AuthenticationError, GatewayClient, RateLimitError, type RateLimitInfo } from '../../packages/client/src/index.js';
import { DEMO, startGateway, type TestGateway } from '../helpers/gateway.js';
import { accessLines, RealClock, settle } from './helpers.js';

const alice = { apiKey: DEMO.alice.apiKey, apiSecret: DEMO.alice.secret };
const ROOMY = [{ limit: 10_000, seconds: 60 }];

function enforced(t: TestContext, limits: Record<string, unknown>): Promise<TestGateway> {
  return startGateway(t, {
    clock: new RealClock(),
    overrides: { limits: { mode: 'enforce', signIn: { perAddress: ROOMY, failuresPerKeyAndAddress: ROOMY, failuresPerAddress: ROOMY, failuresPerKey: ROOMY }, ...limits } },
  });
}

test('429 with Retry-After: a GET waits at least that long and succeeds; RateLimit fields are surfaced', async (t) => {
  const gw = await enforced(t, { calls: { perAccount: [{ limit: 1, seconds: 1 }] } });
  const seen: RateLimitInfo[] = [];
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, onRateLimit: (info) => seen.push(info) });
  await client.roles();
  assert.equal(client.rateLimit?.tightest.policy, 'roles-account-1s');
  assert.equal(client.rateLimit?.tightest.remaining, 0);
  assert.equal(client.rateLimit?.tightest.quota, 1);
  assert.equal(client.rateLimit?.tightest.windowSeconds, 1);
  assert.deepEqual(seen.at(-1), client.rateLimit);

  const started = Date.now();
  const page = await client.roles();
  const waited = Date.now() - started;
  assert.ok(page.items.length > 0);
  await settle();
  const refused = accessLines(gw, '/api/roles', 429);
  assert.equal(refused.length, 1, 'refused once, then let through');
  assert.equal(accessLines(gw, '/api/roles', 200).length, 2);
  // The gateway answered Retry-After: 1 (its window is one second).
  assert.ok(waited >= 1000, `waited ${waited} ms`);
  assert.ok(seen.length >= 3, 'onRateLimit saw the 429 too');
});

test('a Retry-After above maxRetryAfterMs fails at once with RateLimitError carrying retryAfterMs and the fields', async (t) => {
  const gw = await enforced(t, { calls: { perAccount: [{ limit: 1, seconds: 60 }] } });
  const client = new GatewayClient({ baseUrl: gw.url, credentials: alice, retry: { maxRetryAfterMs: 5000 } });
  await client.roles();
  const err = await client.roles().then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof RateLimitError, String(err));
  assert.equal(err.code, 'rate_limited');
  assert.equal(err.status, 429);
  assert.ok(err.retryAfterMs !== undefined && err.retryAfterMs > 5000 && err.retryAfterMs <= 60_000, String(err.retryAfterMs));
  assert.equal(err.rateLimit?.tightest.policy, 'roles-account-60s');
  assert.equal(err.rateLimit?.tightest.remaining, 0);
  await settle();
  assert.equal(accessLines(gw, '/api/roles', 429).length, 1, 'not retried');
});

test('never sent twice: a sign-in with the wrong secret, and POST /api/reset refused 429', async (t) => {
  // One failure locks the key out for 2 s: a retryable call would wait that out and retry.
  const gw = await enforced(t, { signIn: { perAddress: ROOMY, failuresPerKeyAndAddress: [{ limit: 1, seconds: 2 }], failuresPerAddress: ROOMY, failuresPerKey: ROOMY } });
  const wrong = new GatewayClient({ baseUrl: gw.url, credentials: { apiKey: alice.apiKey, apiSecret: 'not the secret' } });
  const err = await wrong.roles().then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(err instanceof AuthenticationError, String(err));
  assert.equal(err.code, 'invalid_credentials');
  await settle();
  assert.equal(accessLines(gw, '/api/signin').length, 1, 'one sign-in');
  assert.equal(accessLines(gw, '/api/roles').length, 0);

  const reset = await wrong.reset().then(() => assert.fail('refused'), (e: unknown) => e);
  assert.ok(reset instanceof RateLimitError, String(reset));
  assert.ok((reset.retryAfterMs ?? 0) <= 2000, 'a wait a GET would have made');
  await settle();
  assert.equal(accessLines(gw, '/api/reset').length, 1, 'reset sent once');
});
