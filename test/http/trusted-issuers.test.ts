/**
 * Tokens of trusted issuers (auth/trusted-issuers.ts, auth/issuer-keys.ts) against a real
 * OpenID provider (oidc-provider on an ephemeral port, JWT access tokens by client
 * credentials): accepted on routes that name the issuer, with the caller's identity at the
 * backend; refused with the 401 envelope everywhere else and for every forgery; a key rotation
 * at the provider picked up while the gateway runs; an issuer that is down, hangs or answers
 * 10 MB costs a bounded 401, never a 500, and holds up no other request. Time moves by the
 * gateway's clock (stale windows, refetch limits), never by sleeps.
 */
import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { test, type TestContext } from 'node:test';
import { base64url, decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';
import { startBackend, echo, type Backend } from '../helpers/backend.js';
import { call, logged, signIn, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { scrape, valueOf } from '../helpers/metrics.js';
import { openClient, roundTrip, startWsBackend, whenClosed } from '../helpers/ws-backend.js';
import { loadConfig } from '../../src/config/load.js';
import { createConfigReloader } from '../../src/config/reload.js';
import { CLIENT_ID, EXTRA_CLAIMS, startProvider, type TestProvider } from '../helpers/oidc-provider.js';

const AUDIENCE = 'https://orders.example';
const ALL_PARTS = ['account', 'key', 'token', 'request', 'scopes', 'roles'];

interface Fixture {
  provider: TestProvider;
  backend: Backend;
  gw: TestGateway;
}

async function setup(t: TestContext, { issuerKeys = {}, accessTokenTtlSeconds = 600, trustedIssuers = [], routes = [] }: {
  issuerKeys?: Record<string, number>; accessTokenTtlSeconds?: number; trustedIssuers?: unknown[]; routes?: unknown[];
} = {}): Promise<Fixture> {
  const provider = await startProvider(t, { audience: AUDIENCE, accessTokenTtlSeconds });
  const backend = await startBackend(t);
  const gw = await startGateway(t, {
    overrides: {
      trustedIssuers: [{ issuer: provider.issuer, audience: AUDIENCE, accountClaim: 'account', rolesClaim: 'roles', tokenType: 'at+jwt' }, ...trustedIssuers],
      issuerKeys: { fetchTimeoutMs: 1000, minRefetchSeconds: 1, cacheSeconds: 60, maxStaleSeconds: 120, ...issuerKeys },
      routes: [
        { prefix: '/orders', targets: [backend.url], issuers: ['self', provider.issuer], identity: ALL_PARTS, assertion: true },
        { prefix: '/partners', targets: [backend.url], issuers: [provider.issuer] },
        { prefix: '/own', targets: [backend.url] },
        // Rules and claim headers read a provider token's roles and claims (the last test).
        {
          prefix: '/audit', targets: [backend.url], issuers: [provider.issuer],
          allow: [{ name: 'auditors-read', methods: ['GET'], roles: ['auditor'] }, { name: 'owners-write', roles: ['owner'] }],
          identityHeaders: { 'X-Partner-Account': 'account' },
        },
        ...routes,
      ],
    },
  });
  return { provider, backend, gw };
}

function assertRefused(res: JsonResponse, what: string): void {
  assert.equal(res.status, 401, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(res.body?.success, false, what);
  assert.equal(res.body?.message?.code, 'invalid_token', what);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer .*error="invalid_token"/, what);
}

async function metric(gw: TestGateway, name: string, labels: Record<string, string>): Promise<number> {
  return valueOf((await scrape(gw.url)).samples, name, labels);
}

test('a provider token is accepted where the route names its issuer, and its identity reaches the backend', async (t) => {
  const { provider, backend, gw } = await setup(t);
  const token = await provider.token({ scope: 'orders:read orders:write' });
  const res = await call(`${gw.url}/orders/1`, { token });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const seen = backend.received.at(-1)!.headers;
  assert.deepEqual(seen['x-account-id'], [EXTRA_CLAIMS.account]);
  assert.deepEqual(seen['x-key-id'], [CLIENT_ID]);
  assert.deepEqual(seen['x-token-id'], [decodeJwt(token).jti]);
  assert.deepEqual(seen['x-scopes'], ['orders:read orders:write']);
  assert.deepEqual(seen['x-roles'], ['reader auditor']);
  assert.equal(seen.authorization, undefined, 'the caller\'s token is not passed on');
  const assertion = decodeJwt(seen['x-gateway-assertion']![0]!);
  assert.equal(assertion.sub, EXTRA_CLAIMS.account);
  assert.equal(assertion.token_iss, provider.issuer);
  assert.deepEqual(assertion.roles, EXTRA_CLAIMS.roles);
  assert.equal(assertion.scope, 'orders:read orders:write');

  // The same token again: the keys are not fetched again.
  assert.equal((await call(`${gw.url}/partners/1`, { token })).status, 200);
  assert.equal(provider.jwksRequests, 1);

  // The gateway's own tokens still pass on the route that also names "self", without roles.
  const own = await signIn(gw);
  assert.equal((await call(`${gw.url}/orders/2`, { token: own.accessToken })).status, 200);
  assert.deepEqual(backend.received.at(-1)!.headers['x-account-id'], ['acct_alice']);
  assert.equal(backend.received.at(-1)!.headers['x-roles'], undefined);

  // A client's own identity headers never pass.
  await call(`${gw.url}/orders/3`, { token, headers: { 'x-roles': 'admin', 'x-scopes': 'orders:admin' } });
  assert.deepEqual(backend.received.at(-1)!.headers['x-roles'], ['reader auditor']);
  assert.deepEqual(backend.received.at(-1)!.headers['x-scopes'], ['orders:read orders:write']);

  assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: provider.issuer, outcome: 'ok' }), 1);
  assert.equal(await metric(gw, 'gateway_issuer_tokens_total', { issuer: provider.issuer, outcome: 'valid' }), 3);
  assert.equal(await metric(gw, 'gateway_token_validations_total', { outcome: 'valid' }), 4);
});

