/**
 * One security suite, run against every bearer-protected route (unkey `common-tests.ts`):
 * every way a caller can present no token, a malformed header or a token that must not verify
 * is answered with the RFC 6750 status, envelope code and WWW-Authenticate challenge, and the
 * directory behind the handler is never reached (hono's `handlerExecuted`).
 *
 * The suite runs twice: on the default gateway, whose ephemeral key never leaves the process
 * (forgeries are built from what the JWKS publishes), and on a gateway with two configured
 * keys, where the test holds the non-active private key and can sign tokens the gateway
 * trusts, so each claim check is proved by changing that claim alone.
 */
import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync, randomBytes, sign as signBytes, type KeyObject } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { base64url, decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';
import { ManualClock } from '../helpers/clock.js';
import { call, DEMO, parseRawResponse, rawRequest, signIn, startGateway, type JsonResponse, type TestGateway } from '../helpers/gateway.js';
import { withLowS } from '../helpers/jws.js';

const ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';
const ACCESS_TTL_MS = 900_000;
const SKEW_MS = 5_000;
const MAX_TOKEN_LENGTH = 4096;

interface ProtectedRoute {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  /** The directory call the handler makes once the guard lets the request through. */
  reaches: 'findSignRecord' | 'listRoles';
}

const ROUTES: ProtectedRoute[] = [
  { name: 'GET /api/sign', method: 'GET', path: `/api/sign?address=${ADDRESS}`, reaches: 'findSignRecord' },
  { name: 'POST /api/sign', method: 'POST', path: `/api/sign?address=${ADDRESS}`, reaches: 'findSignRecord' },
  { name: 'GET /api/roles', method: 'GET', path: '/api/roles', reaches: 'listRoles' },
];

type DirectoryCalls = Record<ProtectedRoute['reaches'], number>;

/** A key the gateway trusts whose private half the test holds. */
interface TrustedKey {
  kid: string;
  alg: 'EdDSA' | 'ES256';
  privateKey: KeyObject;
}

interface Fixture {
  gw: TestGateway;
  calls: DirectoryCalls;
  /** kid and public JWK of the key that signs the gateway's own tokens, as the JWKS publishes it. */
  active: { kid: string; jwk: JWK };
  trusted?: TrustedKey;
}

/** Starts at a whole second, so `iat` is exactly the clock and expiry boundaries are exact. */
function wholeSecondClock(): ManualClock {
  return new ManualClock(Math.floor(Date.now() / 1000) * 1000);
}

/** Counts directory calls; the router holds this very object, so the handler's calls show up here. */
function countDirectoryCalls(gw: TestGateway): DirectoryCalls {
  const directory = gw.services.directory;
  const calls: DirectoryCalls = { findSignRecord: 0, listRoles: 0 };
  const findSignRecord = directory.findSignRecord.bind(directory);
  const listRoles = directory.listRoles.bind(directory);
  directory.findSignRecord = async (...args) => {
    calls.findSignRecord++;
    return findSignRecord(...args);
  };
  directory.listRoles = async (...args) => {
    calls.listRoles++;
    return listRoles(...args);
  };
  return calls;
}

async function makeFixture(gw: TestGateway, trusted?: TrustedKey): Promise<Fixture> {
  const calls = countDirectoryCalls(gw);
  const { accessToken } = await signIn(gw);
  const kid = decodeProtectedHeader(accessToken).kid!;
  const jwks = await call(`${gw.url}/.well-known/jwks.json`);
  const jwk = (jwks.body.keys as JWK[]).find((k) => k.kid === kid);
  assert.ok(jwk, 'the JWKS publishes the key that signs sign-in tokens');
  return { gw, calls, active: { kid, jwk }, ...(trusted === undefined ? {} : { trusted }) };
}

/** Sends one request to the route; `reached` is how many directory calls it caused. */
async function send(fx: Fixture, route: ProtectedRoute, headers: Record<string, string> = {}): Promise<JsonResponse & { reached: number }> {
  const before = fx.calls[route.reaches];
  const res = await call(`${fx.gw.url}${route.path}`, { method: route.method, headers });
  return { ...res, reached: fx.calls[route.reaches] - before };
}

function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

type Refusal = { status: 401; code: 'missing_token' } | { status: 401; code: 'invalid_token' } | { status: 400; code: 'invalid_request' };

/** RFC 6750 §3: realm alone without credentials; else realm, error and an optional description. */
function challengePattern(refusal: Refusal): RegExp {
  if (refusal.code === 'missing_token') return /^Bearer realm="gateway"$/;
  return new RegExp(`^Bearer realm="gateway", error="${refusal.code}"(?:, error_description="[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]*")?$`);
}

function assertRefused(res: { status: number; body: any; challenge: string | null; reached: number }, refusal: Refusal, label = ''): void {
  assert.equal(res.status, refusal.status, label);
  assert.equal(res.body?.success, false, label);
  assert.equal(res.body.message.code, refusal.code, label);
  assert.equal(typeof res.body.message.description, 'string', label);
  assert.match(res.challenge ?? '(no WWW-Authenticate)', challengePattern(refusal), label);
  assert.equal(res.reached, 0, `${label}: the handler reached the directory`);
}

async function expectRefused(fx: Fixture, route: ProtectedRoute, headers: Record<string, string>, refusal: Refusal, label = JSON.stringify(headers)): Promise<void> {
  const res = await send(fx, route, headers);
  assertRefused({ ...res, challenge: res.headers.get('www-authenticate') }, refusal, label);
  assert.equal(res.headers.get('cache-control'), 'no-store', label);
}

async function expectAccepted(fx: Fixture, route: ProtectedRoute, headers: Record<string, string>, label = JSON.stringify(headers)): Promise<void> {
  const res = await send(fx, route, headers);
  assert.equal(res.status, 200, `${label}: ${JSON.stringify(res.body)}`);
  assert.equal(res.body.success, true, label);
  assert.equal(res.headers.get('www-authenticate'), null, label);
  assert.equal(res.reached, 1, `${label}: the handler did not reach the directory`);
}

const INVALID_TOKEN: Refusal = { status: 401, code: 'invalid_token' };
const INVALID_REQUEST: Refusal = { status: 400, code: 'invalid_request' };
const MISSING_TOKEN: Refusal = { status: 401, code: 'missing_token' };

/** Claims shaped like the gateway's own, at the gateway's clock; `undefined` removes a claim. */
function accessClaims(gw: TestGateway, changes: Record<string, unknown> = {}): JWTPayload {
  const iat = Math.floor(gw.clock.now() / 1000);
  const claims: Record<string, unknown> = {
    client_id: DEMO.alice.keyId,
    iss: 'auth-gateway',
    aud: 'auth-gateway',
    sub: DEMO.alice.accountId,
    jti: randomBytes(16).toString('base64url'),
    iat,
    exp: iat + ACCESS_TTL_MS / 1000,
    ...changes,
  };
  // The gateway's millisecond issue time follows `iat` unless a case sets it.
  if (!('iat_ms' in changes) && typeof claims.iat === 'number') claims.iat_ms = claims.iat * 1000 + 123;
  for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name];
  return claims;
}

