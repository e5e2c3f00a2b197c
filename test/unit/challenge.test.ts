/**
 * formatBearerChallenge against RFC 6750 §3 and, for arbitrary inputs, against a small
 * RFC 9110 §11.3 challenge parser written here: whatever the realm or description holds, the
 * header parses back, the realm survives (minus control characters), and no CR or LF gets out.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatBearerChallenge, formatDpopChallenge } from '../../src/errors/challenge.js';

test('formatBearerChallenge follows the RFC 6750 examples', async (t) => {
  await t.test('a missing token gets the realm alone (§3.1)', () => {
    assert.equal(formatBearerChallenge({ realm: 'example' }), 'Bearer realm="example"');
  });

  await t.test('a description without an error attribute is not written', () => {
    assert.equal(formatBearerChallenge({ realm: 'example', description: 'no token', scope: 'read' }), 'Bearer realm="example"');
  });

  await t.test('realm and error', () => {
    assert.equal(formatBearerChallenge({ realm: 'example', error: 'invalid_token' }), 'Bearer realm="example", error="invalid_token"');
  });

  await t.test('realm, error and error_description', () => {
    assert.equal(
      formatBearerChallenge({ realm: 'example', error: 'invalid_token', description: 'The access token expired' }),
      'Bearer realm="example", error="invalid_token", error_description="The access token expired"',
    );
  });

  await t.test('realm, error, error_description and scope', () => {
    assert.equal(
      formatBearerChallenge({ realm: 'example', error: 'insufficient_scope', description: 'The request requires higher privileges', scope: 'read write' }),
      'Bearer realm="example", error="insufficient_scope", error_description="The request requires higher privileges", scope="read write"',
    );
  });

  await t.test('escapes quotes and backslashes in the realm', () => {
    assert.equal(formatBearerChallenge({ realm: 'a "b" \\c' }), 'Bearer realm="a \\"b\\" \\\\c"');
  });

  await t.test('drops from error_description what RFC 6750 forbids there', () => {
    assert.equal(
      formatBearerChallenge({ realm: 'r', error: 'invalid_request', description: 'say "hi"\\\r\nthere\u00e9' }),
      'Bearer realm="r", error="invalid_request", error_description="say hithere"',
    );
  });
});

// ---- a small RFC 9110 challenge parser --------------------------------------------------------

interface ParsedChallenge {
  scheme: string;
  token68?: string;
  params: Map<string, string>;
}

const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
const isOws = (c: string | undefined) => c === ' ' || c === '\t';
/** qdtext: HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text. */
const isQdtext = (code: number) => code === 0x09 || code === 0x20 || code === 0x21 || (code >= 0x23 && code <= 0x5b) || (code >= 0x5d && code <= 0x7e) || (code >= 0x80 && code <= 0xff);
/** quoted-pair: "\" ( HTAB / SP / VCHAR / obs-text ). */
const isQuotedPairChar = (code: number) => code === 0x09 || (code >= 0x20 && code <= 0x7e) || (code >= 0x80 && code <= 0xff);

/**
 * challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
 * auth-param = token BWS "=" BWS ( token / quoted-string ). Throws on anything else, and on a
 * parameter named twice (RFC 9110 §11.2: each may occur only once per challenge).
 */
function parseChallenge(header: string): ParsedChallenge {
  let i = 0;
  const fail = (why: string): never => {
    throw new SyntaxError(`${why} at ${i} in ${JSON.stringify(header)}`);
  };
  const readToken = (): string => {
    const start = i;
    while (i < header.length && TCHAR.test(header[i]!)) i++;
    if (i === start) fail('expected a token');
    return header.slice(start, i);
  };
  const skipOws = () => {
    while (isOws(header[i])) i++;
  };
  const readQuoted = (): string => {
    if (header[i] !== '"') fail('expected a quoted-string');
    i++;
    let value = '';
    for (;;) {
      if (i >= header.length) fail('unterminated quoted-string');
      const code = header.charCodeAt(i);
      if (code === 0x22) {
        i++;
        return value;
      }
      if (code === 0x5c) {
        if (i + 1 >= header.length || !isQuotedPairChar(header.charCodeAt(i + 1))) fail('bad quoted-pair');
        value += header[i + 1];
        i += 2;
        continue;
      }
      if (!isQdtext(code)) fail(`character ${code} not allowed in a quoted-string`);
      value += header[i];
      i++;
    }
  };

  const scheme = readToken();
  const params = new Map<string, string>();
  if (i === header.length) return { scheme, params };
  if (header[i] !== ' ') fail('expected SP after the scheme');
  while (header[i] === ' ') i++;
  const rest = header.slice(i);
  // token68 may end in "=" but holds no other "=", so it cannot be mistaken for an auth-param.
  if (TOKEN68.test(rest)) {
    return { scheme, token68: rest, params };
  }
  for (;;) {
    const name = readToken().toLowerCase();
    skipOws();
    if (header[i] !== '=') fail('expected "="');
    i++;
    skipOws();
    const value = header[i] === '"' ? readQuoted() : readToken();
    if (params.has(name)) fail(`parameter ${name} repeated`);
    params.set(name, value);
    skipOws();
    if (i === header.length) return { scheme, params };
    if (header[i] !== ',') fail('expected ","');
    i++;
    skipOws();
  }
}

