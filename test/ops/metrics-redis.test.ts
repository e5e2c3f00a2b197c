/**
 * Redis in the metrics, against a real redis-server: the connection's state and its circuit
 * breaker's, read at each scrape, follow an outage.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEMO, postJson, sha256Hex, startGateway } from '../helpers/gateway.js';
import { scrape, valueOf } from '../helpers/metrics.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

test('Redis connection and breaker state follow an outage', redisSuite(), async (t) => {
  const redis = await startRedis(t);
  const gw = await startGateway(t, { overrides: { redis: { url: redis.url, breakerFailures: 2, breakerCooldownMs: 60_000 } } });
  const signIn = () => postJson(`${gw.url}/api/signin`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret) });
  assert.equal((await signIn()).status, 200);

  let { samples } = await scrape(gw.url);
  assert.equal(valueOf(samples, 'gateway_redis_connected'), 1);
  assert.equal(valueOf(samples, 'gateway_store_breaker_open', { store: 'redis' }), 0);

  await redis.kill();
  // The client notices the closed connection by itself; polled, with a generous deadline.
  const deadline = Date.now() + 15_000;
  while (valueOf((await scrape(gw.url)).samples, 'gateway_redis_connected') !== 0) {
    assert.ok(Date.now() < deadline, 'the gauge still says connected 15 s after Redis was killed');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  for (let i = 0; i < 3; i++) assert.equal((await signIn()).status, 503);

  ({ samples } = await scrape(gw.url));
  assert.equal(valueOf(samples, 'gateway_redis_connected'), 0);
  assert.equal(valueOf(samples, 'gateway_store_breaker_open', { store: 'redis' }), 1);
  assert.equal(valueOf(samples, 'gateway_signins_total', { outcome: 'unavailable' }), 3);
  assert.equal(valueOf(samples, 'gateway_signins_total', { outcome: 'issued' }), 1);
});