test('refused with the 401 envelope: on a route of the gateway\'s own tokens only, with the wrong audience, an unknown issuer, or our token where only the provider\'s go', async (t) => {
  const { provider, backend, gw } = await setup(t);
  const token = await provider.token();
  assertRefused(await call(`${gw.url}/own/1`, { token }), 'a provider token on a route with the default issuers ["self"]');
  assertRefused(await call(`${gw.url}/orders/1`, { token: await provider.token({ resource: 'https://billing.example' }) }), 'another audience');

  const { privateKey } = await generateKeyPair('ES256');
  const stranger = await new SignJWT({ ...decodeJwt(token), iss: 'https://unknown-issuer.example' })
    .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'k1' }).sign(privateKey);
  assertRefused(await call(`${gw.url}/orders/1`, { token: stranger }), 'an issuer that is not trusted (route with "self")');
  assertRefused(await call(`${gw.url}/partners/1`, { token: stranger }), 'an issuer that is not trusted (route without "self")');

  const own = await signIn(gw);
  assertRefused(await call(`${gw.url}/partners/1`, { token: own.accessToken }), 'the gateway\'s own token where only the provider\'s go');

  assert.equal(backend.received.length, 0, 'no refused call reached the backend');
  assert.equal(await metric(gw, 'gateway_issuer_tokens_total', { issuer: '(unknown)', outcome: 'not_accepted' }), 2);
  assert.equal(await metric(gw, 'gateway_issuer_tokens_total', { issuer: 'self', outcome: 'not_accepted' }), 1);
  assert.equal(await metric(gw, 'gateway_issuer_tokens_total', { issuer: provider.issuer, outcome: 'invalid' }), 1, 'the wrong audience');
  assert.equal(logged(gw, 'trusted issuer token refused').filter((line) => line.outcome === 'not_accepted').length, 3);
  assert.ok(logged(gw, 'trusted issuer token refused').some((line) => line.reason === 'ERR_JWT_CLAIM_VALIDATION_FAILED'), 'the wrong audience is logged with why');
  assert.ok(gw.logs.every((line) => !line.includes(token.split('.')[2]!)), 'no token is logged');
});

