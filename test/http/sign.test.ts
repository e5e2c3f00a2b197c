import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, DEMO, signIn, startGateway, type JsonResponse } from '../helpers/gateway.js';

/*
 * The sign records of config/demo-data.json. The first address is stored in capitals (it is
 * one of EIP-55's "all caps" vectors), the other two in lowercase.
 */
const ALICE_CAPS = { address: '0x52908400098527886E0F7030069857D2E4169EE7', signedNonce: 42, signedAt: '2026-03-01 12:00:00', signedExpiredAt: '2026-03-31 12:00:00' };
const ALICE_LOWER = { address: '0x8617e340b3d01fa5f11f306f4090fd50e238070d', signedNonce: 7, signedAt: '2026-05-20 08:30:15', signedExpiredAt: '2027-05-20 08:30:15' };
const BOB = { address: '0xde709f2102306220921060314715629080e2fb77', signedNonce: 1001, signedAt: '2026-09-09 09:09:09', signedExpiredAt: '2026-12-09 09:09:09' };

const TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

/** `0x` kept as is, the hex digits upper-cased: the prefix is part of the format, not the hex. */
function upperHex(address: string): string {
  return `0x${address.slice(2).toUpperCase()}`;
}

/** Alternating case over the letters of the hex part, so neither all-lower nor all-upper. */
function mixedHex(address: string): string {
  let letters = 0;
  return `0x${[...address.slice(2).toLowerCase()].map((c) => (/[a-f]/.test(c) && letters++ % 2 === 0 ? c.toUpperCase() : c)).join('')}`;
}

function assertRecord(res: JsonResponse, spelling: string, expected: typeof ALICE_CAPS): void {
  assert.equal(res.status, 200, spelling);
  assert.match(res.headers.get('content-type')!, /^application\/json/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  assert.equal(res.body.success, true);
  assert.deepEqual(Object.keys(res.body.message).sort(), ['did', 'signedAt', 'signedExpiredAt', 'signedNonce']);
  assert.equal(res.body.message.did, spelling);
  assert.ok(Number.isInteger(res.body.message.signedNonce), 'signedNonce is a JSON integer');
  assert.equal(res.body.message.signedNonce, expected.signedNonce);
  assert.match(res.body.message.signedAt, TIMESTAMP);
  assert.match(res.body.message.signedExpiredAt, TIMESTAMP);
  assert.equal(res.body.message.signedAt, expected.signedAt);
  assert.equal(res.body.message.signedExpiredAt, expected.signedExpiredAt);
}

function assertError(res: JsonResponse, status: number, code: string, label: string): void {
  assert.equal(res.status, status, label);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, label);
  assert.equal(res.body?.success, false, label);
  assert.equal(res.body.message.code, code, label);
}