test('the challenge parser used below accepts and refuses what RFC 9110 says', () => {
  assert.deepEqual(parseChallenge('Bearer realm="a\\"b", error=invalid_token').params, new Map([['realm', 'a"b'], ['error', 'invalid_token']]));
  assert.equal(parseChallenge('Basic dXNlcjpwYXNz').token68, 'dXNlcjpwYXNz');
  assert.throws(() => parseChallenge('Bearer realm="a'), SyntaxError);
  assert.throws(() => parseChallenge('Bearer realm="a"b"'), SyntaxError);
  assert.throws(() => parseChallenge('Bearer realm="a\r\nb"'), SyntaxError);
  assert.throws(() => parseChallenge('Bearer realm="a", realm="b"'), SyntaxError);
});

// ---- properties -----------------------------------------------------------------------------

/** Any single character from U+0000 to U+00FF: controls, DEL, quotes, backslash and obs-text. */
const latin1Char = fc.integer({ min: 0, max: 0xff }).map((code) => String.fromCharCode(code));
const realmArb = fc.string({ unit: latin1Char, maxLength: 40 });
/** Any code points, lone surrogates included. */
const textArb = fc.string({ unit: 'binary', maxLength: 40 });
const errorArb = fc.constantFrom('invalid_request' as const, 'invalid_token' as const, 'insufficient_scope' as const);

const DESCRIPTION_CHARS = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

test('formatBearerChallenge output always parses back (property)', () => {
  fc.assert(
    fc.property(realmArb, fc.option(errorArb, { nil: undefined }), fc.option(textArb, { nil: undefined }), fc.option(textArb, { nil: undefined }), (realm, error, description, scope) => {
      const header = formatBearerChallenge({ realm, error, description, scope });
      assert.ok(!/[\r\n]/.test(header), 'no CR or LF');

      const parsed = parseChallenge(header);
      assert.equal(parsed.scheme, 'Bearer');
      assert.equal(parsed.token68, undefined);
      assert.equal(parsed.params.get('realm'), realm.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, ''));

      if (error === undefined) {
        assert.deepEqual([...parsed.params.keys()], ['realm']);
        return;
      }
      assert.equal(parsed.params.get('error'), error);
      if (description === undefined) {
        assert.equal(parsed.params.has('error_description'), false);
      } else {
        const written = parsed.params.get('error_description');
        assert.ok(written !== undefined);
        assert.match(written, DESCRIPTION_CHARS);
        assert.equal(written, [...description].filter((c) => DESCRIPTION_CHARS.test(c)).join(''));
      }
      if (scope !== undefined) {
        assert.match(parsed.params.get('scope') ?? '', /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/);
      }
    }),
    { numRuns: 500 },
  );
});

test('formatDpopChallenge follows RFC 9449 §7.1, and always parses back (property)', () => {
  assert.equal(formatDpopChallenge({}), 'DPoP');
  assert.equal(formatDpopChallenge({ algs: 'ES256 EdDSA' }), 'DPoP algs="ES256 EdDSA"');
  assert.equal(
    formatDpopChallenge({ error: 'invalid_dpop_proof', description: 'Invalid "DPoP" key', algs: 'ES256' }),
    'DPoP error="invalid_dpop_proof", error_description="Invalid DPoP key", algs="ES256"',
  );
  const dpopErrorArb = fc.constantFrom('invalid_token' as const, 'invalid_dpop_proof' as const, 'use_dpop_nonce' as const);
  fc.assert(
    fc.property(fc.option(dpopErrorArb, { nil: undefined }), fc.option(textArb, { nil: undefined }), fc.option(textArb, { nil: undefined }), (error, description, algs) => {
      const header = formatDpopChallenge({ error, description, algs });
      assert.ok(!/[\r\n]/.test(header), 'no CR or LF');
      const parsed = parseChallenge(header);
      assert.equal(parsed.scheme, 'DPoP');
      assert.equal(parsed.params.get('error'), error);
      if (error !== undefined && description !== undefined) assert.match(parsed.params.get('error_description') ?? '', DESCRIPTION_CHARS);
      if (algs !== undefined) assert.match(parsed.params.get('algs') ?? '', DESCRIPTION_CHARS);
    }),
    { numRuns: 300 },
  );
});