/** The provider's current public key, as the PEM a confused verifier would take for an HMAC secret. */
function publicPem(jwk: JWK): string {
  return createPublicKey({ key: jwk as import('node:crypto').JsonWebKey, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString();
}

test('forgeries are refused: HS256 keyed with the public key, alg none, a key or key URL in the header, another key under the provider\'s kid', async (t) => {
  const { provider, backend, gw } = await setup(t);
  const genuine = await provider.token();
  const claims = decodeJwt(genuine);
  const kid = provider.signingKid;
  // The gateway has the provider's keys before the forgeries come.
  assert.equal((await call(`${gw.url}/orders/1`, { token: genuine })).status, 200);
  const before = backend.received.length;

  const jwk = provider.publicKeys[0]!;
  for (const secret of [Buffer.from(publicPem(jwk)), Buffer.from(JSON.stringify(jwk))]) {
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid }).sign(secret);
    assertRefused(await call(`${gw.url}/orders/1`, { token: hs }), 'HS256 with the public key as the secret');
  }
  const none = `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt', kid }))}.${base64url.encode(JSON.stringify(claims))}.`;
  assertRefused(await call(`${gw.url}/orders/1`, { token: none }), 'alg none');

  const attacker = await generateKeyPair('ES256', { extractable: true });
  const attackerJwk = await exportJWK(attacker.publicKey);
  for (const [param, value] of [['jwk', attackerJwk], ['jku', `${provider.issuer}/jwks`], ['x5u', 'https://attacker.example/cert.pem']] as const) {
    const embedded = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid, [param]: value }).sign(attacker.privateKey);
    assertRefused(await call(`${gw.url}/orders/1`, { token: embedded }), `a header with ${param}`);
  }
  assert.equal(logged(gw, 'trusted issuer token refused').filter((line) => line.reason === 'ERR_EMBEDDED_KEY').length, 3);

  const attackerSigned = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid }).sign(attacker.privateKey);
  assertRefused(await call(`${gw.url}/orders/1`, { token: attackerSigned }), 'signed by another key under the provider\'s kid');

  // Not an at+jwt (RFC 9068 §4: tokenType is configured): an ID token's `typ` would be "JWT".
  const [header] = genuine.split('.');
  const retyped = `${base64url.encode(JSON.stringify({ ...decodeProtectedHeader(genuine), typ: 'JWT' }))}${genuine.slice(header!.length)}`;
  assertRefused(await call(`${gw.url}/orders/1`, { token: retyped }), 'typ changed (breaks the signature too)');
  assert.equal(backend.received.length, before, 'no forgery reached the backend');
});

test('a key rotation at the provider: a new kid prompts one fetch (rate-limited) and its tokens are accepted', async (t) => {
  const { provider, gw } = await setup(t, { issuerKeys: { minRefetchSeconds: 5 } });
  const old = await provider.token();
  assert.equal((await call(`${gw.url}/orders/1`, { token: old })).status, 200);
  assert.equal(provider.jwksRequests, 1);

  await provider.rotate();
  const rotated = await provider.token();
  assert.notEqual(decodeProtectedHeader(rotated).kid, decodeProtectedHeader(old).kid);
  // Within minRefetchSeconds of the last fetch an unknown kid prompts none: refused, the provider not asked.
  assertRefused(await call(`${gw.url}/orders/1`, { token: rotated }), 'a new kid within minRefetchSeconds');
  assert.equal(provider.jwksRequests, 1);

  gw.clock.advance(5000);
  assert.equal((await call(`${gw.url}/orders/1`, { token: rotated })).status, 200);
  assert.equal(provider.jwksRequests, 2);
  // The old key is still published: its tokens still pass, from the same set.
  assert.equal((await call(`${gw.url}/orders/1`, { token: old })).status, 200);

  // Made-up kids, many at once: at most one fetch per minRefetchSeconds.
  gw.clock.advance(5000);
  const { privateKey } = await generateKeyPair('ES256');
  const made = await Promise.all(Array.from({ length: 8 }, (_, i) => new SignJWT(decodeJwt(rotated)).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: `made-up-${i}` }).sign(privateKey)));
  const answers = await Promise.all(made.map((token) => call(`${gw.url}/orders/1`, { token })));
  for (const res of answers) assertRefused(res, 'a made-up kid');
  assert.equal(provider.jwksRequests, 3);
  assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: provider.issuer, outcome: 'ok' }), 3);
});