function sign(claims: JWTPayload, header: { alg: string; kid?: string; typ?: string; [name: string]: unknown }, key: Parameters<SignJWT['sign']>[0]): Promise<string> {
  return new SignJWT(claims).setProtectedHeader(header).sign(key);
}

/** Signed as the gateway signs: ECDSA signatures in their low-S form (src/auth/signer.ts). */
async function signTrusted(trusted: TrustedKey, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  const token = await sign(claims, { alg: trusted.alg, kid: trusted.kid, typ: 'at+jwt', ...header }, trusted.privateKey);
  return trusted.alg === 'EdDSA' ? token : withLowS(token, trusted.alg);
}

/** Compact JWS assembled without jose, for headers jose refuses to produce. */
function signByHand(trusted: TrustedKey, header: Record<string, unknown>, claims: JWTPayload): string {
  const input = `${base64url.encode(JSON.stringify(header))}.${base64url.encode(JSON.stringify(claims))}`;
  const signature = trusted.alg === 'EdDSA'
    ? signBytes(null, Buffer.from(input), trusted.privateKey)
    : signBytes('sha256', Buffer.from(input), { key: trusted.privateKey, dsaEncoding: 'ieee-p1363' });
  const token = `${input}.${base64url.encode(signature)}`;
  return trusted.alg === 'EdDSA' ? token : withLowS(token, trusted.alg);
}

