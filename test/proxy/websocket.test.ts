/**
 * WebSocket routes end to end: a real ws echo backend behind an in-process gateway, real ws
 * clients in front, and raw TCP wherever the exact bytes the gateway writes matter.
 *
 *   1. the echo works, and the backend's handshake carries the identity headers and no
 *      credential or spoofed identity;
 *   2. the browser credential (subprotocols `bearer, bearer.<token>, …`) is removed before the
 *      backend and `bearer` answered when the backend selects nothing;
 *   3. every refusal is the envelope on the raw socket and the backend never hears of it;
 *   4. an open socket is closed by the gateway with a close frame to both sides: 4001 when its
 *      token expires, 4003 when its account is reset, 4008 when idle; each counted by reason
 *      (the expiry and idle timers run on the gateway's ManualClock: the tests move it);
 *   5. backend failures are 502/504, a backend's own refusal reaches the client as it is;
 *   6. closing the gateway closes open sockets with 1001, and the gateway's close frame comes
 *      between two frames even while large messages stream both ways.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { WebSocket } from 'ws';
import { DEMO, logged, parseRawResponse, postJson, sha256Hex, signIn, startGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/redis.js';
import { eventually } from '../helpers/proxy.js';
import {
  handshakeText, openClient, rawExchange, roundTrip, startWsBackend, whenClosed, type WsBackend,
} from '../helpers/ws-backend.js';

/** The backend selects `superchat` when offered, nothing when offered `nothing-please`, else the first. */
function selectProtocol(protocols: Set<string>): string | false {
  if (protocols.has('nothing-please')) return false;
  if (protocols.has('superchat')) return 'superchat';
  return protocols.values().next().value ?? false;
}

interface Refusal {
  status: number;
  reason: string;
  code: string;
  /** Expected WWW-Authenticate, or null for none. */
  challenge?: RegExp | null;
}

/**
 * Sends a handshake over raw TCP and checks the answer is exactly this refusal: status line,
 * envelope, no-store, the connection closed, nothing switched, and the backend never contacted.
 */
async function assertRefused(gw: TestGateway, backend: WsBackend, payload: string, refusal: Refusal, label: string): Promise<void> {
  const before = { handshakes: backend.handshakes.length, requests: backend.requests.length };
  const { raw, closed } = await rawExchange(gw.url, payload);
  const res = parseRawResponse(raw);
  assert.ok(raw.startsWith(`HTTP/1.1 ${refusal.status} ${refusal.reason}\r\n`), `${label}: ${JSON.stringify(raw.slice(0, 200))}`);
  assert.ok(!/^HTTP\/1\.1 101/m.test(raw), `${label}: nothing was switched`);
  assert.match(res.headers, /\r\ncontent-type: application\/json; charset=utf-8\r\n/i, label);
  assert.match(res.headers, /\r\ncache-control: no-store\r\n/i, label);
  assert.match(res.headers, /\r\nx-request-id: \S+\r\n/i, label);
  assert.deepEqual(Object.keys(res.body).sort(), ['message', 'success'], label);
  assert.equal(res.body.success, false, label);
  assert.equal(res.body.message.code, refusal.code, label);
  assert.equal(typeof res.body.message.description, 'string', label);
  const challenge = /\r\nwww-authenticate: ([^\r]*)/i.exec(res.headers)?.[1] ?? null;
  if (refusal.challenge === null) assert.equal(challenge, null, `${label}: no challenge`);
  else if (refusal.challenge !== undefined) assert.match(challenge ?? '(no WWW-Authenticate)', refusal.challenge, label);
  assert.ok(closed, `${label}: the gateway closes the connection`);
  assert.deepEqual({ handshakes: backend.handshakes.length, requests: backend.requests.length }, before, `${label}: the backend was never contacted`);
}

/** gateway_websocket_closed_total for a route and reason, and the open gauge of the route. */
async function webSocketCounts(gw: TestGateway, route: string, reason: string): Promise<{ closed: number; open: number }> {
  const { registry } = gw.services.metrics;
  const closed = (await registry.getSingleMetric('gateway_websocket_closed_total')!.get()).values
    .find((v) => v.labels.route === route && v.labels.reason === reason)?.value ?? 0;
  const open = (await registry.getSingleMetric('gateway_websocket_connections')!.get()).values
    .find((v) => v.labels.route === route)?.value ?? 0;
  return { closed, open };
}