test('a key retired at the provider: once the new set is fetched, tokens of the old key are refused, though verified before', async (t) => {
  const { provider, gw } = await setup(t, { issuerKeys: { minRefetchSeconds: 5 } });
  const old = await provider.token();
  assert.equal((await call(`${gw.url}/orders/1`, { token: old })).status, 200);
  assert.equal((await call(`${gw.url}/orders/1`, { token: old })).status, 200, 'presented again (the verified-token cache)');
  await provider.rotate({ retire: true });
  gw.clock.advance(5000);
  assert.equal((await call(`${gw.url}/orders/1`, { token: await provider.token() })).status, 200, 'the new key, fetched');
  assert.equal(provider.jwksRequests, 2);
  assertRefused(await call(`${gw.url}/orders/1`, { token: old }), 'the retired key\'s token');
  assert.equal(provider.jwksRequests, 2, 'no fetch within minRefetchSeconds');
});

test('the issuer down: its cached keys answer through the stale window, then its tokens are refused', async (t) => {
  const { provider, gw } = await setup(t, { accessTokenTtlSeconds: 3600, issuerKeys: { cacheSeconds: 60, maxStaleSeconds: 120, minRefetchSeconds: 1 } });
  const token = await provider.token();
  assert.equal((await call(`${gw.url}/orders/1`, { token })).status, 200);
  await provider.stop();

  gw.clock.advance(61_000);
  assert.equal((await call(`${gw.url}/orders/1`, { token })).status, 200, 'stale keys answer while a background fetch fails');
  gw.clock.advance(118_000);
  assert.equal((await call(`${gw.url}/orders/1`, { token })).status, 200, 'still within cacheSeconds + maxStaleSeconds');

  gw.clock.advance(2000);
  const res = await call(`${gw.url}/orders/1`, { token });
  assertRefused(res, 'past the stale window');
  assert.ok(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: provider.issuer, outcome: 'unreachable' }) >= 1);
  assert.ok(await metric(gw, 'gateway_issuer_tokens_total', { issuer: provider.issuer, outcome: 'keys_unavailable' }) >= 1);
  assert.ok(logged(gw, 'trusted issuer keys could not be fetched').some((line) => line.outcome === 'unreachable'));
});

test('such a caller is treated like any other: its account\'s quota, the route\'s required scope, the access log', async (t) => {
  const provider = await startProvider(t, { audience: AUDIENCE });
  const backend = await startBackend(t);
  const gw = await startGateway(t, {
    overrides: {
      trustedIssuers: [{ issuer: provider.issuer, audience: AUDIENCE, accountClaim: 'account' }],
      limits: { mode: 'enforce', calls: { perAccount: [{ limit: 2, seconds: 60 }] } },
      routes: [
        { prefix: '/orders', targets: [backend.url], issuers: ['self', provider.issuer] },
        { prefix: '/writes', targets: [backend.url], issuers: [provider.issuer], requiredScope: 'orders:write' },
      ],
    },
  });
  const reader = await provider.token({ scope: 'orders:read' });
  const writer = await provider.token({ scope: 'orders:write' });
  const refused = await call(`${gw.url}/writes/1`, { token: reader });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.message.code, 'insufficient_scope');
  assert.equal((await call(`${gw.url}/writes/1`, { token: writer })).status, 200);

  // Two tokens of one account share its quota of 2 per minute on /orders; another account has its own.
  assert.equal((await call(`${gw.url}/orders/1`, { token: reader })).status, 200);
  assert.equal((await call(`${gw.url}/orders/2`, { token: writer })).status, 200);
  const limited = await call(`${gw.url}/orders/3`, { token: reader });
  assert.equal(limited.status, 429);
  assert.equal(limited.body.message.code, 'rate_limited');
  const own = await signIn(gw);
  assert.equal((await call(`${gw.url}/orders/4`, { token: own.accessToken })).status, 200);
  gw.clock.advance(60_000);
  assert.equal((await call(`${gw.url}/orders/5`, { token: reader })).status, 200, 'a new window');

  const served = logged(gw, 'request').filter((line) => line.route === '/orders' && line.status === 200);
  assert.deepEqual(served.map((line) => line.accountId), [EXTRA_CLAIMS.account, EXTRA_CLAIMS.account, 'acct_alice', EXTRA_CLAIMS.account]);
});

