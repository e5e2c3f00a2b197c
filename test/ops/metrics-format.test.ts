/**
 * The gateway keeps its hot-path histograms and token-check counter itself (counting without
 * allocating, src/telemetry/metrics.ts) but must expose them exactly as prom-client would: the
 * same text, line for line, for the same observations, and the same sums across workers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { createMetrics, LATENCY_BUCKETS } from '../../src/telemetry/metrics.js';

const OBSERVED = [0.0001, 0.0005, 0.0007, 0.003, 0.2, 0.5, 1.5, 61, 12, 0.0005];

/** One metric family's lines (HELP, TYPE and samples) out of a whole exposition. */
function family(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`# HELP ${name} `) || line.startsWith(`# TYPE ${name} `) || line.startsWith(`${name}_`) || line.startsWith(`${name}{`));
}

function referenceRegistry(help: { request: string; upstream: string; validations: string }): Registry {
  const registry = new Registry();
  const requests = new Histogram({ name: 'gateway_request_duration_seconds', help: help.request, labelNames: ['route', 'method', 'status_class'], buckets: [...LATENCY_BUCKETS], registers: [registry] });
  const upstream = new Histogram({ name: 'gateway_upstream_response_seconds', help: help.upstream, labelNames: ['target'], buckets: [...LATENCY_BUCKETS], registers: [registry] });
  const validations = new Counter({ name: 'gateway_token_validations_total', help: help.validations, labelNames: ['outcome'], registers: [registry] });
  for (const seconds of OBSERVED) {
    requests.labels('orders', 'GET', '2xx').observe(seconds);
    upstream.labels('http://127.0.0.1:9').observe(seconds / 2);
    validations.labels('valid').inc();
  }
  requests.labels('/api/signin', 'other', '4xx').observe(0.01);
  validations.labels('missing').inc();
  return registry;
}

function observeAll(metrics: ReturnType<typeof createMetrics>): void {
  for (const seconds of OBSERVED) {
    metrics.observeRequest('orders', 'GET', 200, seconds, 'http://127.0.0.1:9', seconds / 2, undefined);
    metrics.tokenValidated('valid');
  }
  metrics.observeRequest('/api/signin', 'PROPFIND', 404, 0.01, undefined, undefined, undefined);
  metrics.tokenValidated('missing');
}

async function helpOf(registry: Registry, name: string): Promise<string> {
  return (await registry.getSingleMetricAsString(name)).split('\n')[0]!.replace(`# HELP ${name} `, '');
}

test('the gateway\'s own histograms and counter print exactly as prom-client\'s would', async () => {
  const metrics = createMetrics({ processMetrics: false });
  observeAll(metrics);
  const help = {
    request: await helpOf(metrics.registry, 'gateway_request_duration_seconds'),
    upstream: await helpOf(metrics.registry, 'gateway_upstream_response_seconds'),
    validations: await helpOf(metrics.registry, 'gateway_token_validations_total'),
  };
  const ours = await metrics.registry.metrics();
  const theirs = await referenceRegistry(help).metrics();
  for (const name of ['gateway_request_duration_seconds', 'gateway_upstream_response_seconds', 'gateway_token_validations_total']) {
    assert.ok(family(theirs, name).length > 3, name);
    assert.deepEqual(family(ours, name), family(theirs, name), name);
  }
});

test('and sum across workers as prom-client\'s aggregation sums its own', async () => {
  const workers = [createMetrics({ processMetrics: false }), createMetrics({ processMetrics: false })];
  workers.forEach(observeAll);
  const help = {
    request: await helpOf(workers[0]!.registry, 'gateway_request_duration_seconds'),
    upstream: await helpOf(workers[0]!.registry, 'gateway_upstream_response_seconds'),
    validations: await helpOf(workers[0]!.registry, 'gateway_token_validations_total'),
  };
  const ours = await AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.registry.getMetricsAsJSON()))).metrics();
  const theirs = await AggregatorRegistry.aggregate(await Promise.all([referenceRegistry(help), referenceRegistry(help)].map((r) => r.getMetricsAsJSON()))).metrics();
  for (const name of ['gateway_request_duration_seconds', 'gateway_upstream_response_seconds', 'gateway_token_validations_total']) {
    assert.ok(family(theirs, name).some((line) => line.endsWith(' 20')), `${name}: the two workers' counts summed`);
    assert.deepEqual(family(ours, name), family(theirs, name), name);
  }
});
