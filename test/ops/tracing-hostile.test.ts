/**
 * Hostile trace context (`traceparent`, `tracestate`) against a gateway with tracing on (a
 * collector stand-in that takes every export) and off, from a trusted proxy and from anyone
 * else: oversized values, a hundred tracestate members, unknown and invalid versions, all-zero
 * ids, upper-case hex, repeated headers. Never a 500; the backend gets one well-formed
 * `traceparent` naming the gateway's span (tracing on) and a bounded `tracestate`, and nothing
 * of an untrusted peer's.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-http.js';

const ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';
const GOOD = `00-${ID}-${SPAN}-01`;

const HOSTILE: [string, [string, string][]][] = [
  ['an 8 KiB traceparent', [['traceparent', `00-${ID}-${SPAN}-01-${'a'.repeat(8000)}`]]],
  ['version ff', [['traceparent', `ff-${ID}-${SPAN}-01`]]],
  ['version 01 with more fields', [['traceparent', `01-${ID}-${SPAN}-01-extra`]]],
  ['an all-zero trace id', [['traceparent', `00-${'0'.repeat(32)}-${SPAN}-01`]]],
  ['an all-zero span id', [['traceparent', `00-${ID}-${'0'.repeat(16)}-01`]]],
  ['upper-case hex', [['traceparent', GOOD.toUpperCase()]]],
  ['two traceparents', [['traceparent', GOOD], ['traceparent', `00-${'1'.repeat(32)}-${SPAN}-01`]]],
  ['a tracestate of 100 members', [['traceparent', GOOD], ['tracestate', Array.from({ length: 100 }, (_, i) => `k${i}=v${i}`).join(',')]]],
  ['a tracestate member of 4000 bytes', [['traceparent', GOOD], ['tracestate', `big=${'x'.repeat(4000)}`]]],
  ['two tracestates', [['traceparent', GOOD], ['tracestate', 'a=1'], ['tracestate', 'b=2']]],
  ['a malformed tracestate', [['traceparent', GOOD], ['tracestate', '=,,===,a b=c']]],
  ['a tracestate alone', [['tracestate', 'a=1']]],
];

/** Closed by the caller, after the gateway: its last export must find the collector there. */
async function startCollector(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

async function send(gw: TestGateway, headers: [string, string][]) {
  const lines = ['GET /api/things/x HTTP/1.1', 'Host: x', 'Connection: close', ...headers.map(([n, v]) => `${n}: ${v}`)];
  return rawExchange(gw.url, `${lines.join('\r\n')}\r\n\r\n`);
}

for (const tracing of [true, false]) {
  for (const trusted of [true, false]) {
    test(`hostile trace context, tracing ${tracing ? 'on' : 'off'}, from ${trusted ? 'a trusted proxy' : 'an untrusted peer'}`, async (t) => {
      const backend = await startBackend(t);
      const collector = tracing ? await startCollector() : undefined;
      const gw = await startGateway(undefined, {
        overrides: {
          routes: [{ name: 'things', prefix: '/api/things', targets: [backend.url], auth: 'public' }],
          proxy: { trustedProxies: trusted ? ['127.0.0.1/32', '::1/128'] : [] },
          ...(collector !== undefined ? { tracing: { otlpEndpoint: collector.url } } : {}),
        },
      });
      t.after(async () => {
        await gw.close();
        await collector?.close();
      });
      for (const [what, headers] of HOSTILE) {
        const res = await send(gw, headers);
        assert.equal(res.status, 200, `${what}: ${res.status} ${res.body.toString().slice(0, 200)}`);
        const got = backend.received.at(-1)!.headers;
        const parents = got.traceparent ?? [];
        const states = got.tracestate ?? [];
        if (!trusted) assert.ok(!parents.some((p) => p.includes(ID) || p.includes(ID.toUpperCase())) && states.length === 0, `${what}: an untrusted peer's context went on: ${JSON.stringify({ parents, states })}`);
        if (tracing) {
          assert.equal(parents.length, 1, `${what}: one traceparent`);
          assert.match(parents[0]!, /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/, what);
          assert.ok(states.length <= 1 && (states[0] ?? '').length <= 512 && (states[0] ?? '').split(',').length <= 32, `${what}: tracestate ${JSON.stringify(states).slice(0, 200)}`);
        } else if (!trusted) {
          assert.deepEqual({ parents, states }, { parents: [], states: [] }, what);
        }
      }
      assert.equal(gw.logs.filter((line) => /"level":(50|60)/.test(line)).length, 0, 'no error logged');
    });
  }
}