test('a reload may give a route a trusted issuer, and is refused for one that is not trusted, naming the route', async (t) => {
  const provider = await startProvider(t, { audience: AUDIENCE });
  const backend = await startBackend(t);
  const trustedIssuers = [{ issuer: provider.issuer, audience: AUDIENCE, accountClaim: 'account' }];
  const gw = await startGateway(t, { overrides: { trustedIssuers, routes: [{ prefix: '/orders', targets: [backend.url] }] } });
  let routes: unknown[] = [{ prefix: '/orders', targets: [backend.url], issuers: ['self', provider.issuer] }];
  const reloader = createConfigReloader({
    initial: gw.services.config, log: gw.services.log,
    load: () => loadConfig({ env: {}, overrides: { trustedIssuers, routes } }),
    apply: (next) => gw.services.reload(next),
  });
  const token = await provider.token();
  assertRefused(await call(`${gw.url}/orders/1`, { token }), 'before the reload');
  assert.equal(reloader.reload('SIGHUP'), true);
  assert.equal((await call(`${gw.url}/orders/1`, { token })).status, 200);

  routes = [{ name: 'partners', prefix: '/orders', targets: [backend.url], issuers: ['https://not-trusted.example'] }];
  assert.equal(reloader.reload('SIGHUP'), false);
  const failed = logged(gw, 'configuration reload failed: the running configuration stays in force').at(-1)!;
  assert.ok((failed.problems as string[]).some((p) => p.includes('route "partners" accepts issuer "https://not-trusted.example"')), JSON.stringify(failed));
  assert.equal((await call(`${gw.url}/orders/1`, { token })).status, 200, 'the running routes stay');
});

test('a WebSocket opened with a provider token: its identity at the backend, closed when the token expires by the gateway\'s clock', async (t) => {
  const provider = await startProvider(t, { audience: AUDIENCE, accessTokenTtlSeconds: 300 });
  const backend = await startWsBackend(t);
  const gw = await startGateway(t, {
    overrides: {
      trustedIssuers: [{ issuer: provider.issuer, audience: AUDIENCE, accountClaim: 'account' }],
      issuerKeys: { cacheSeconds: 3600 },
      routes: [
        // No idle timeout within the token's life: the provider mints by the real clock, so its
        // expiry may fall after an idle deadline of the same length counted from the gateway's start.
        { prefix: '/ws', targets: [backend.url], websocket: true, issuers: ['self', provider.issuer], webSocketIdleTimeoutMs: 3_600_000 },
        { prefix: '/ws-own', targets: [backend.url], websocket: true },
      ],
    },
  });
  const token = await provider.token();
  await assert.rejects(openClient(gw.url, '/ws-own/echo', { token }), /answered 401/);
  const ws = await openClient(gw.url, '/ws/echo', { token });
  t.after(() => ws.terminate());
  assert.equal((await roundTrip(ws, 'hello')).data.toString(), 'hello');
  assert.deepEqual(backend.handshakes.at(-1)!.headers['x-account-id'], [EXTRA_CLAIMS.account]);
  const closed = whenClosed(ws);
  gw.clock.advance((decodeJwt(token).exp! * 1000) - gw.clock.now() + 1000);
  assert.equal((await closed).code, 4001);
});

const TEN_MB = 10 * 1024 * 1024;

/** A fake issuer's key endpoints: /hang never answers, /big streams 10 MB without a length, /big-declared says 10 MB up front. */
function badKeyEndpoints(req: IncomingMessage, res: ServerResponse): void {
  res.on('error', () => {});
  if (req.url === '/hang') return;
  if (req.url === '/not-json' || req.url === '/only-symmetric' || req.url === '/error') {
    const body = req.url === '/not-json' ? '<html>maintenance</html>' : JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0LXNlY3JldC1zZWNyZXQ', kid: 'fake-1' }] });
    res.writeHead(req.url === '/error' ? 500 : 200, { 'content-type': 'application/json' });
    res.end(body);
    return;
  }
  if (req.url === '/big-declared') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': TEN_MB });
    res.write('{"keys":[');
    return;
  }
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write('{"keys":[');
  let sent = 0;
  const pump = (): void => {
    while (sent < TEN_MB) {
      if (res.destroyed) return;
      sent += chunk.length;
      if (!res.write(chunk)) {
        res.once('drain', pump);
        return;
      }
    }
    res.end(']}');
  };
  pump();
}