/** A validly signed trusted token of exactly `length` characters, padded through a claim and a header member. */
async function signTrustedOfLength(fx: Fixture & { trusted: TrustedKey }, length: number): Promise<string> {
  // base64url is never 4k+1 characters long, so the header padding moves the total onto every length.
  for (let headerPad = 0; headerPad < 4; headerPad++) {
    const header = headerPad === 0 ? {} : { pad: 'x'.repeat(headerPad) };
    const shortest = (await signTrusted(fx.trusted, accessClaims(fx.gw, { pad: '' }), header)).length;
    const estimate = Math.floor(((length - shortest) * 3) / 4);
    for (let n = Math.max(0, estimate - 4); n <= estimate + 4; n++) {
      const token = await signTrusted(fx.trusted, accessClaims(fx.gw, { pad: 'p'.repeat(n) }), header);
      if (token.length === length) return token;
    }
  }
  throw new Error(`could not build a token of ${length} characters`);
}

function unsecured(claims: JWTPayload, header: Record<string, unknown>): string {
  const encode = (value: object) => base64url.encode(JSON.stringify(value));
  return `${encode({ alg: 'none', ...header })}.${encode(claims)}.`;
}

/** The byte strings a confused verifier might take as the HMAC secret: the public key in every common form. */
function publicKeyAsSecrets(jwk: JWK): [string, Uint8Array][] {
  const key = createPublicKey({ key: jwk as import('node:crypto').JsonWebKey, format: 'jwk' });
  const encoder = new TextEncoder();
  const secrets: [string, Uint8Array][] = [
    ['SPKI PEM text', encoder.encode(key.export({ type: 'spki', format: 'pem' }) as string)],
    ['SPKI DER', new Uint8Array(key.export({ type: 'spki', format: 'der' }))],
    ['JWK JSON text', encoder.encode(JSON.stringify(jwk))],
  ];
  if (jwk.x !== undefined) secrets.push(['raw x', base64url.decode(jwk.x)]);
  return secrets;
}

/** Replaces one character in the middle of a segment, so the change is never confined to unused base64 bits. */
function flipMiddle(segment: string): string {
  const i = Math.floor(segment.length / 2);
  return segment.slice(0, i) + (segment[i] === 'A' ? 'B' : 'A') + segment.slice(i + 1);
}

function rawHeaderValue(head: string, name: string): string | null {
  return new RegExp(`\\r\\n${name}: *([^\\r]*)`, 'i').exec(head)?.[1] ?? null;
}

