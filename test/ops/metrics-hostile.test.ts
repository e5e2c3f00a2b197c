/**
 * /metrics under a client that tries to grow it: every request names a new method, path, Host,
 * owner or dashboard path, query, and the backend answers with statuses of every kind (even
 * outside 100–599). The number of series the gateway serves is the same after a second such
 * round as after the first: no label takes a value the client chose.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { signIn } from '../helpers/gateway.js';
import { parseMetrics } from '../helpers/metrics.js';
import { startProxy } from '../helpers/proxy.js';
import { rawExchange } from '../helpers/raw-http.js';

const STATUSES = [200, 201, 204, 299, 301, 304, 399, 400, 404, 418, 451, 499, 500, 503, 599, 600, 999];

test('no client can add a series to /metrics', async (t) => {
  const backend = await startBackend(t, (req, res) => {
    const status = Number(/status=(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
    res.writeHead(status, { 'content-length': 0 });
    res.end();
  });
  const gw = await startProxy(t, [
    { name: 'api', prefix: '/api/things', targets: [backend.url] },
    { name: 'open', prefix: '/open', targets: [backend.url], auth: 'public' },
  ], { metrics: { enabled: true } });
  const { accessToken } = await signIn(gw);

  const round = async () => {
    for (let i = 0; i < 40; i++) {
      const r = randomBytes(6).toString('hex');
      const status = STATUSES[i % STATUSES.length]!;
      const method = ['GET', 'POST', `X${r.toUpperCase()}`, 'PROPFIND', 'get', 'M-SEARCH'][i % 6]!;
      const paths = [`/open/${r}?status=${status}`, `/api/things/${r}?status=${status}`, `/nowhere/${r}`, `/owner/v1/${r}`,
        `/dashboard/${r}`, `/api/${r}`, `/healthz/${r}`, `/${r}`, `/api/things;${r}/x?status=${status}`];
      const path = paths[i % paths.length]!;
      const headers = [`Host: h${r}.example`, `Authorization: Bearer ${i % 2 === 0 ? accessToken : r}`, 'Content-Length: 0', 'Connection: close'];
      await rawExchange(gw.url, `${method} ${path} HTTP/1.1\r\n${headers.join('\r\n')}\r\n\r\n`).catch(() => undefined);
    }
    // An upgrade to nowhere and a handshake refused, too.
    await rawExchange(gw.url, `GET /open/${randomBytes(4).toString('hex')} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`).catch(() => undefined);
    const text = await gw.services.metrics.registry.metrics();
    const series = parseMetrics(text).filter((s) => s.name.startsWith('gateway_') && !s.name.startsWith('gateway_process_') && !s.name.startsWith('gateway_nodejs_'));
    return new Set(series.map((s) => `${s.name}${JSON.stringify(s.labels)}`));
  };
  // Twice first: every bounded label value a round can reach is reached by then.
  await round();
  const before = await round();
  const after = await round();
  const added = [...after].filter((s) => !before.has(s));
  assert.deepEqual(added, [], 'series the third round added');
  assert.ok(backend.received.length >= 9, `the backend answered ${backend.received.length} of the requests`);
  const samples = parseMetrics(await gw.services.metrics.registry.metrics());
  const values = new Set(samples.flatMap((s) => Object.entries(s.labels).filter(([name]) => name !== 'le' && name !== 'quantile').map(([name, value]) => `${name}=${value}`)));
  for (const value of values) assert.ok(!/nowhere|example|PROPFIND|M-SEARCH|X[0-9A-F]{12}|[0-9a-f]{12}/.test(value), `a label value a client chose: ${value}`);
  assert.deepEqual([...values].filter((v) => v.startsWith('status_class=') && !/^status_class=[1-5]xx$/.test(v)), []);
  assert.deepEqual([...values].filter((v) => v.startsWith('method=')).sort(), ['method=GET', 'method=POST', 'method=other']);
});