async function signedBy(key: Parameters<SignJWT['sign']>[0], iss: string): Promise<string> {
  return new SignJWT({ account: 'acct_fake', scope: 'orders:read' }).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'fake-1' })
    .setIssuer(iss).setAudience(AUDIENCE).setSubject('fake').setIssuedAt().setExpirationTime('10m').sign(key);
}

// The timeout turns an unbounded wait (the bug this test is about) into a failure rather than a hung run.
test('a JWKS endpoint that hangs or answers 10 MB: a bounded 401, a metric, and other requests go on meanwhile', { timeout: 60_000 }, async (t) => {
  let hanging!: () => void;
  const hangSeen = new Promise<void>((resolve) => { hanging = resolve; });
  const fake = await startBackend(t, (req, res, received) => {
    if (req.url === '/hang') hanging();
    badKeyEndpoints(req, res);
    void received;
  }, { readBody: false });
  const issuers = {
    hang: `${fake.url}/hang-issuer`, big: `${fake.url}/big-issuer`, declared: `${fake.url}/declared-issuer`,
    notJson: `${fake.url}/not-json-issuer`, symmetric: `${fake.url}/symmetric-issuer`, error: `${fake.url}/error-issuer`,
  };
  const { provider, gw } = await setup(t, {
    issuerKeys: { fetchTimeoutMs: 4000 },
    trustedIssuers: [
      { issuer: issuers.hang, audience: AUDIENCE, jwksUri: `${fake.url}/hang`, accountClaim: 'account' },
      { issuer: issuers.big, audience: AUDIENCE, jwksUri: `${fake.url}/big`, accountClaim: 'account' },
      { issuer: issuers.declared, audience: AUDIENCE, jwksUri: `${fake.url}/big-declared`, accountClaim: 'account' },
      { issuer: issuers.notJson, audience: AUDIENCE, jwksUri: `${fake.url}/not-json`, accountClaim: 'account' },
      { issuer: issuers.symmetric, audience: AUDIENCE, jwksUri: `${fake.url}/only-symmetric`, accountClaim: 'account' },
      { issuer: issuers.error, audience: AUDIENCE, jwksUri: `${fake.url}/error`, accountClaim: 'account' },
    ],
    routes: [{ prefix: '/slow', targets: ['http://127.0.0.1:9'], issuers: ['self', ...Object.values(issuers)] }],
  });
  const { privateKey } = await generateKeyPair('ES256');

  let settled = 0;
  const slowToken = await signedBy(privateKey, issuers.hang);
  // Two callers at once share the one (hanging) fetch.
  const slow = [call(`${gw.url}/slow/1`, { token: slowToken }), call(`${gw.url}/slow/2`, { token: slowToken })].map((p) => p.finally(() => settled++));
  await hangSeen;
  // While the issuer hangs, the gateway's own and the real provider's callers are answered.
  const own = await signIn(gw);
  assert.equal((await call(`${gw.url}/orders/1`, { token: own.accessToken })).status, 200);
  assert.equal((await call(`${gw.url}/orders/2`, { token: await provider.token() })).status, 200);
  assert.equal(settled, 0, 'the hanging fetch still holds its own callers');
  for (const res of await Promise.all(slow)) assertRefused(res, 'keys behind a hanging endpoint');
  assert.equal(fake.received.filter((r) => r.url === '/hang').length, 1, 'one fetch for both callers');
  assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: issuers.hang, outcome: 'timeout' }), 1);

  assertRefused(await call(`${gw.url}/slow/3`, { token: await signedBy(privateKey, issuers.big) }), '10 MB JWKS without a length');
  assertRefused(await call(`${gw.url}/slow/4`, { token: await signedBy(privateKey, issuers.declared) }), '10 MB JWKS declared up front');
  assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: issuers.big, outcome: 'too_large' }), 1);
  assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: issuers.declared, outcome: 'too_large' }), 1);

  // A JWKS that is no JSON, or holds only a symmetric key (never kept: it would make HS256 verifiable), or a 500.
  assertRefused(await call(`${gw.url}/slow/5`, { token: await signedBy(privateKey, issuers.notJson) }), 'a JWKS that is not JSON');
  const hs = await new SignJWT({ account: 'acct_fake' }).setProtectedHeader({ alg: 'HS256', kid: 'fake-1' }).setIssuer(issuers.symmetric).setAudience(AUDIENCE)
    .setExpirationTime('10m').sign(Buffer.from('c2VjcmV0LXNlY3JldC1zZWNyZXQ', 'base64url'));
  assertRefused(await call(`${gw.url}/slow/6`, { token: hs }), 'HS256 with the secret of a symmetric key in the JWKS');
  assertRefused(await call(`${gw.url}/slow/7`, { token: await signedBy(privateKey, issuers.symmetric) }), 'a JWKS with only a symmetric key');
  assertRefused(await call(`${gw.url}/slow/8`, { token: await signedBy(privateKey, issuers.error) }), 'a JWKS endpoint answering 500');
  assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: issuers.notJson, outcome: 'malformed' }), 1);
  assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: issuers.error, outcome: 'http_error' }), 1);
  assert.ok(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer: issuers.symmetric, outcome: 'malformed' }) >= 1);
  const lines = logged(gw, 'trusted issuer keys could not be fetched');
  assert.deepEqual([...new Set(lines.map((l) => l.outcome))].sort(), ['http_error', 'malformed', 'timeout', 'too_large']);
  assert.equal(lines.filter((l) => l.outcome === 'too_large').length, 2);
  assert.ok(gw.logs.every((line) => !line.includes('"level":50')), 'nothing is logged as an error');
});