/** Waits (bounded) until gateway_websocket_closed_total{route, reason} is `count`. */
async function untilClosedCount(gw: TestGateway, route: string, reason: string, count: number): Promise<void> {
  const deadline = Date.now() + 5000;
  let last = -1;
  while (Date.now() < deadline) {
    last = (await webSocketCounts(gw, route, reason)).closed;
    if (last === count) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail(`gateway_websocket_closed_total{route="${route}",reason="${reason}"} is ${last}, expected ${count}`);
}

/** Resolves with the close code the backend's side of a socket got. */
function backendCloseCode(ws: WebSocket): Promise<number> {
  return new Promise((resolve) => ws.once('close', (code: number) => resolve(code)));
}

/** Every log line that mentions a secret, for the "no token in the log" checks. */
function linesWith(gw: TestGateway, secrets: string[]): string[] {
  return gw.logs.filter((line) => secrets.some((s) => line.includes(s)));
}

test('WebSocket routes', async (t) => {
  const backend = await startWsBackend(t, { handleProtocols: selectProtocol });
  const silent = await startWsBackend(t, { answer: 'silent' });
  const forbidden = await startWsBackend(t, { answer: 'forbidden' });
  const deadUrl = `http://127.0.0.1:${await freePort()}`;
  const gw = await startGateway(t, {
    overrides: {
      routes: [
        { prefix: '/ws', targets: [backend.url], websocket: true },
        { prefix: '/ws-fwd', targets: [backend.url], websocket: true, forwardAuthorization: true },
        { prefix: '/ws-scoped', targets: [backend.url], websocket: true, requiredScope: 'chat:admin' },
        { prefix: '/plain', targets: [backend.url] },
        { prefix: '/ws-down', targets: [deadUrl], websocket: true, connectTimeoutMs: 1000 },
        { prefix: '/ws-silent', targets: [silent.url], websocket: true, responseTimeoutMs: 300 },
        { prefix: '/ws-forbidden', targets: [forbidden.url], websocket: true },
      ],
    },
  });
  /** Every token handed out, for the log checks. */
  const secrets: string[] = [];
  const issue = async (who: { apiKey: string; secret: string } = DEMO.alice) => {
    const pair = await signIn(gw, who);
    secrets.push(pair.accessToken, pair.accessToken.split('.')[2]!, pair.refreshToken);
    return pair.accessToken;
  };

  await t.test('echo with Authorization: Bearer: text and a 1 MiB binary message come back', async (t) => {
    const token = await issue();
    const ws = await openClient(gw.url, '/ws/echo', { token });
    t.after(() => ws.terminate());
    const text = await roundTrip(ws, 'hello, gateway');
    assert.deepEqual([text.data.toString(), text.isBinary], ['hello, gateway', false]);
    const payload = randomBytes(1024 * 1024);
    const binary = await roundTrip(ws, payload);
    assert.equal(binary.isBinary, true);
    assert.equal(binary.data.length, payload.length);
    assert.ok(binary.data.equals(payload), 'the 1 MiB message came back byte for byte');
    assert.equal(backend.handshakes.at(-1)!.url, '/ws/echo');
  });

  await t.test('the backend handshake carries the identity headers, not the credential or a spoofed identity', async (t) => {
    const token = await issue();
    const claims = decodeJwt(token);
    const before = backend.handshakes.length;
    const ws = await openClient(gw.url, '/ws/identity', {
      token,
      headers: {
        'X-Account-Id': DEMO.bob.accountId, 'x-key-id': DEMO.bob.keyId, 'X-Token-Id': 'forged',
        'X-Forwarded-For': '203.0.113.9', 'X-Request-Id': 'client-request-1',
      },
    });
    t.after(() => ws.terminate());
    assert.equal(backend.handshakes.length, before + 1);
    const h = backend.handshakes.at(-1)!.headers;
    assert.deepEqual(h['x-account-id'], [DEMO.alice.accountId], 'the spoofed X-Account-Id is replaced, not kept beside');
    assert.deepEqual(h['x-key-id'], [DEMO.alice.keyId]);
    assert.deepEqual(h['x-token-id'], [claims.jti]);
    assert.deepEqual(h['x-request-id'], ['client-request-1'], 'a plain client request id is kept');
    assert.equal(h.authorization, undefined, 'the access token never reaches the backend');
    assert.deepEqual(h['x-forwarded-for'], ['127.0.0.1'], 'an untrusted X-Forwarded-For is replaced by the peer');
    assert.deepEqual(h['x-forwarded-proto'], ['http']);
    assert.deepEqual(h.upgrade, ['websocket']);
    assert.equal(h['sec-websocket-protocol'], undefined, 'no subprotocol offered, none sent');
    assert.ok(!JSON.stringify(h).includes(token), 'the token appears in no header');
  });

  await t.test('without a client request id the backend gets the gateway\'s', async (t) => {
    const ws = await openClient(gw.url, '/ws/rid', { token: await issue() });
    t.after(() => ws.terminate());
    assert.match(backend.handshakes.at(-1)!.headers['x-request-id']?.[0] ?? '', /^[0-9a-f-]{36}$/);
  });

  await t.test('forwardAuthorization: true sends Authorization through', async (t) => {
    const token = await issue();
    const ws = await openClient(gw.url, '/ws-fwd/echo', { token });
    t.after(() => ws.terminate());
    assert.deepEqual(backend.handshakes.at(-1)!.headers.authorization, [`Bearer ${token}`]);
    assert.equal((await roundTrip(ws, 'fwd')).data.toString(), 'fwd');
  });

  await t.test('the path is normalised before the route and the backend see it', async (t) => {
    const ws = await openClient(gw.url, '/other/../WS/./a//b', { token: await issue() });
    t.after(() => ws.terminate());
    assert.equal(backend.handshakes.at(-1)!.url, '/WS/a/b');
  });

  await t.test('browser credential: bearer, bearer.<token>, chat: the backend sees only chat and selects it', async (t) => {
    const token = await issue();
    const ws = await openClient(gw.url, '/ws/browser', { protocols: ['bearer', `bearer.${token}`, 'chat'] });
    t.after(() => ws.terminate());
    const h = backend.handshakes.at(-1)!.headers;
    assert.deepEqual(h['sec-websocket-protocol'], ['chat']);
    assert.ok(!JSON.stringify(h).includes(token), 'the token appears in no header the backend got');
    assert.deepEqual(h['x-account-id'], [DEMO.alice.accountId]);
    assert.equal(ws.protocol, 'chat');
    assert.equal((await roundTrip(ws, 'via subprotocol')).data.toString(), 'via subprotocol');
  });

  await t.test('browser credential: the client gets the subprotocol the backend chose', async (t) => {
    const ws = await openClient(gw.url, '/ws/browser', { protocols: ['bearer', `bearer.${await issue()}`, 'chat', 'superchat'] });
    t.after(() => ws.terminate());
    assert.deepEqual(backend.handshakes.at(-1)!.headers['sec-websocket-protocol'], ['chat, superchat']);
    assert.equal(ws.protocol, 'superchat');
  });

  await t.test('browser credential alone: nothing offered to the backend, the client gets "bearer"', async (t) => {
    const ws = await openClient(gw.url, '/ws/browser', { protocols: ['bearer', `bearer.${await issue()}`] });
    t.after(() => ws.terminate());
    assert.equal(backend.handshakes.at(-1)!.headers['sec-websocket-protocol'], undefined);
    assert.equal(ws.protocol, 'bearer');
    assert.equal((await roundTrip(ws, 'ok')).data.toString(), 'ok');
  });

  await t.test('browser credential: a backend that selects none of the app protocols still gets "bearer" answered', async (t) => {
    const ws = await openClient(gw.url, '/ws/browser', { protocols: ['bearer', `bearer.${await issue()}`, 'nothing-please'] });
    t.after(() => ws.terminate());
    assert.deepEqual(backend.handshakes.at(-1)!.headers['sec-websocket-protocol'], ['nothing-please']);
    assert.equal(ws.protocol, 'bearer');
  });

  await t.test('refusals are the envelope on the raw socket, and the backend never hears of them', async (t) => {
    const token = await issue();
    const auth: [string, string] = ['Authorization', `Bearer ${token}`];
    const hs = (path: string, headers: [string, string][] = [], method = 'GET') => handshakeText(gw.url, path, { method, headers });

    await t.test('no token: 401 missing_token, challenge without error', () => assertRefused(gw, backend, hs('/ws/x'),
      { status: 401, reason: 'Unauthorized', code: 'missing_token', challenge: /^Bearer realm="gateway"$/ }, 'no token'));
    await t.test('only the bearer marker: 401 missing_token', () => assertRefused(gw, backend, hs('/ws/x', [['Sec-WebSocket-Protocol', 'bearer, chat']]),
      { status: 401, reason: 'Unauthorized', code: 'missing_token', challenge: /^Bearer realm="gateway"$/ }, 'marker only'));
    await t.test('garbage token: 401 invalid_token', () => assertRefused(gw, backend, hs('/ws/x', [['Authorization', 'Bearer abc.def.ghi']]),
      { status: 401, reason: 'Unauthorized', code: 'invalid_token', challenge: /^Bearer realm="gateway", error="invalid_token"/ }, 'garbage'));
    await t.test('garbage token as subprotocol: 401 invalid_token', () => assertRefused(gw, backend,
      hs('/ws/x', [['Sec-WebSocket-Protocol', 'bearer, bearer.abc.def.ghi']]),
      { status: 401, reason: 'Unauthorized', code: 'invalid_token', challenge: /error="invalid_token"/ }, 'garbage subprotocol'));
    await t.test('forged token (payload changed, signature kept): 401 invalid_token', () => {
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
      const forged = [header, Buffer.from(JSON.stringify({ ...claims, sub: DEMO.bob.accountId })).toString('base64url'), signature].join('.');
      return assertRefused(gw, backend, hs('/ws/x', [['Authorization', `Bearer ${forged}`]]),
        { status: 401, reason: 'Unauthorized', code: 'invalid_token', challenge: /error="invalid_token"/ }, 'forged');
    });
    await t.test('a token signed with another key under the gateway\'s kid: 401 invalid_token', async () => {
      const { privateKey } = generateKeyPairSync('ed25519');
      const claims = decodeJwt(token);
      const forged = await new SignJWT(claims).setProtectedHeader(decodeProtectedHeader(token) as { alg: string }).sign(privateKey);
      await assertRefused(gw, backend, hs('/ws/x', [['Authorization', `Bearer ${forged}`]]),
        { status: 401, reason: 'Unauthorized', code: 'invalid_token', challenge: /error="invalid_token"/ }, 'other key');
    });
    await t.test('malformed Authorization: 400 invalid_request', () => assertRefused(gw, backend, hs('/ws/x', [['Authorization', 'Bearer']]),
      { status: 400, reason: 'Bad Request', code: 'invalid_request', challenge: /error="invalid_request"/ }, 'malformed'));
    await t.test('token in the header and in the subprotocols: 400', () => assertRefused(gw, backend,
      hs('/ws/x', [auth, ['Sec-WebSocket-Protocol', `bearer, bearer.${token}`]]),
      { status: 400, reason: 'Bad Request', code: 'invalid_request' }, 'both'));
    await t.test('two bearer.<token> subprotocols: 400', () => assertRefused(gw, backend,
      hs('/ws/x', [['Sec-WebSocket-Protocol', `bearer, bearer.${token}, bearer.${token}`]]),
      { status: 400, reason: 'Bad Request', code: 'invalid_request' }, 'two tokens'));
    await t.test('two bearer.<token> subprotocols in two headers: 400', () => assertRefused(gw, backend,
      hs('/ws/x', [['Sec-WebSocket-Protocol', `bearer, bearer.${token}`], ['Sec-WebSocket-Protocol', `bearer.${token}`]]),
      { status: 400, reason: 'Bad Request', code: 'invalid_request' }, 'two tokens, two headers'));
    await t.test('POST with Upgrade on a WebSocket route: 405, Allow: GET', async () => {
      await assertRefused(gw, backend, hs('/ws/x', [auth, ['Content-Length', '0']], 'POST'),
        { status: 405, reason: 'Method Not Allowed', code: 'method_not_allowed' }, 'POST');
      const { raw } = await rawExchange(gw.url, hs('/ws/x', [auth, ['Content-Length', '0']], 'POST'));
      assert.match(raw, /\r\nAllow: GET\r\n/i);
    });
    await t.test('requiredScope the token lacks: 403 insufficient_scope', () => assertRefused(gw, backend, hs('/ws-scoped/x', [auth]),
      { status: 403, reason: 'Forbidden', code: 'insufficient_scope', challenge: /error="insufficient_scope".*scope="chat:admin"/ }, 'scope'));
    await t.test('requiredScope, token in the subprotocols: 403 too', () => assertRefused(gw, backend,
      hs('/ws-scoped/x', [['Sec-WebSocket-Protocol', `bearer, bearer.${token}`]]),
      { status: 403, reason: 'Forbidden', code: 'insufficient_scope' }, 'scope, subprotocol'));

    await t.test('a path that is no route: 404, not switched', async () => {
      const before = backend.handshakes.length + backend.requests.length;
      const { raw } = await rawExchange(gw.url, hs('/nowhere/x', [auth]), { untilComplete: true });
      const res = parseRawResponse(raw);
      assert.equal(res.status, 404, raw.slice(0, 200));
      assert.deepEqual([res.body.success, res.body.message.code], [false, 'not_found']);
      assert.equal(backend.handshakes.length + backend.requests.length, before);
    });

    await t.test('a route without websocket: true: no upgrade, served as plain HTTP', async () => {
      const before = backend.handshakes.length;
      const requests = backend.requests.length;
      const { raw } = await rawExchange(gw.url, hs('/plain/x', [auth]), { untilComplete: true });
      const res = parseRawResponse(raw);
      assert.equal(res.status, 200, raw.slice(0, 300));
      assert.ok(raw.endsWith('plain'), raw);
      assert.equal(backend.handshakes.length, before, 'no handshake reached the backend');
      assert.equal(backend.requests.length, requests + 1, 'a plain request did');
      const plain = backend.requests.at(-1)!;
      assert.equal(plain.url, '/plain/x');
      assert.equal(plain.headers.upgrade, undefined, 'Upgrade is hop-by-hop and removed');
      assert.equal(plain.headers.authorization, undefined);
    });

    await t.test('a route without websocket: true still needs a token', async () => {
      const { raw } = await rawExchange(gw.url, hs('/plain/x'), { untilComplete: true });
      assert.equal(parseRawResponse(raw).status, 401, raw.slice(0, 200));
    });

    await t.test('a token revoked by a reset: 401 invalid_token', async () => {
      const old = await issue(DEMO.bob);
      const reset = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.bob.apiKey, apiSecret: sha256Hex(DEMO.bob.secret) });
      assert.equal(reset.status, 200, JSON.stringify(reset.body));
      gw.clock.advance(1);
      await assertRefused(gw, backend, hs('/ws/x', [['Sec-WebSocket-Protocol', `bearer, bearer.${old}`]]),
        { status: 401, reason: 'Unauthorized', code: 'invalid_token', challenge: /error="invalid_token"/ }, 'revoked');
    });

    await t.test('an expired token: 401 invalid_token', async () => {
      const soon = await issue();
      // Past the lifetime and the clock-skew tolerance.
      gw.clock.advance((900 + 5 + 1) * 1000);
      await assertRefused(gw, backend, hs('/ws/x', [['Authorization', `Bearer ${soon}`]]),
        { status: 401, reason: 'Unauthorized', code: 'invalid_token', challenge: /error="invalid_token"/ }, 'expired');
    });

    await t.test('each refusal wrote an access line for the handshake with its status', () => {
      const statuses = logged(gw, 'request').filter((line) => line.websocket === true).map((line) => line.status);
      for (const status of [400, 401, 403, 405]) assert.ok(statuses.includes(status), `an upgrade line with status ${status}: ${statuses}`);
    });
  });

  await t.test('backend failures', async (t) => {
    await t.test('backend down: 502 bad_gateway envelope on the raw socket', async () => {
      const token = await issue();
      const { raw, closed } = await rawExchange(gw.url, handshakeText(gw.url, '/ws-down/x', { headers: [['Authorization', `Bearer ${token}`]] }));
      const res = parseRawResponse(raw);
      assert.ok(raw.startsWith('HTTP/1.1 502 Bad Gateway\r\n'), raw.slice(0, 200));
      assert.deepEqual([res.body.success, res.body.message.code], [false, 'bad_gateway']);
      const requestId = /\r\nx-request-id: (\S+)\r\n/i.exec(res.headers)?.[1];
      assert.equal(res.body.message.requestId, requestId, 'a 5xx names its request id');
      assert.ok(closed);
    });

    await t.test('backend accepts but never answers the handshake: 504 after responseTimeoutMs', async () => {
      const token = await issue();
      const { raw, closed } = await rawExchange(gw.url, handshakeText(gw.url, '/ws-silent/x', { headers: [['Authorization', `Bearer ${token}`]] }));
      const res = parseRawResponse(raw);
      assert.ok(raw.startsWith('HTTP/1.1 504 Gateway Timeout\r\n'), raw.slice(0, 200));
      assert.deepEqual([res.body.success, res.body.message.code], [false, 'gateway_timeout']);
      assert.equal(silent.handshakes.length, 1, 'the backend did get the handshake');
      assert.ok(closed);
    });

    await t.test('backend answers the upgrade with a plain 403: the client gets that 403', async () => {
      const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/ws-forbidden/x`, { headers: { authorization: `Bearer ${await issue()}` } });
      const answer = await new Promise<{ status: number; body: string; backendHeader: unknown }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no answer within 5 s')), 5000);
        ws.once('open', () => reject(new Error('the WebSocket opened')));
        ws.once('error', (err) => reject(err));
        ws.once('unexpected-response', (req, res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (c: string) => { body += c; });
          res.on('end', () => {
            clearTimeout(timer);
            req.destroy();
            resolve({ status: res.statusCode ?? 0, body, backendHeader: res.headers['x-backend'] });
          });
        });
      });
      assert.deepEqual(answer, { status: 403, body: '{"backend":"forbidden"}', backendHeader: 'ws' });
      assert.equal(forbidden.handshakes.length, 1);
    });

    await t.test('each backend failure wrote an access line for the handshake with the status the client got', async () => {
      const statuses = () => logged(gw, 'request').filter((l) => l.websocket === true).filter((l) => /^\/ws-(down|silent|forbidden)\//.test(String(l.path))).map((l) => `${l.path} ${l.status}`);
      // The client may read the relayed 403 before the gateway logs it: wait for the line (bounded).
      const deadline = Date.now() + 10_000;
      while (statuses().length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(statuses().sort(), ['/ws-down/x 502', '/ws-forbidden/x 403', '/ws-silent/x 504']);
    });
  });

  await t.test('the backend closing the socket closes the client, with its close code', async () => {
    const ws = await openClient(gw.url, '/ws/closing', { token: await issue() });
    const closed = whenClosed(ws);
    await roundTrip(ws, 'before');
    backend.sockets.at(-1)!.close(4001, 'backend says bye');
    assert.deepEqual(await closed.then(({ code, reason }) => ({ code, reason })), { code: 4001, reason: 'backend says bye' });
  });

  await t.test('a client closing its socket releases it in the gateway and the backend', async () => {
    const before = await webSocketCounts(gw, '/ws', 'client');
    const ws = await openClient(gw.url, '/ws/leaving', { token: await issue() });
    const theirs = backend.sockets.at(-1)!;
    const theirCode = backendCloseCode(theirs);
    const closed = whenClosed(ws);
    ws.close(1000, 'done');
    assert.equal((await closed).code, 1000);
    assert.equal(await theirCode, 1000, 'the client\'s close frame reached the backend');
    await eventually(() => theirs.readyState === WebSocket.CLOSED, 'the backend side closed');
    await untilClosedCount(gw, '/ws', 'client', before.closed + 1);
  });

  await t.test('a reset of the account closes its open sockets at once; another account\'s stay open', async (t) => {
    gw.clock.advance(1000);
    const alice = await issue();
    const bob = await issue(DEMO.bob);
    const viaHeader = await openClient(gw.url, '/ws/a', { token: alice });
    const viaProtocol = await openClient(gw.url, '/ws/b', { protocols: ['bearer', `bearer.${alice}`, 'chat'] });
    const bobs = await openClient(gw.url, '/ws/c', { token: bob });
    t.after(() => { viaHeader.terminate(); viaProtocol.terminate(); bobs.terminate(); });
    const aliceBackendSides = backend.sockets.slice(-3, -1);
    const backendCodes = aliceBackendSides.map(backendCloseCode);
    const resetsBefore = (await webSocketCounts(gw, '/ws', 'reset')).closed;
    const closes = [whenClosed(viaHeader, 2000), whenClosed(viaProtocol, 2000)];
    let bobClosed = false;
    bobs.once('close', () => { bobClosed = true; });
    const linesBefore = gw.logs.length;

    const reset = await postJson(`${gw.url}/api/reset`, { apiKey: DEMO.alice.apiKey, apiSecret: sha256Hex(DEMO.alice.secret), scope: 'account' });
    assert.equal(reset.status, 200, JSON.stringify(reset.body));
    const [a, b] = await Promise.all(closes);
    assert.deepEqual([a!.code, a!.reason, b!.code, b!.reason], [4003, 'access reset', 4003, 'access reset'], 'a close frame, with the documented code');
    assert.deepEqual(await Promise.all(backendCodes), [4003, 4003], 'the backend sides got the close frame too');
    for (const side of aliceBackendSides) await eventually(() => side.readyState === WebSocket.CLOSED, 'the backend side of a reset socket closed');
    await untilClosedCount(gw, '/ws', 'reset', resetsBefore + 2);

    assert.equal((await roundTrip(bobs, 'still here')).data.toString(), 'still here');
    assert.equal(bobClosed, false, 'bob\'s socket stayed open');

    await eventually(() => gw.services.proxy.openWebSockets() === 1, 'the gateway tracks only bob\'s socket');

    gw.clock.advance(1);
    const fresh = await openClient(gw.url, '/ws/again', { token: await issue() });
    assert.equal((await roundTrip(fresh, 'new token')).data.toString(), 'new token', 'a token issued after the reset opens a socket');
    fresh.terminate();

    const closedLines = gw.logs.slice(linesBefore).map((line) => JSON.parse(line)).filter((line) => line.msg === 'websocket closed by the gateway');
    for (const line of closedLines) {
      assert.deepEqual([line.reason, line.accountId, line.tokenId], ['reset', DEMO.alice.accountId, decodeJwt(alice).jti]);
    }
    assert.equal(closedLines.length, 2, `one line per closed socket: ${JSON.stringify(closedLines)}`);
  });

  await t.test('no token ever reached the log', () => {
    assert.ok(secrets.length > 0);
    assert.deepEqual(linesWith(gw, secrets), []);
  });
});

test('an open socket is closed when its access token expires', async (t) => {
  const backend = await startWsBackend(t);
  const gw = await startGateway(t, {
    overrides: { tokens: { accessTokenTtlSeconds: 2 }, routes: [{ prefix: '/ws', targets: [backend.url], websocket: true }] },
  });
  const { accessToken } = await signIn(gw);
  const { exp, jti } = decodeJwt(accessToken);
  const ws = await openClient(gw.url, '/ws/expiring', { token: accessToken });
  const closed = whenClosed(ws);
  assert.equal((await roundTrip(ws, 'alive')).data.toString(), 'alive');
  await eventually(() => gw.services.proxy.openWebSockets() === 1, 'the gateway holds the connection');
  const closedByGateway = () => gw.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'websocket closed by the gateway');

  // Up to the last millisecond of the token's life, the socket stays open (the timer fires as the clock passes it).
  gw.clock.advance(exp! * 1000 - gw.clock.now() - 1);
  assert.deepEqual(closedByGateway(), [], 'not closed before the token expired');
  assert.equal((await roundTrip(ws, 'still alive')).data.toString(), 'still alive');
  const theirCode = backendCloseCode(backend.sockets.at(-1)!);
  gw.clock.advance(1);
  const { code, reason } = await closed;
  assert.deepEqual({ code, reason }, { code: 4001, reason: 'token expired' });
  assert.equal(await theirCode, 4001, 'the backend got the close frame too');
  await eventually(() => backend.open() === 0, 'the backend side closed');
  // Released once both of the gateway's sockets have closed, the client's a moment later.
  await eventually(() => gw.services.proxy.openWebSockets() === 0, 'the gateway released the socket');

  const lines = closedByGateway();
  assert.equal(lines.length, 1, JSON.stringify(lines));
  assert.deepEqual([lines[0].reason, lines[0].accountId, lines[0].tokenId], ['expired', DEMO.alice.accountId, jti]);
  assert.deepEqual(gw.logs.filter((line) => line.includes(accessToken) || line.includes(accessToken.split('.')[2]!)), []);
  assert.deepEqual(await webSocketCounts(gw, '/ws', 'expired'), { closed: 1, open: 0 });
});

test('closing the gateway closes its open sockets with 1001, to both sides', async (t) => {
  const backend = await startWsBackend(t);
  // Not closed by startGateway's own t.after: that would wait on the very sockets this test
  // may leave open. The sockets are cut first, then the gateway closed.
  const gw = await startGateway(undefined, {
    overrides: { server: { shutdownTimeoutMs: 500 }, routes: [{ prefix: '/ws', targets: [backend.url], websocket: true }] },
  });
  const token = (await signIn(gw)).accessToken;
  const sockets = [await openClient(gw.url, '/ws/1', { token }), await openClient(gw.url, '/ws/2', { protocols: ['bearer', `bearer.${token}`] })];
  t.after(async () => {
    for (const ws of sockets) ws.terminate();
    await gw.close();
  });
  const closed = sockets.map((ws) => new Promise<number>((resolve) => ws.once('close', (code: number) => resolve(code))));
  const backendCodes = backend.sockets.map(backendCloseCode);

  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<'pending'>((resolve) => { timer = setTimeout(() => resolve('pending'), 15_000); });
  // shutdownTimeoutMs is 500: the guard only catches a close that hangs, on however loaded a machine.
  const outcome = await Promise.race([gw.close().then(() => 'closed' as const), guard]).finally(() => clearTimeout(timer));
  // The clients learn of the cut a moment later; bounded, not timed.
  await Promise.race([Promise.all(closed), new Promise((resolve) => setTimeout(resolve, 10_000))]);
  const states = sockets.map((ws) => ws.readyState === WebSocket.CLOSED ? 'closed' : 'open');
  assert.deepEqual({ close: outcome, sockets: states }, { close: 'closed', sockets: ['closed', 'closed'] },
    `gw.close() is ${outcome} 15 s after it was called, the open sockets: ${states.join(', ')}`);
  assert.deepEqual(await Promise.all(closed), [1001, 1001], 'going away: a close frame, not a cut');
  assert.deepEqual(await Promise.all(backendCodes), [1001, 1001], 'the backend sides got the close frame too');
  await eventually(() => backend.open() === 0, 'the backend sides closed');
  assert.equal(gw.services.proxy.openWebSockets(), 0);
  assert.deepEqual(await webSocketCounts(gw, '/ws', 'drain'), { closed: 2, open: 0 });
});

test('the gateway\'s close frame comes between two frames while large messages stream both ways', async (t) => {
  const backend = await startWsBackend(t);
  const gw = await startGateway(undefined, {
    overrides: { server: { shutdownTimeoutMs: 5000 }, routes: [{ prefix: '/ws', targets: [backend.url], websocket: true }] },
  });
  const ws = await openClient(gw.url, '/ws/stream', { token: (await signIn(gw)).accessToken });
  t.after(async () => {
    ws.terminate();
    await gw.close();
  });
  // 256 KiB messages, sent as fast as the socket takes them and echoed: when the close comes,
  // frames are in flight both ways, most of them split over several TCP reads.
  const size = 256 * 1024;
  const message = randomBytes(size);
  const sizes: number[] = [];
  let errors = 0;
  ws.on('error', () => { errors++; });
  ws.on('message', (data: Buffer) => { sizes.push(data.length); });
  const closed = whenClosed(ws, 10_000);
  let sending = true;
  const pump = () => {
    while (sending && ws.readyState === WebSocket.OPEN && ws.bufferedAmount < 4 * size) ws.send(message);
    if (sending && ws.readyState === WebSocket.OPEN) setTimeout(pump, 1);
  };
  pump();
  await eventually(() => sizes.length >= 8, 'echoes are flowing');
  await gw.close();
  sending = false;
  const { code } = await closed;
  assert.equal(code, 1001, 'the close frame was read as one: no frame was cut in two');
  assert.equal(errors, 0, 'the client saw no protocol error');
  assert.ok(sizes.length >= 8);
  assert.deepEqual([...new Set(sizes)], [size], 'every message came back whole');
});

test('an idle WebSocket is closed with 4008; traffic either way keeps one open', async (t) => {
  const backend = await startWsBackend(t);
  const gw = await startGateway(t, {
    overrides: {
      routes: [
        { prefix: '/idle', targets: [backend.url], websocket: true, webSocketIdleTimeoutMs: 300 },
        { prefix: '/busy', targets: [backend.url], websocket: true, webSocketIdleTimeoutMs: 1500 },
        { prefix: '/forever', targets: [backend.url], websocket: true, webSocketIdleTimeoutMs: 0 },
      ],
    },
  });
  const token = (await signIn(gw)).accessToken;
  const busy = await openClient(gw.url, '/busy/x', { token });
  const forever = await openClient(gw.url, '/forever/x', { token });
  const idle = await openClient(gw.url, '/idle/x', { token });
  t.after(() => { busy.terminate(); forever.terminate(); idle.terminate(); });
  const [busyBackend, , idleBackend] = backend.sockets.slice(-3).map(backendCloseCode);
  const idleClosed = whenClosed(idle);
  // The idle timers start with the connections: time moves only once the gateway holds all three.
  await eventually(() => gw.services.proxy.openWebSockets() === 3, 'the gateway holds the three connections');
  const closedByGateway = () => logged(gw, 'websocket closed by the gateway').map((line) => line.route);

  gw.clock.advance(299);
  assert.deepEqual(closedByGateway(), [], 'nothing is closed before its idle timeout');
  gw.clock.advance(1);
  const { code, reason } = await idleClosed;
  assert.deepEqual({ code, reason }, { code: 4008, reason: 'idle timeout' });
  assert.equal(await idleBackend, 4008, 'the backend got the close frame too');
  await untilClosedCount(gw, '/idle', 'idle', 1);

  // Traffic on /busy restarts its timeout: 2300 ms after it opened, 1000 after its last echo, it is open.
  gw.clock.advance(1000);
  assert.equal((await roundTrip(busy, 'ping')).data.toString(), 'ping');
  gw.clock.advance(1000);
  assert.deepEqual(closedByGateway(), ['/idle'], 'the socket with traffic is still open');
  assert.equal((await roundTrip(busy, 'ping')).data.toString(), 'ping');
  assert.equal(busy.readyState, WebSocket.OPEN, 'a socket with traffic stays open');
  assert.equal((await webSocketCounts(gw, '/busy', 'idle')).closed, 0);

  // Without traffic, it is closed at its own timeout; /forever never is.
  const busyClosed = whenClosed(busy);
  gw.clock.advance(1500);
  assert.equal((await busyClosed).code, 4008);
  assert.equal(await busyBackend, 4008);
  await untilClosedCount(gw, '/busy', 'idle', 1);
  gw.clock.advance(60_000);
  assert.equal(forever.readyState, WebSocket.OPEN, 'webSocketIdleTimeoutMs: 0 never closes for idleness');
  assert.equal((await roundTrip(forever, 'still')).data.toString(), 'still');
  assert.deepEqual(closedByGateway(), ['/idle', '/busy']);
});

test('a WebSocket route whose prefix covers the gateway\'s own paths never gets a handshake for them', async (t) => {
  const backend = await startWsBackend(t);
  const gw = await startGateway(t, {
    overrides: {
      routes: [
        { prefix: '/', targets: [backend.url], websocket: true, auth: 'public' },
        { prefix: '/api', targets: [backend.url], websocket: true },
      ],
    },
  });
  const { accessToken } = await signIn(gw);
  const auth: [string, string] = ['Authorization', `Bearer ${accessToken}`];
  const served = async (path: string, headers: [string, string][] = []) => {
    const { raw } = await rawExchange(gw.url, handshakeText(gw.url, path, { headers }), { untilComplete: true });
    assert.ok(!/^HTTP\/1\.1 101/m.test(raw), `${path}: nothing was switched: ${raw.slice(0, 200)}`);
    return parseRawResponse(raw);
  };

  // The gateway's own paths are the gateway's whatever the Upgrade header says: answered as
  // plain requests, by the gateway, as without it.
  const health = await served('/healthz');
  assert.deepEqual([health.status, health.body.success], [200, true]);
  const roles = await served('/api/roles', [auth]);
  assert.equal(roles.status, 200);
  assert.ok(Array.isArray(roles.body.message.items), 'the gateway\'s roles answer');
  const noToken = await served('/api/roles');
  assert.deepEqual([noToken.status, noToken.body.message.code], [401, 'missing_token']);
  const spelled = await served('/API/../api/./roles', [auth]);
  assert.equal(spelled.status, 200, 'any spelling of an own path is the gateway\'s');
  // Spellings the route table reads as an own path (without case, without parameters) are
  // not the backend's either, though the gateway serves none of them.
  for (const path of ['/HEALTHZ', '/Api/Roles', '/api;x=1/roles', '/healthz;']) assert.equal((await served(path, [auth])).status, 404, path);
  const otherMethod = await served('/api/signin', [auth]);
  assert.deepEqual([otherMethod.status, otherMethod.body.message.code], [405, 'method_not_allowed']);
  // Decided by the same screen as any request: an irregular head or path is its envelope.
  const twoHosts = await served('/api/chat', [auth, ['Host', 'other']]);
  assert.deepEqual([twoHosts.status, twoHosts.body.message.code], [400, 'invalid_request']);
  const climbing = await served('/api/../../chat', [auth]);
  assert.deepEqual([climbing.status, climbing.body.message.code], [400, 'invalid_request']);
  assert.deepEqual({ handshakes: backend.handshakes.length, requests: backend.requests.length }, { handshakes: 0, requests: 0 },
    `the backend got: ${JSON.stringify(backend.handshakes.map((h) => h.url))}`);

  // Everything else under the prefixes is the backend's, as before.
  const ws = await openClient(gw.url, '/api/chat', { token: accessToken });
  t.after(() => ws.terminate());
  assert.equal((await roundTrip(ws, 'still proxied')).data.toString(), 'still proxied');
  assert.deepEqual(backend.handshakes.map((h) => h.url), ['/api/chat']);
});
