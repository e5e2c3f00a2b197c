/**
 * Several targets behind one route: round-robin, passive health (ejectAfterFailures
 * consecutive failures take a target out for ejectMs, measured on the gateway's clock, which
 * the tests move by hand), a bodiless request retried on another target when the connection
 * was refused, panic mode when every target is out, and keep-alive pools per backend.
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { test } from 'node:test';
import { startBackend, type Backend } from '../helpers/backend.js';
import { call } from '../helpers/gateway.js';
import { closedPort, eventually, startProxy, startTcpBackend, within } from '../helpers/proxy.js';

const HANG_GUARD_MS = 5000;

/** Which of `backends` received each new request while `run` ran, in order. */
async function servedBy(backends: Backend[], run: () => Promise<void>): Promise<number[]> {
  const order: number[] = [];
  const listeners = backends.map((backend, i) => {
    const listener = () => order.push(i);
    backend.server.on('request', listener);
    return listener;
  });
  try {
    await run();
  } finally {
    backends.forEach((backend, i) => backend.server.off('request', listeners[i]!));
  }
  return order;
}

test('round-robin alternates between targets, each with its own base path', async (t) => {
  const a = await startBackend(t);
  const b = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/rr', targets: [`${a.url}/one`, `${b.url}/two`], auth: 'public' }]);
  const order = await servedBy([a, b], async () => {
    for (let i = 0; i < 8; i++) assert.equal((await call(`${gw.url}/rr/${i}`)).status, 200);
  });
  assert.deepEqual(order, [0, 1, 0, 1, 0, 1, 0, 1]);
  assert.deepEqual(a.received.map((r) => r.url), ['/one/rr/0', '/one/rr/2', '/one/rr/4', '/one/rr/6']);
  assert.deepEqual(b.received.map((r) => r.url), ['/two/rr/1', '/two/rr/3', '/two/rr/5', '/two/rr/7']);
});

test('a failing target is ejected after ejectAfterFailures and comes back after ejectMs', async (t) => {
  // Accepts, then resets: a failure after connecting, so the request is not retried elsewhere.
  const dead = await startTcpBackend(t, (socket) => socket.once('data', () => socket.destroy()));
  const live = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/once', targets: [dead.url, live.url], auth: 'public', ejectAfterFailures: 1, ejectMs: 60_000 },
  ]);

  const first = await call(`${gw.url}/once/0`);
  assert.equal(first.status, 502, 'the first request went to the failing target');
  for (let i = 1; i <= 10; i++) {
    const res = await call(`${gw.url}/once/${i}`, { method: 'POST', body: `order ${i}` });
    assert.equal(res.status, 200, `request ${i} after the ejection`);
  }
  assert.equal(dead.connections(), 1, 'the ejected target was tried again');
  assert.equal(live.received.length, 10);

  gw.clock.advance(59_000);
  assert.equal((await call(`${gw.url}/once/a`)).status, 200);
  assert.equal((await call(`${gw.url}/once/b`)).status, 200);
  assert.equal(dead.connections(), 1, 'back before ejectMs');

  gw.clock.advance(1_001);
  const statuses = [(await call(`${gw.url}/once/c`)).status, (await call(`${gw.url}/once/d`)).status];
  assert.deepEqual(statuses.sort(), [200, 502], 'after ejectMs the target is in the rotation again');
  assert.equal(dead.connections(), 2);
});

test('a target whose port is closed: the first request is retried on the live one, then the dead one is out', async (t) => {
  const live = await startBackend(t);
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const gw = await startProxy(t, [{ prefix: '/down', targets: [dead, live.url], auth: 'public', ejectAfterFailures: 1, ejectMs: 3_600_000 }]);
  assert.equal((await call(`${gw.url}/down/first`)).status, 200, 'the refused GET was retried');
  // Requests with a body are never retried: a single one sent to the dead target would be a 502.
  for (let i = 0; i < 10; i++) {
    const res = await call(`${gw.url}/down/${i}`, { method: 'POST', body: `order ${i}` });
    assert.equal(res.status, 200, `request ${i}: ${JSON.stringify(res.body)}`);
  }
  assert.equal(live.received.length, 11);
  const warnings = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'backend failed');
  assert.deepEqual(warnings.map((l) => [l.target, l.code, l.ejected]), [[dead, 'ECONNREFUSED', true]]);
});

test('with ejectAfterFailures 2, one failure does not eject; two in a row do', async (t) => {
  const dead = await startTcpBackend(t, (socket) => socket.once('data', () => socket.destroy()));
  const live = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/twice', targets: [dead.url, live.url], auth: 'public', ejectAfterFailures: 2, ejectMs: 60_000 }]);
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) statuses.push((await call(`${gw.url}/twice/${i}`)).status);
  assert.deepEqual(statuses, [502, 200, 502, 200, 200, 200, 200, 200, 200, 200]);
  assert.equal(dead.connections(), 2);
});

