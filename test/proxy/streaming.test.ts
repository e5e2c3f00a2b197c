/**
 * Bodies stream through the gateway both ways, never buffered whole: a chunked answer and
 * server-sent events reach the client piece by piece while the backend is still writing
 * (proved in lock-step: the backend writes its next piece only once the client has the last
 * one), an upload reaches the backend while the client is still sending, a stream that keeps
 * talking outlives the route's timeouts, and a long poll gets its late answer.
 * The gigabyte transfers, with memory measured, are in large-transfers.test.ts.
 */
import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { startBackend } from '../helpers/backend.js';
import { call, signIn } from '../helpers/gateway.js';
import { signal, startProxy, within } from '../helpers/proxy.js';

const HANG_GUARD_MS = 5000;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Acknowledgements from the client, one per piece, that the backend waits for before writing the next. */
function lockStep(count: number) {
  const seen = Array.from({ length: count }, () => signal());
  const late: number[] = [];
  return {
    seen,
    late,
    /** The backend's wait: true if the client had piece `i` within the guard. */
    async waitFor(i: number): Promise<void> {
      let timer: NodeJS.Timeout | undefined;
      const arrived = await Promise.race([seen[i]!.promise.then(() => true), new Promise<false>((resolve) => { timer = setTimeout(resolve, HANG_GUARD_MS, false); })]);
      clearTimeout(timer);
      if (!arrived) late.push(i);
    },
  };
}

test('a chunked answer arrives chunk by chunk while the backend is still writing', async (t) => {
  const CHUNKS = 5;
  const steps = lockStep(CHUNKS);
  const backend = await startBackend(t, async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    for (let i = 0; i < CHUNKS; i++) {
      res.write(`<chunk ${i}>`);
      if (i < CHUNKS - 1) {
        await steps.waitFor(i);
        await pause(50);
      }
    }
    res.end();
  });
  const gw = await startProxy(t, [{ prefix: '/chunks', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);

  const res = await within(new Promise<IncomingMessage>((resolve, reject) => {
    httpRequest(`${gw.url}/chunks`, { headers: { authorization: `Bearer ${accessToken}` } }, resolve).on('error', reject).end();
  }), HANG_GUARD_MS, 'the response head');
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-length'], undefined);
  let text = '';
  res.setEncoding('utf8');
  res.on('data', (chunk: string) => {
    text += chunk;
    for (let i = 0; i < CHUNKS; i++) if (text.includes(`<chunk ${i}>`)) steps.seen[i]!.resolve();
  });
  await within(new Promise((resolve) => res.on('end', resolve)), HANG_GUARD_MS * CHUNKS, 'the whole answer');
  assert.equal(text, Array.from({ length: CHUNKS }, (_, i) => `<chunk ${i}>`).join(''));
  assert.deepEqual(steps.late, [], 'chunks that had not reached the client before the backend wrote the next');
});

test('server-sent events arrive one by one, and a stream longer than the route\'s timeouts lives on', async (t) => {
  const EVENTS = 6;
  const steps = lockStep(EVENTS);
  const backend = await startBackend(t, async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(': opened\n\n');
    for (let i = 0; i < EVENTS; i++) {
      res.write(`id: ${i}\nevent: tick\ndata: {"n":${i}}\n\n`);
      await steps.waitFor(i);
      await pause(200);
    }
    res.end();
  });
  // The stream runs about 1.2 s: longer than the head may take, and than the idle timeout,
  // but it never falls silent that long.
  const gw = await startProxy(t, [{ prefix: '/events', targets: [backend.url], responseTimeoutMs: 500, idleTimeoutMs: 1000 }]);
  const { accessToken } = await signIn(gw);
  const res = await fetch(`${gw.url}/events`, { headers: { authorization: `Bearer ${accessToken}`, accept: 'text/event-stream' } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  assert.equal(res.headers.get('cache-control'), 'no-cache');
  assert.equal(res.headers.get('content-length'), null);

  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const events: { id: string; data: string }[] = [];
  for (;;) {
    const { done, value } = await within(reader.read(), HANG_GUARD_MS, 'the next event');
    if (done) break;
    buffer += value;
    for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const id = /^id: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (id === undefined || data === undefined) continue;
      events.push({ id, data });
      steps.seen[Number(id)]!.resolve();
    }
  }
  assert.deepEqual(events, Array.from({ length: EVENTS }, (_, i) => ({ id: String(i), data: `{"n":${i}}` })));
  assert.deepEqual(steps.late, [], 'events that had not reached the client before the backend wrote the next');
});

test('a long poll gets its answer after 1.5 s when the route allows 5 s', async (t) => {
  const backend = await startBackend(t, (_req, res) => {
    setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"event":"order shipped"}'), 1500);
  });
  const gw = await startProxy(t, [{ prefix: '/poll', targets: [backend.url], responseTimeoutMs: 5000 }]);
  const { accessToken } = await signIn(gw);
  const res = await within(call(`${gw.url}/poll?since=42`, { token: accessToken }), 10_000, 'the long poll');
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(res.body, { event: 'order shipped' });
});

test('an upload reaches the backend while the client is still sending, whatever its size', async (t) => {
  const PIECE = 64 * 1024;
  const PIECES = 8;
  let received = 0;
  const progress: (() => void)[] = [];
  const backend = await startBackend(t, (req, res) => {
    req.on('data', (chunk: Buffer) => {
      received += chunk.length;
      for (const check of progress.splice(0)) check();
    });
    req.on('end', () => res.end(String(received)));
  }, { readBody: false });
  const gw = await startProxy(t, [{ prefix: '/upload', targets: [backend.url] }]);
  const { accessToken } = await signIn(gw);

  const total = PIECE * PIECES;
  const upload = httpRequest(`${gw.url}/upload`, { method: 'PUT', headers: { authorization: `Bearer ${accessToken}`, 'content-length': String(total) } });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    upload.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => { body += c; }).on('end', () => resolve({ status: res.statusCode!, body }));
    });
    upload.on('error', reject);
  });
  for (let i = 0; i < PIECES; i++) {
    upload.write(Buffer.alloc(PIECE, i));
    if (i < PIECES - 1) {
      // The next piece goes only once the backend has this one: nothing waits for the whole body.
      await within(new Promise<void>((resolve) => {
        const check = () => (received >= PIECE * (i + 1) ? resolve() : progress.push(check));
        check();
      }), HANG_GUARD_MS, `piece ${i} at the backend before the client sent the next`);
    }
  }
  upload.end();
  const res = await within(answer, HANG_GUARD_MS, 'the answer');
  assert.equal(res.status, 200);
  assert.equal(res.body, String(total), 'far beyond server.bodyLimitBytes: proxied bodies are not the gateway\'s to limit');
});
