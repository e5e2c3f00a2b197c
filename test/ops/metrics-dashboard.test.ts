/**
 * The Grafana dashboard in docs/grafana/ queries only metrics a real gateway serves: every
 * metric name in its queries (panels and template variables) is a family in the /metrics of a
 * gateway with Redis, a route and the HTTP directory store, or a histogram's series of one.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startBackend } from '../helpers/backend.js';
import { scrape } from '../helpers/metrics.js';
import { startProxy } from '../helpers/proxy.js';
import { redisSuite, startRedis } from '../helpers/redis.js';

const DASHBOARD = fileURLToPath(new URL('../../docs/grafana/gateway-dashboard.json', import.meta.url));

/** Every `expr` and template query in the dashboard, wherever it sits. */
function queriesOf(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) queriesOf(item, found);
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if ((key === 'expr' || key === 'definition') && typeof value === 'string') found.push(value);
      else queriesOf(value, found);
    }
  }
  return found;
}

test('every metric the Grafana dashboard queries is served by a real gateway', redisSuite(), async (t) => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: unknown[]; templating: unknown };
  const queries = queriesOf([dashboard.panels, dashboard.templating]);
  assert.ok(queries.length >= 20, `the dashboard has ${queries.length} queries`);
  const names = new Set(queries.flatMap((query) => [...query.matchAll(/\bgateway_[a-z0-9_]+/g)].map((m) => m[0])));

  const redis = await startRedis(t);
  const backend = await startBackend(t);
  const gw = await startProxy(t, [{ name: 'orders', prefix: '/orders', targets: [backend.url] }], {
    redis: { url: redis.url },
    directory: { store: 'http', http: { signUrl: `${backend.url}/sign?a={accountId}&b={address}`, rolesUrl: `${backend.url}/roles?a={accountId}`, token: 'service-token-for-tests' } },
  });
  const { text } = await scrape(gw.url);
  const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));

  const missing = [...names].filter((name) => {
    if (types.has(name)) return false;
    const histogram = /^(.*)_(bucket|count|sum)$/.exec(name);
    return histogram === null || types.get(histogram[1]!) !== 'histogram';
  });
  assert.deepEqual(missing, [], `the dashboard queries metrics the gateway does not serve: ${missing.join(', ')}`);
  // And the check reads real names: the dashboard covers each part of the gateway.
  for (const name of ['gateway_request_duration_seconds_bucket', 'gateway_upstream_errors_total', 'gateway_signins_total', 'gateway_directory_cache_reads_total', 'gateway_redis_connected', 'gateway_websocket_closed_total', 'gateway_nodejs_eventloop_lag_p99_seconds']) {
    assert.ok(names.has(name), `the dashboard queries ${name}`);
  }
});