test('/api/sign', async (t) => {
  const gw = await startGateway(t);
  const alice = await signIn(gw, DEMO.alice);
  const bob = await signIn(gw, DEMO.bob);
  const sign = (query: string) => `${gw.url}/api/sign?${query}`;

  await t.test('GET returns the record; did echoes the spelling sent, the lookup ignores case', async () => {
    for (const record of [ALICE_CAPS, ALICE_LOWER]) {
      const spellings = [record.address.toLowerCase(), upperHex(record.address), mixedHex(record.address)];
      assert.equal(new Set(spellings).size, 3, 'three distinct spellings');
      for (const spelling of spellings) {
        assertRecord(await call(sign(`address=${spelling}`), { token: alice.accessToken }), spelling, record);
      }
    }
  });

  await t.test('signedNonce is written as a bare JSON integer', async () => {
    const res = await fetch(sign(`address=${ALICE_CAPS.address}`), { headers: { authorization: `Bearer ${alice.accessToken}` } });
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.match(text, /"signedNonce":42[,}]/);
  });

  await t.test('POST answers as GET, with an empty body or a small body it ignores', async () => {
    const get = await call(sign(`address=${ALICE_CAPS.address}`), { token: alice.accessToken });
    assertRecord(get, ALICE_CAPS.address, ALICE_CAPS);
    const posts: [string, RequestInit][] = [
      ['no body', {}],
      ['empty JSON object', { body: '{}', headers: { 'content-type': 'application/json' } }],
      // The body names another address: only the query counts.
      ['JSON naming another address', { body: JSON.stringify({ address: BOB.address }), headers: { 'content-type': 'application/json' } }],
      ['plain text', { body: 'hello', headers: { 'content-type': 'text/plain' } }],
    ];
    for (const [label, init] of posts) {
      const res = await call(sign(`address=${ALICE_CAPS.address}`), { ...init, method: 'POST', token: alice.accessToken });
      assert.equal(res.status, 200, label);
      assert.deepEqual(res.body, get.body, label);
    }
  });

  await t.test('records are scoped by account', async () => {
    assertRecord(await call(sign(`address=${BOB.address}`), { token: bob.accessToken }), BOB.address, BOB);
    assertRecord(await call(sign(`address=${upperHex(BOB.address)}`), { token: bob.accessToken }), upperHex(BOB.address), BOB);
    for (const address of [ALICE_CAPS.address, ALICE_LOWER.address, ALICE_CAPS.address.toLowerCase()]) {
      assertError(await call(sign(`address=${address}`), { token: bob.accessToken }), 404, 'sign_record_not_found', `bob asks for ${address}`);
    }
    for (const address of [BOB.address, upperHex(BOB.address)]) {
      assertError(await call(sign(`address=${address}`), { token: alice.accessToken }), 404, 'sign_record_not_found', `alice asks for ${address}`);
      assertError(await call(sign(`address=${address}`), { method: 'POST', token: alice.accessToken }), 404, 'sign_record_not_found', `alice posts ${address}`);
    }
  });

  await t.test('an unknown but well-formed address is the 404 envelope', async () => {
    for (const address of [`0x${'0'.repeat(40)}`, `0x${'f'.repeat(40)}`, `0x${'AB'.repeat(20)}`]) {
      const res = await call(sign(`address=${address}`), { token: alice.accessToken });
      assertError(res, 404, 'sign_record_not_found', address);
      assert.deepEqual(Object.keys(res.body.message).sort(), ['code', 'description']);
    }
  });

  await t.test('a missing or malformed address is 400 invalid_request', async () => {
    const valid = ALICE_CAPS.address;
    const hex = valid.slice(2);
    const queries = [
      '', // no query at all
      'address',
      'address=',
      'addr=' + valid,
      'ADDRESS=' + valid,
      `address[]=${valid}`,
      `address=0x${hex.slice(0, 39)}`,
      `address=${valid}0`,
      `address=0x${'g'.repeat(40)}`,
      `address=0x${hex.slice(0, 20)}z${hex.slice(21)}`,
      `address=${hex}`,
      `address=00${hex}`,
      `address=0X${hex}`,
      `address=x${hex}`,
      `address=${valid}&address=${valid}`,
      `address=${valid}&address=`,
      `address=${valid}&address=${BOB.address}`,
      `address=%20${valid}`,
      `address=${valid}%20`,
      `address=+${valid}`,
      `address=${valid}+`,
      `address=0x%20${hex}`,
      `address=${valid}%0A`,
      `address=${valid}%00`,
      `address=%E2%80%8B${valid}`, // zero-width space
      `address=0x${hex.slice(0, 39)}%D0%B0`, // Cyrillic "а" for the last digit
      `address=%EF%BC%90x${hex}`, // fullwidth "0"
      `address=${valid}%26address%3D${valid}`, // an encoded "&address=" stays inside the value
      `address=${valid},${BOB.address}`,
      `address=%E0%A4%A`,
    ];
    for (const query of queries) {
      assertError(await call(sign(query), { token: alice.accessToken }), 400, 'invalid_request', `GET ?${query}`);
    }
    for (const query of ['', 'address=', `address=${hex}`, `address=${valid}&address=${valid}`]) {
      assertError(await call(sign(query), { method: 'POST', token: alice.accessToken }), 400, 'invalid_request', `POST ?${query}`);
    }
  });

  await t.test('a call without a token is 401 with a Bearer challenge', async () => {
    for (const method of ['GET', 'POST']) {
      const res = await call(sign(`address=${ALICE_CAPS.address}`), { method });
      assertError(res, 401, 'missing_token', method);
      assert.match(res.headers.get('www-authenticate')!, /^Bearer /);
    }
  });

  await t.test('a POST body over the 4096-byte limit is 413', async () => {
    const atLimit = await call(sign(`address=${ALICE_CAPS.address}`), { method: 'POST', body: 'x'.repeat(4096), token: alice.accessToken });
    assert.equal(atLimit.status, 200);
    for (const size of [4097, 64 * 1024]) {
      const res = await call(sign(`address=${ALICE_CAPS.address}`), { method: 'POST', body: 'x'.repeat(size), token: alice.accessToken });
      assertError(res, 413, 'payload_too_large', `${size} bytes`);
    }
    // Without Content-Length (chunked), the limit holds while reading.
    const chunk = new Uint8Array(1024).fill(0x78);
    let sent = 0;
    const body = new ReadableStream({
      pull(controller) {
        if (sent >= 16 * 1024) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const streamed = await call(sign(`address=${ALICE_CAPS.address}`), { method: 'POST', body, duplex: 'half', token: alice.accessToken } as RequestInit);
    assertError(streamed, 413, 'payload_too_large', 'chunked body');
  });

  await t.test('PUT and DELETE are 405 with Allow', async () => {
    for (const method of ['PUT', 'DELETE', 'PATCH']) {
      const res = await call(sign(`address=${ALICE_CAPS.address}`), { method, token: alice.accessToken });
      assertError(res, 405, 'method_not_allowed', method);
      const allowed = res.headers.get('allow')!.split(',').map((m) => m.trim());
      assert.ok(allowed.includes('GET') && allowed.includes('POST'), `Allow: ${allowed.join(', ')}`);
      assert.ok(!allowed.includes(method), `Allow does not list ${method}`);
    }
  });

  await t.test('with data.timeZone Asia/Tokyo the times are written nine hours later', async (t) => {
    const tokyo = await startGateway(t, { overrides: { data: { timeZone: 'Asia/Tokyo' } } });
    const aliceThere = await signIn(tokyo, DEMO.alice);
    const bobThere = await signIn(tokyo, DEMO.bob);
    const at = (query: string) => `${tokyo.url}/api/sign?${query}`;
    assertRecord(await call(at(`address=${ALICE_CAPS.address}`), { token: aliceThere.accessToken }), ALICE_CAPS.address,
      { ...ALICE_CAPS, signedAt: '2026-03-01 21:00:00', signedExpiredAt: '2026-03-31 21:00:00' });
    assertRecord(await call(at(`address=${ALICE_LOWER.address}`), { token: aliceThere.accessToken }), ALICE_LOWER.address,
      { ...ALICE_LOWER, signedAt: '2026-05-20 17:30:15', signedExpiredAt: '2027-05-20 17:30:15' });
    assertRecord(await call(at(`address=${BOB.address}`), { token: bobThere.accessToken }), BOB.address,
      { ...BOB, signedAt: '2026-09-09 18:09:09', signedExpiredAt: '2026-12-09 18:09:09' });
  });
});
