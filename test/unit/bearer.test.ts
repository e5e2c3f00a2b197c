/**
 * readBearerToken against the RFC 6750 §2.1 grammar:
 *
 *   credentials = "Bearer" 1*SP b64token
 *   b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
 *
 * with the scheme matched case-insensitively (RFC 9110 §11.1). The requests are plain objects
 * shaped like what Node hands over: `headers` keeps the first Authorization value, `rawHeaders`
 * keeps every one.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import fc from 'fast-check';
import { presentsDpopScheme, readBearerToken } from '../../src/auth/bearer.js';
import { GatewayError } from '../../src/errors/errors.js';

const B64TOKEN_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/';
/** RFC 9110 §5.6.2 tchar: what an auth-scheme is made of. */
const TCHARS = "!#$%&'*+-.^_`|~ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A request whose Authorization header was sent once per value, under the given header names. */
function request(...values: string[]): IncomingMessage;
function request(...values: [string, string][]): IncomingMessage;
function request(...values: (string | [string, string])[]): IncomingMessage {
  const pairs = values.map((v): [string, string] => (typeof v === 'string' ? ['Authorization', v] : v));
  const headers: Record<string, string> = {};
  if (pairs.length > 0) headers.authorization = pairs[0]![1];
  return { headers, rawHeaders: [['Host', 'gateway.test'], ...pairs].flat() } as unknown as IncomingMessage;
}

function assertMalformed(read: () => unknown, label?: string): void {
  assert.throws(read, (err: unknown) => {
    assert.ok(err instanceof GatewayError, label);
    assert.equal(err.status, 400, label);
    assert.equal(err.code, 'invalid_request', label);
    assert.deepEqual(err.challenge, { error: 'invalid_request' }, label);
    return true;
  }, label);
}

const b64token = fc
  .tuple(fc.string({ unit: fc.constantFrom(...B64TOKEN_CHARS), minLength: 1, maxLength: 200 }), fc.nat({ max: 3 }))
  .map(([body, padding]) => body + '='.repeat(padding));

/** "bearer" in any mix of upper and lower case. */
const bearerScheme = fc
  .array(fc.boolean(), { minLength: 6, maxLength: 6 })
  .map((upper) => [...'bearer'].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(''));

const spaces = fc.integer({ min: 1, max: 8 }).map((n) => ' '.repeat(n));

/** Every character no b64token may contain anywhere ("=" is only allowed as trailing padding), in Latin-1. */
const FOREIGN_LATIN1 = Array.from({ length: 0x100 }, (_, c) => String.fromCharCode(c)).filter((c) => !B64TOKEN_CHARS.includes(c) && c !== '=');

/** A foreign character: most often ASCII or Latin-1 (what a header can carry), sometimes any code point. */
const foreignChar = fc.oneof(
  { arbitrary: fc.constantFrom(...FOREIGN_LATIN1), weight: 4 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((c) => !B64TOKEN_CHARS.includes(c) && c !== '='), weight: 1 },
);

/** What may follow another scheme in a field value: visible ASCII, SP, HTAB, obs-text. */
const fieldText = fc.string({
  unit: fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.constant(0x09), fc.integer({ min: 0x80, max: 0xff })).map((c) => String.fromCharCode(c)),
  maxLength: 60,
});