test('an HTTP error answer is an answer: a target answering 500 stays in the rotation', async (t) => {
  const failing = await startBackend(t, (_req, res) => void res.writeHead(500).end('backend error'));
  const fine = await startBackend(t);
  const gw = await startProxy(t, [{ prefix: '/mixed', targets: [failing.url, fine.url], auth: 'public', ejectAfterFailures: 1 }]);
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await call(`${gw.url}/mixed/${i}`)).status);
  assert.deepEqual(statuses, [500, 200, 500, 200, 500, 200]);
});

test('a bodiless request refused at connect is retried on another target; a request with a body is not', async (t) => {
  const live = await startBackend(t);
  const refused = `http://127.0.0.1:${await closedPort()}`;
  const gw = await startProxy(t, [
    { prefix: '/get', targets: [refused, live.url], auth: 'public', ejectAfterFailures: 1000 },
    { prefix: '/post', targets: [refused, live.url], auth: 'public', ejectAfterFailures: 1000 },
  ]);
  for (const method of ['GET', 'HEAD', 'DELETE', 'GET']) {
    const res = await call(`${gw.url}/get/x`, { method });
    assert.equal(res.status, 200, `${method}: a refused connection must be retried on the live target`);
  }
  assert.equal(live.received.length, 4);
  for (const got of live.received) assert.deepEqual(got.headers.host, [`127.0.0.1:${live.port}`], 'the retry carries the Host of the target it went to');

  const post = await call(`${gw.url}/post/x`, { method: 'POST', body: 'not safe to send twice' });
  assert.equal(post.status, 502, 'a request with a body went to the refused target and was not retried');
  assert.equal(post.body.message.code, 'bad_gateway');
  assert.equal((await call(`${gw.url}/post/x`, { method: 'POST', body: 'x' })).status, 200, 'the next one goes to the live target');
});

test('every target down: 502 at once, not a hang; panic mode keeps trying them', async (t) => {
  const gw = await startProxy(t, [
    { prefix: '/down', targets: [`http://127.0.0.1:${await closedPort()}`, `http://127.0.0.1:${await closedPort()}`], auth: 'public', ejectAfterFailures: 1, ejectMs: 3_600_000 },
  ]);
  for (let i = 0; i < 5; i++) {
    const res = await within(call(`${gw.url}/down/${i}`), HANG_GUARD_MS, `request ${i}`);
    assert.equal(res.status, 502, `request ${i}`);
    assert.equal(res.body.message.code, 'bad_gateway');
  }

  // One target, failing once: ejected, but as the only one it is still tried, and it answers.
  const flaky = await startBackend(t, (req, res) => {
    if (req.url === '/flaky/fail') res.socket!.destroy();
    else res.end('ok');
  });
  const one = await startProxy(t, [{ prefix: '/flaky', targets: [flaky.url], auth: 'public', ejectAfterFailures: 1, ejectMs: 3_600_000 }]);
  assert.equal((await call(`${one.url}/flaky/fail`)).status, 502);
  const after = await fetch(`${one.url}/flaky/ok`);
  assert.equal(after.status, 200, 'an ejected only target must still be tried (panic mode)');
  assert.equal(await after.text(), 'ok');
});

test('keep-alive: sequential requests reuse pooled connections, shared by routes to the same backend', async (t) => {
  const backend = await startBackend(t);
  const gw = await startProxy(t, [
    { prefix: '/a', targets: [backend.url], auth: 'public' },
    { prefix: '/b', targets: [`${backend.url}/base`], auth: 'public' },
  ]);
  for (let i = 0; i < 20; i++) {
    const res = await fetch(`${gw.url}/${i % 2 === 0 ? 'a' : 'b'}/${i}`);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  }
  assert.equal(backend.received.length, 20);
  assert.ok(backend.connections() <= 2, `20 sequential requests took ${backend.connections()} backend connections`);
});

test('maxSocketsPerTarget bounds the connections to a backend; the requests beyond it wait their turn', async (t) => {
  const held: ServerResponse[] = [];
  const backend = await startBackend(t, (_req, res) => void held.push(res));
  const gw = await startProxy(t, [{ prefix: '/pool', targets: [backend.url], auth: 'public' }], { proxy: { maxSocketsPerTarget: 2 } });
  const answers = Array.from({ length: 8 }, (_, i) => fetch(`${gw.url}/pool/${i}`).then(async (res) => [res.status, await res.text()] as const));
  await eventually(() => held.length === 2, 'two requests at the backend', HANG_GUARD_MS);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(held.length, 2, 'more requests at the backend than the pool allows');
  assert.equal(backend.connections(), 2);
  // Answer whatever is waiting, as it arrives, until all eight are done.
  let answered = 0;
  const drain = setInterval(() => {
    while (held.length > 0) held.shift()!.end(`answer ${answered++}`);
  }, 5);
  t.after(() => clearInterval(drain));
  const results = await within(Promise.all(answers), HANG_GUARD_MS, 'all eight answers');
  clearInterval(drain);
  assert.deepEqual(results.map(([status]) => status), Array(8).fill(200));
  assert.equal(backend.connections(), 2, 'the queued requests reused the two connections');
});