/** The shared suite: every case for one route. */
async function protectedRouteSuite(t: TestContext, route: ProtectedRoute, fx: Fixture): Promise<void> {
  const { gw } = fx;

  await t.test('a signed-in access token reaches the handler', async () => {
    const { accessToken } = await signIn(gw);
    await expectAccepted(fx, route, bearer(accessToken));
  });

  await t.test('no Authorization header: 401 missing_token, realm alone', async () => {
    await expectRefused(fx, route, {}, MISSING_TOKEN);
  });

  await t.test('another scheme: 401 missing_token, realm alone', async () => {
    const { accessToken } = await signIn(gw);
    await expectRefused(fx, route, { authorization: 'Basic xxx' }, MISSING_TOKEN);
    await expectRefused(fx, route, { authorization: `Basic ${Buffer.from('ak:sk').toString('base64')}` }, MISSING_TOKEN);
    // A valid token under another scheme is still no bearer credential.
    await expectRefused(fx, route, { authorization: `Token ${accessToken}` }, MISSING_TOKEN);
    await expectRefused(fx, route, { authorization: `Bearer_ ${accessToken}` }, MISSING_TOKEN);
  });

  await t.test('Bearer without a token: 400 invalid_request', async () => {
    await expectRefused(fx, route, { authorization: 'Bearer' }, INVALID_REQUEST);
    await expectRefused(fx, route, { authorization: 'Bearer   ' }, INVALID_REQUEST);
  });

  await t.test('Bearer with two tokens: 400 invalid_request', async () => {
    const { accessToken } = await signIn(gw);
    await expectRefused(fx, route, { authorization: 'Bearer a b' }, INVALID_REQUEST);
    await expectRefused(fx, route, { authorization: `Bearer ${accessToken} ${accessToken}` }, INVALID_REQUEST);
  });

  await t.test('a token with characters outside b64token: 400 invalid_request', async () => {
    const { accessToken } = await signIn(gw);
    const bad = ['abc$def', 'ab"c', 'a,b', 'a;b', '(abc)', 'a\tb', 'abc=def', '=abc', '==', `${accessToken}!`, `"${accessToken}"`, `${accessToken},`];
    for (const token of bad) await expectRefused(fx, route, bearer(token), INVALID_REQUEST, token);
    await expectRefused(fx, route, { authorization: `Bearer\t${accessToken}` }, INVALID_REQUEST, 'tab after the scheme');
  });

  await t.test('the Authorization header sent twice: 400 invalid_request, even with the same valid token', async () => {
    const { accessToken } = await signIn(gw);
    const { host } = new URL(gw.url);
    const request = (authorizations: string[]) => [
      `${route.method} ${route.path} HTTP/1.1`,
      `Host: ${host}`,
      ...authorizations,
      ...(route.method === 'POST' ? ['Content-Length: 0'] : []),
      'Connection: close',
      '',
      '',
    ].join('\r\n');
    const exchange = async (authorizations: string[]) => {
      const before = fx.calls[route.reaches];
      const res = parseRawResponse(await rawRequest(gw.url, request(authorizations)));
      return { ...res, challenge: rawHeaderValue(res.headers, 'www-authenticate'), reached: fx.calls[route.reaches] - before };
    };

    const once = await exchange([`Authorization: Bearer ${accessToken}`]);
    assert.equal(once.status, 200, 'control: the same request with one header is accepted');
    assert.equal(once.reached, 1);

    for (const authorizations of [
      [`Authorization: Bearer ${accessToken}`, `Authorization: Bearer ${accessToken}`],
      [`Authorization: Bearer ${accessToken}`, `authorization: Bearer ${accessToken}`],
      [`Authorization: Bearer ${accessToken}`, 'Authorization: Basic xxx'],
      ['Authorization: Basic xxx', `AUTHORIZATION: Bearer ${accessToken}`],
    ]) {
      assertRefused(await exchange(authorizations), INVALID_REQUEST, authorizations.join(' + '));
    }
  });

  await t.test('the scheme name is case-insensitive and may be followed by several spaces', async () => {
    const { accessToken } = await signIn(gw);
    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
      await expectAccepted(fx, route, { authorization: `${scheme} ${accessToken}` }, scheme);
    }
    await expectAccepted(fx, route, { authorization: `Bearer   ${accessToken}` }, 'three spaces');
  });

  await t.test('an expired token: accepted until the skew runs out, then 401 invalid_token', async () => {
    const { accessToken } = await signIn(gw);
    let moved = 0;
    const move = (ms: number) => {
      gw.clock.advance(ms);
      moved += ms;
    };
    try {
      move(ACCESS_TTL_MS + SKEW_MS - 1);
      await expectAccepted(fx, route, bearer(accessToken), 'expired, but within the skew');
      move(1);
      await expectRefused(fx, route, bearer(accessToken), INVALID_TOKEN, 'expired past the skew');
      move(86_400_000);
      await expectRefused(fx, route, bearer(accessToken), INVALID_TOKEN, 'expired a day ago');
    } finally {
      gw.clock.advance(-moved);
    }
  });

  await t.test('a token the gateway issued while its clock ran ahead: accepted within the skew, else 401 invalid_token', async () => {
    const issueAhead = async (ms: number) => {
      gw.clock.advance(ms);
      try {
        return (await signIn(gw)).accessToken;
      } finally {
        gw.clock.advance(-ms);
      }
    };
    await expectAccepted(fx, route, bearer(await issueAhead(SKEW_MS)), 'iat at the skew');
    await expectRefused(fx, route, bearer(await issueAhead(SKEW_MS + 1000)), INVALID_TOKEN, 'iat a second past the skew');
    await expectRefused(fx, route, bearer(await issueAhead(3_600_000)), INVALID_TOKEN, 'iat an hour ahead');
  });

  await t.test('a tampered token: 401 invalid_token', async () => {
    const alice = await signIn(gw);
    const bob = await signIn(gw, DEMO.bob);
    const [header, payload, signature] = alice.accessToken.split('.') as [string, string, string];
    const asBob = base64url.encode(JSON.stringify({ ...decodeJwt(alice.accessToken), sub: DEMO.bob.accountId, client_id: DEMO.bob.keyId }));
    const longer = base64url.encode(JSON.stringify({ ...decodeJwt(alice.accessToken), exp: decodeJwt(alice.accessToken).exp! + 86_400 }));
    const cases: [string, string][] = [
      ['sub changed to another account', `${header}.${asBob}.${signature}`],
      ['exp pushed back a day', `${header}.${longer}.${signature}`],
      ['signature of another token', `${header}.${payload}.${bob.accessToken.split('.')[2]}`],
      ['one signature character changed', `${header}.${payload}.${flipMiddle(signature)}`],
      ['signature removed', `${header}.${payload}.`],
      ['header changed', `${base64url.encode(JSON.stringify({ ...decodeProtectedHeader(alice.accessToken), kid: 'other' }))}.${payload}.${signature}`],
    ];
    for (const [label, token] of cases) await expectRefused(fx, route, bearer(token), INVALID_TOKEN, label);
  });

  await t.test('a token signed by a key the gateway does not hold: 401 invalid_token', async () => {
    // A stranger's key of the same algorithm as the gateway's active key, and an EdDSA one.
    const claims = accessClaims(gw);
    for (const alg of new Set([fx.active.jwk.alg!, 'EdDSA'])) {
      const { privateKey } = await generateKeyPair(alg);
      await expectRefused(fx, route, bearer(await sign(claims, { alg, kid: fx.active.kid, typ: 'at+jwt' }, privateKey)), INVALID_TOKEN, `${alg}, same kid`);
      await expectRefused(fx, route, bearer(await sign(claims, { alg, kid: 'unknown-kid', typ: 'at+jwt' }, privateKey)), INVALID_TOKEN, `${alg}, unknown kid`);
      await expectRefused(fx, route, bearer(await sign(claims, { alg, typ: 'at+jwt' }, privateKey)), INVALID_TOKEN, `${alg}, no kid`);
    }
  });

  await t.test('an unsecured token (alg: none): 401 invalid_token', async () => {
    const claims = accessClaims(gw);
    for (const alg of ['none', 'None', 'NONE']) {
      await expectRefused(fx, route, bearer(unsecured(claims, { alg, kid: fx.active.kid, typ: 'at+jwt' })), INVALID_TOKEN, alg);
    }
    // The gateway's own signature moved under an alg: none header is not accepted either.
    const { accessToken } = await signIn(gw);
    const [, payload, signature] = accessToken.split('.');
    const header = base64url.encode(JSON.stringify({ alg: 'none', kid: fx.active.kid, typ: 'at+jwt' }));
    await expectRefused(fx, route, bearer(`${header}.${payload}.${signature}`), INVALID_TOKEN, 'none with a signature');
  });

  await t.test('HS256 signed with the public key as the HMAC secret (alg confusion): 401 invalid_token', async () => {
    const claims = accessClaims(gw);
    for (const [label, secret] of publicKeyAsSecrets(fx.active.jwk)) {
      for (const alg of ['HS256', 'HS512']) {
        const token = await sign(claims, { alg, kid: fx.active.kid, typ: 'at+jwt' }, secret);
        await expectRefused(fx, route, bearer(token), INVALID_TOKEN, `${alg} with ${label}`);
      }
    }
  });

  await t.test('a refresh token presented as the access token: 401 invalid_token', async () => {
    const { refreshToken } = await signIn(gw);
    await expectRefused(fx, route, bearer(refreshToken), INVALID_TOKEN);
  });

  await t.test('a token longer than 4096 characters: 401 invalid_token', async () => {
    await expectRefused(fx, route, bearer('a'.repeat(MAX_TOKEN_LENGTH + 1)), INVALID_TOKEN, '4097 characters');
    await expectRefused(fx, route, bearer('a'.repeat(10_000)), INVALID_TOKEN, '10000 characters');
  });

  await t.test('a token in the query or a form body is not a credential: 401 missing_token', async () => {
    // The gateway supports only the header method (RFC 6750 §2.1): tokens in URLs end up in logs.
    const { accessToken } = await signIn(gw);
    const separator = route.path.includes('?') ? '&' : '?';
    const inQuery = { ...route, path: `${route.path}${separator}access_token=${accessToken}` };
    await expectRefused(fx, inQuery, {}, MISSING_TOKEN, 'access_token query parameter');
    if (route.method === 'POST') {
      const before = fx.calls[route.reaches];
      const res = await call(`${gw.url}${route.path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `access_token=${accessToken}`,
      });
      assertRefused({ ...res, challenge: res.headers.get('www-authenticate'), reached: fx.calls[route.reaches] - before }, MISSING_TOKEN, 'access_token form field');
    }
  });

  await t.test('not a JWT at all: 401 invalid_token', async () => {
    for (const token of ['abc', 'a.b.c', 'a.b', 'a.b.c.d.e', '...', base64url.encode('{}')]) {
      await expectRefused(fx, route, bearer(token), INVALID_TOKEN, token);
    }
  });

  const { trusted } = fx;
  if (trusted === undefined) return;
  // From here the test signs with a key the gateway trusts: each refusal is due to the one
  // claim or header member that differs from the accepted control.
  const trustedFx = fx as Fixture & { trusted: TrustedKey };

  await t.test('control: a token signed by the test with a trusted key is accepted', async () => {
    await expectAccepted(fx, route, bearer(await signTrusted(trusted, accessClaims(gw))));
    await expectAccepted(fx, route, bearer(await signTrusted(trusted, accessClaims(gw), { typ: 'application/at+jwt' })), 'typ application/at+jwt (RFC 9068 §2.1)');
  });

  await t.test('wrong iss, aud or typ: 401 invalid_token', async () => {
    const cases: [string, Promise<string>][] = [
      ['wrong iss', signTrusted(trusted, accessClaims(gw, { iss: 'someone-else' }))],
      ['no iss', signTrusted(trusted, accessClaims(gw, { iss: undefined }))],
      ['wrong aud', signTrusted(trusted, accessClaims(gw, { aud: 'another-api' }))],
      ['aud list without ours', signTrusted(trusted, accessClaims(gw, { aud: ['another-api', 'a-third'] }))],
      ['no aud', signTrusted(trusted, accessClaims(gw, { aud: undefined }))],
      ['typ JWT', signTrusted(trusted, accessClaims(gw), { typ: 'JWT' })],
      ['typ application/jwt', signTrusted(trusted, accessClaims(gw), { typ: 'application/jwt' })],
      ['no typ', signTrusted(trusted, accessClaims(gw), { typ: undefined })],
    ];
    for (const [label, token] of cases) await expectRefused(fx, route, bearer(await token), INVALID_TOKEN, label);
  });

  await t.test('a critical header extension the gateway does not understand: 401 invalid_token', async () => {
    // RFC 7515 §4.1.11. jose will not sign such a header, so the JWS is assembled by hand;
    // the same assembly without `crit` is the control.
    const header = { alg: trusted.alg, kid: trusted.kid, typ: 'at+jwt' };
    await expectAccepted(fx, route, bearer(signByHand(trusted, header, accessClaims(gw))), 'hand-signed control');
    const critical = { ...header, crit: ['urn:example:unknown'], 'urn:example:unknown': true };
    await expectRefused(fx, route, bearer(signByHand(trusted, critical, accessClaims(gw))), INVALID_TOKEN, 'unknown crit');
  });

  await t.test('missing or mistyped required claims: 401 invalid_token', async () => {
    const cases: [string, Record<string, unknown>][] = [
      ['no client_id', { client_id: undefined }],
      ['no jti', { jti: undefined }],
      ['no sub', { sub: undefined }],
      ['no iat', { iat: undefined }],
      ['no exp', { exp: undefined }],
      ['numeric client_id', { client_id: 1 }],
      ['numeric jti', { jti: 1 }],
      ['numeric sub', { sub: 1 }],
      ['string exp', { exp: String(Math.floor(gw.clock.now() / 1000) + 900) }],
      ['string iat', { iat: String(Math.floor(gw.clock.now() / 1000)) }],
      ['no iat_ms', { iat_ms: undefined }],
      ['string iat_ms', { iat_ms: String(gw.clock.now()) }],
      ['fractional iat_ms', { iat_ms: Math.floor(gw.clock.now() / 1000) * 1000 + 0.5 }],
      ['iat_ms a second before iat', { iat_ms: Math.floor(gw.clock.now() / 1000) * 1000 - 1 }],
      ['iat_ms a second after iat', { iat_ms: Math.floor(gw.clock.now() / 1000) * 1000 + 1000 }],
      ['numeric sid', { sid: 7 }],
    ];
    for (const [label, changes] of cases) {
      await expectRefused(fx, route, bearer(await signTrusted(trusted, accessClaims(gw, changes))), INVALID_TOKEN, label);
    }
  });

  await t.test('nbf or iat ahead of the clock beyond the skew: 401 invalid_token; within it: accepted', async () => {
    const now = Math.floor(gw.clock.now() / 1000);
    const skew = SKEW_MS / 1000;
    const ttl = ACCESS_TTL_MS / 1000;
    await expectAccepted(fx, route, bearer(await signTrusted(trusted, accessClaims(gw, { nbf: now + skew }))), 'nbf at the skew');
    await expectRefused(fx, route, bearer(await signTrusted(trusted, accessClaims(gw, { nbf: now + skew + 1 }))), INVALID_TOKEN, 'nbf past the skew');
    await expectAccepted(fx, route, bearer(await signTrusted(trusted, accessClaims(gw, { iat: now + skew, exp: now + skew + ttl }))), 'iat at the skew');
    await expectRefused(fx, route, bearer(await signTrusted(trusted, accessClaims(gw, { iat: now + skew + 1, exp: now + skew + 1 + ttl }))), INVALID_TOKEN, 'iat past the skew');
    await expectRefused(fx, route, bearer(await signTrusted(trusted, accessClaims(gw, { iat: now + 3600, exp: now + 3600 + ttl }))), INVALID_TOKEN, 'iat an hour ahead');
  });

  await t.test('a token with a longer exp than ours is refused once older than the access-token lifetime', async () => {
    const now = Math.floor(gw.clock.now() / 1000);
    const oldest = ACCESS_TTL_MS / 1000 + SKEW_MS / 1000;
    await expectAccepted(fx, route, bearer(await signTrusted(trusted, accessClaims(gw, { iat: now - oldest, exp: now + 86_400 }))), 'as old as the lifetime plus skew');
    const older = bearer(await signTrusted(trusted, accessClaims(gw, { iat: now - oldest - 1, exp: now + 86_400 })));
    await expectRefused(fx, route, older, INVALID_TOKEN, 'a second older');
    assert.equal((await send(fx, route, older)).body.message.description, 'The access token has expired.', 'refused for its age');
  });

  await t.test('a validly signed token is accepted up to 4096 characters and refused past it', async () => {
    const longest = await signTrustedOfLength(trustedFx, MAX_TOKEN_LENGTH);
    assert.equal(longest.length, MAX_TOKEN_LENGTH);
    await expectAccepted(fx, route, bearer(longest), '4096 characters');
    const tooLong = await signTrustedOfLength(trustedFx, MAX_TOKEN_LENGTH + 1);
    await expectRefused(fx, route, bearer(tooLong), INVALID_TOKEN, '4097 characters');
  });
}

test('bearer-protected routes, default gateway (ephemeral key)', async (t) => {
  const gw = await startGateway(t, { clock: wholeSecondClock() });
  const fx = await makeFixture(gw);
  for (const route of ROUTES) await t.test(route.name, (t) => protectedRouteSuite(t, route, fx));

  await t.test('the JWKS publishes the public signing key only', async () => {
    const res = await call(`${gw.url}/.well-known/jwks.json`);
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    assert.equal(res.body.keys.length, 1);
    const [key] = res.body.keys;
    assert.equal(key.kty, 'OKP');
    assert.equal(key.crv, 'Ed25519');
    assert.equal(key.alg, 'EdDSA');
    assert.equal(key.use, 'sig');
    assert.equal(key.kid, fx.active.kid);
    assert.equal(typeof key.x, 'string');
    assert.ok(!('d' in key), 'no private member');
    assert.deepEqual(res.body.message.keys, res.body.keys);
  });
});

test('bearer-protected routes, two configured keys', async (t) => {
  const ed = generateKeyPairSync('ed25519');
  const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const pkcs8 = (key: KeyObject) => key.export({ type: 'pkcs8', format: 'pem' }) as string;
  const gw = await startGateway(t, {
    clock: wholeSecondClock(),
    overrides: {
      signing: {
        keys: [
          { kid: 'ed-2025', alg: 'EdDSA', pem: pkcs8(ed.privateKey) },
          { kid: 'ec-2026', alg: 'ES256', pem: pkcs8(ec.privateKey) },
        ],
        activeKid: 'ec-2026',
      },
    },
  });
  // A memory gateway refuses access tokens issued before it started (its resets would have
  // been lost with an earlier process: src/state/revocation/memory.ts). The suite signs tokens
  // as old as a token lifetime plus the skew, and one a second older that only its age must
  // refuse: so the gateway has run a minute longer than that.
  gw.clock.advance(ACCESS_TTL_MS + SKEW_MS + 60_000);
  const edKey: TrustedKey = { kid: 'ed-2025', alg: 'EdDSA', privateKey: ed.privateKey };
  const ecKey: TrustedKey = { kid: 'ec-2026', alg: 'ES256', privateKey: ec.privateKey };
  // The non-active key: it no longer signs, but its tokens must verify until they expire.
  const fx = await makeFixture(gw, edKey);

  await t.test('new sign-ins are signed by the active key', async () => {
    const { accessToken } = await signIn(gw);
    const header = decodeProtectedHeader(accessToken);
    assert.equal(header.kid, 'ec-2026');
    assert.equal(header.alg, 'ES256');
    assert.equal(header.typ, 'at+jwt');
    assert.equal(fx.active.kid, 'ec-2026');
  });

  await t.test('the JWKS lists both public keys and no private member', async () => {
    const res = await call(`${gw.url}/.well-known/jwks.json`);
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    const byKid = new Map((res.body.keys as JWK[]).map((k) => [k.kid, k]));
    assert.deepEqual([...byKid.keys()].sort(), ['ec-2026', 'ed-2025']);
    assert.deepEqual(
      { kty: byKid.get('ed-2025')!.kty, crv: byKid.get('ed-2025')!.crv, alg: byKid.get('ed-2025')!.alg, use: byKid.get('ed-2025')!.use },
      { kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' },
    );
    assert.deepEqual(
      { kty: byKid.get('ec-2026')!.kty, crv: byKid.get('ec-2026')!.crv, alg: byKid.get('ec-2026')!.alg, use: byKid.get('ec-2026')!.use },
      { kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' },
    );
    for (const key of byKid.values()) assert.ok(!('d' in key), `${key.kid} has no private member`);
  });

  await t.test('tokens of both configured keys verify; a kid paired with the other key does not', async () => {
    for (const route of ROUTES) {
      await expectAccepted(fx, route, bearer(await signTrusted(edKey, accessClaims(gw))), `${route.name}: non-active EdDSA key`);
      await expectAccepted(fx, route, bearer(await signTrusted(ecKey, accessClaims(gw))), `${route.name}: active ES256 key`);
      const edUnderEcKid = await sign(accessClaims(gw), { alg: 'EdDSA', kid: 'ec-2026', typ: 'at+jwt' }, ed.privateKey);
      await expectRefused(fx, route, bearer(edUnderEcKid), INVALID_TOKEN, `${route.name}: EdDSA token under the ES256 kid`);
      const ecUnderEdKid = await sign(accessClaims(gw), { alg: 'ES256', kid: 'ed-2025', typ: 'at+jwt' }, ec.privateKey);
      await expectRefused(fx, route, bearer(ecUnderEdKid), INVALID_TOKEN, `${route.name}: ES256 token under the EdDSA kid`);
    }
  });

  for (const route of ROUTES) await t.test(route.name, (t) => protectedRouteSuite(t, route, fx));
});