test('readBearerToken', async (t) => {
  await t.test('returns undefined without an Authorization header', () => {
    assert.equal(readBearerToken(request()), undefined);
  });

  await t.test('returns the token of well-formed bearer credentials as it is', () => {
    const jwt = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhY2N0In0.c2lnbmF0dXJl';
    const cases: [string, string][] = [
      ['Bearer abc', 'abc'],
      [`Bearer ${jwt}`, jwt],
      ['Bearer   abc', 'abc'],
      ['bearer abc', 'abc'],
      ['BEARER abc', 'abc'],
      ['Bearer a-b.c_d~e+f/g', 'a-b.c_d~e+f/g'],
      ['Bearer abc=', 'abc='],
      ['Bearer abc==', 'abc=='],
      ['Bearer ...', '...'],
      ['Bearer header.payload.', 'header.payload.'],
    ];
    for (const [header, token] of cases) assert.equal(readBearerToken(request(header)), token, header);
  });

  await t.test('refuses malformed bearer credentials with 400 invalid_request', () => {
    for (const header of [
      'Bearer',
      'Bearer ',
      'Bearer a b',
      'Bearer abc ',
      'Bearer\tabc',
      'Bearer =',
      'Bearer =abc',
      'Bearer a=b',
      'Bearer abc$',
      'Bearer "abc"',
      'Bearer a,b',
      'Bearer a\u00e9b',
      '',
      ' ',
      'Bearer: abc',
    ]) {
      assertMalformed(() => readBearerToken(request(header)), JSON.stringify(header));
    }
  });

  await t.test('refuses every Latin-1 character outside b64token, at the start, middle and end of a token', () => {
    assert.equal(FOREIGN_LATIN1.length, 256 - B64TOKEN_CHARS.length - 1);
    for (const c of FOREIGN_LATIN1) {
      // A leading space is not part of the token: it only lengthens the 1*SP before it.
      for (const token of [...(c === ' ' ? [] : [`${c}abc`]), `ab${c}cd`, `abc${c}`]) assertMalformed(() => readBearerToken(request(`Bearer ${token}`)), JSON.stringify(token));
    }
  });

  await t.test('leaves other schemes to the caller', () => {
    for (const header of ['Basic dXNlcjpwYXNz', 'Basic', 'Digest username="a", realm="b"', 'DPoPx abc', 'Bearerx abc', 'Bearer_ abc', 'Token a b c']) {
      assert.equal(readBearerToken(request(header)), undefined, header);
    }
  });

  await t.test('reads a DPoP token (RFC 9449 §7.1) as a Bearer one, in any case; which scheme it came as is for the authenticator', () => {
    for (const header of ['DPoP abc', 'dpop abc', 'DPOP abc']) {
      assert.equal(readBearerToken(request(header)), 'abc', header);
      assert.equal(presentsDpopScheme(request(header)), true, header);
    }
    assert.equal(presentsDpopScheme(request('Bearer abc')), false);
    assertMalformed(() => readBearerToken(request('DPoP a b')));
  });

  await t.test('refuses a repeated Authorization header, whatever its spelling and values', () => {
    assertMalformed(() => readBearerToken(request('Bearer abc', 'Bearer abc')));
    assertMalformed(() => readBearerToken(request(['Authorization', 'Bearer abc'], ['authorization', 'Bearer abc'])));
    assertMalformed(() => readBearerToken(request(['authorization', 'Basic xxx'], ['AUTHORIZATION', 'Bearer abc'])));
    assertMalformed(() => readBearerToken(request('Bearer abc', 'Basic xxx')));
  });

  await t.test('does not count other headers that merely resemble Authorization', () => {
    const req = request(['Authorization', 'Bearer abc'], ['Proxy-Authorization', 'Bearer other'], ['X-Authorization', 'Bearer x']);
    assert.equal(readBearerToken(req), 'abc');
  });

  await t.test('property: "Bearer" in any case, 1*SP, any b64token returns the token', () => {
    fc.assert(
      fc.property(bearerScheme, spaces, b64token, (scheme, gap, token) => {
        assert.equal(readBearerToken(request(`${scheme}${gap}${token}`)), token);
      }),
    );
  });

  await t.test('property: a bearer token with any character outside b64token is refused with 400', () => {
    fc.assert(
      fc.property(bearerScheme, spaces, fc.string({ unit: fc.constantFrom(...B64TOKEN_CHARS), minLength: 1, maxLength: 40 }), foreignChar, fc.string({ unit: fc.constantFrom(...B64TOKEN_CHARS, '='), maxLength: 40 }), (scheme, gap, before, bad, after) => {
        assertMalformed(() => readBearerToken(request(`${scheme}${gap}${before}${bad}${after}`)));
      }),
    );
  });

  await t.test('property: "=" anywhere but trailing padding is refused with 400', () => {
    fc.assert(
      fc.property(bearerScheme, b64token, fc.integer({ min: 1, max: 3 }), b64token, (scheme, head, padding, tail) => {
        const token = `${head}${'='.repeat(padding)}${tail.replace(/=+$/, '')}`;
        assertMalformed(() => readBearerToken(request(`${scheme} ${token}`)), token);
      }),
    );
  });

  await t.test('property: two valid headers are refused even when identical', () => {
    fc.assert(
      fc.property(b64token, fc.constantFrom('Authorization', 'authorization', 'AUTHORIZATION', 'AuThOrIzAtIoN'), (token, name) => {
        assertMalformed(() => readBearerToken(request(['Authorization', `Bearer ${token}`], [name, `Bearer ${token}`])));
      }),
    );
  });

  await t.test('property: any other scheme returns undefined, whatever follows it', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...TCHARS), minLength: 1, maxLength: 20 }).filter((s) => s.toLowerCase() !== 'bearer'),
        fc.option(fc.tuple(spaces, fieldText), { nil: undefined }),
        (scheme, rest) => {
          const header = rest === undefined ? scheme : `${scheme}${rest[0]}${rest[1]}`;
          assert.equal(readBearerToken(request(header)), undefined, JSON.stringify(header));
        },
      ),
    );
  });
});