test('a discovery document that names another issuer, or a jwks_uri that is not http(s), is not followed', async (t) => {
  let liarUrl = '';
  const liar = await startBackend(t, (req, res) => {
    const body = req.url === '/liar/.well-known/openid-configuration'
      ? { issuer: 'https://someone-else.example', jwks_uri: `${liarUrl}/keys` }
      : { issuer: `${liarUrl}/bare`, jwks_uri: 'file:///etc/passwd' };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  liarUrl = liar.url;
  const issuers = [`${liar.url}/liar`, `${liar.url}/bare`];
  const gw = await startGateway(t, {
    overrides: {
      trustedIssuers: issuers.map((issuer) => ({ issuer, audience: AUDIENCE })),
      routes: [{ prefix: '/orders', targets: ['http://127.0.0.1:9'], issuers }],
    },
  });
  const { privateKey } = await generateKeyPair('ES256');
  for (const issuer of issuers) {
    assertRefused(await call(`${gw.url}/orders/1`, { token: await signedBy(privateKey, issuer) }), issuer);
    assert.equal(await metric(gw, 'gateway_issuer_keys_fetch_total', { issuer, outcome: 'malformed' }), 1);
  }
  assert.deepEqual(liar.received.map((r) => r.url), ['/liar/.well-known/openid-configuration', '/bare/.well-known/openid-configuration'], 'no key URL it named was asked');
});

test('claims in other shapes: a nested roles path (Keycloak), scopes as an array (Okta), audience in another claim (Cognito)', async (t) => {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'fake-1', alg: 'ES256', use: 'sig' }] };
  const keyServer = await startBackend(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(jwks));
  });
  const backend = await startBackend(t, echo);
  const kc = `${keyServer.url}/realms/shop`;
  const okta = `${keyServer.url}/oauth2/default`;
  const cognito = `${keyServer.url}/us-east-1_pool`;
  const gw = await startGateway(t, {
    overrides: {
      trustedIssuers: [
        { issuer: kc, audience: 'orders-api', jwksUri: `${keyServer.url}/certs`, accountClaim: 'azp', rolesClaim: 'realm_access.roles' },
        { issuer: okta, audience: 'api://default', jwksUri: `${keyServer.url}/keys`, accountClaim: 'cid', scopeClaim: 'scp', rolesClaim: 'groups' },
        { issuer: cognito, audience: 'client-abc', jwksUri: `${keyServer.url}/jwks.json`, audienceClaim: 'client_id', rolesClaim: 'cognito:groups', requiredClaims: ['token_use'] },
      ],
      routes: [{ prefix: '/orders', targets: [backend.url], issuers: [kc, okta, cognito], identity: ALL_PARTS }],
    },
  });
  const sign = (iss: string, claims: JWTPayload) => new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: 'fake-1' })
    .setIssuer(iss).setIssuedAt().setExpirationTime('5m').sign(privateKey);
  const seen = async (token: string) => {
    const res = await call(`${gw.url}/orders/1`, { token });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const h = backend.received.at(-1)!.headers;
    return { account: h['x-account-id']?.[0], scopes: h['x-scopes']?.[0], roles: h['x-roles']?.[0] };
  };
  assert.deepEqual(await seen(await sign(kc, { aud: ['orders-api', 'account'], azp: 'shop-backend', sub: 'f1', scope: 'profile orders', realm_access: { roles: ['buyer', 'offline_access'] } })),
    { account: 'shop-backend', scopes: 'profile orders', roles: 'buyer offline_access' });
  assert.deepEqual(await seen(await sign(okta, { aud: 'api://default', cid: '0oa1', sub: '0oa1', scp: ['orders.read', 'orders.write'], groups: ['Everyone'] })),
    { account: '0oa1', scopes: 'orders.read orders.write', roles: 'Everyone' });
  assert.deepEqual(await seen(await sign(cognito, { client_id: 'client-abc', sub: 'u-1', token_use: 'access', scope: 'orders/read', 'cognito:groups': ['admins'] })),
    { account: 'u-1', scopes: 'orders/read', roles: 'admins' });

  const before = backend.received.length;
  assertRefused(await call(`${gw.url}/orders/1`, { token: await sign(cognito, { client_id: 'client-other', sub: 'u-1', token_use: 'access' }) }), 'Cognito: another app client');
  assertRefused(await call(`${gw.url}/orders/1`, { token: await sign(cognito, { client_id: 'client-abc', sub: 'u-1' }) }), 'a required claim missing');
  assertRefused(await call(`${gw.url}/orders/1`, { token: await sign(kc, { aud: 'orders-api', azp: 'bad\nvalue', realm_access: { roles: [] } }) }), 'an account that cannot go into a header');
  assertRefused(await call(`${gw.url}/orders/1`, { token: await sign(okta, { aud: 'api://default', cid: '0oa1', scp: [1, 2] }) }), 'scopes of the wrong type');
  const noExp = await new SignJWT({ aud: 'api://default', cid: '0oa1' }).setProtectedHeader({ alg: 'ES256', kid: 'fake-1' }).setIssuer(okta).setIssuedAt().sign(privateKey);
  assertRefused(await call(`${gw.url}/orders/1`, { token: noExp }), 'no exp');
  const expired = await new SignJWT({ aud: 'api://default', cid: '0oa1' }).setProtectedHeader({ alg: 'ES256', kid: 'fake-1' }).setIssuer(okta)
    .setIssuedAt(Math.floor(gw.clock.now() / 1000) - 600).setExpirationTime(Math.floor(gw.clock.now() / 1000) - 6).sign(privateKey);
  assertRefused(await call(`${gw.url}/orders/1`, { token: expired }), 'expired beyond the skew');
  const notYet = await new SignJWT({ aud: 'api://default', cid: '0oa1' }).setProtectedHeader({ alg: 'ES256', kid: 'fake-1' }).setIssuer(okta)
    .setNotBefore(Math.floor(gw.clock.now() / 1000) + 60).setExpirationTime('10m').sign(privateKey);
  assertRefused(await call(`${gw.url}/orders/1`, { token: notYet }), 'nbf in the future');
  gw.clock.advance(61_000);
  assert.equal((await call(`${gw.url}/orders/1`, { token: notYet })).status, 200, 'valid once the gateway\'s clock passes nbf');
  assert.equal(backend.received.length, before + 1);
});

test('a provider token meets a route\'s rules and claim headers as the gateway\'s own would: its roles and claims are what they read', async (t) => {
  const { provider, backend, gw } = await setup(t);
  const token = await provider.token({ scope: 'orders:read' });
  const read = await call(`${gw.url}/audit/entries`, { token, headers: { 'x-partner-account': 'forged' } });
  assert.equal(read.status, 200, JSON.stringify(read.body));
  assert.deepEqual(backend.received.at(-1)!.headers['x-partner-account'], [EXTRA_CLAIMS.account], 'the claim, not the client\'s copy');
  // Its roles are reader and auditor: a write needs owner, which no rule grants it.
  const before = backend.received.length;
  const write = await call(`${gw.url}/audit/entries`, { token, method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  assert.equal(write.status, 403, JSON.stringify(write.body));
  assert.equal(backend.received.length, before, 'the refused write never reached the backend');
});
