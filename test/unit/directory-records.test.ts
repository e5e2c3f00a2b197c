/**
 * Reading store values into the Directory's types (src/state/directory/records.ts), the
 * `YYYY-MM-DD HH:MM:SS` parser behind it (src/util/time.ts), and the Redis change notice
 * (parseChange in src/state/directory/redis.ts). Every value that means one thing is read;
 * everything else is a BadStoreData whose message names the field and never its value.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BadStoreData } from '../../src/errors/errors.js';
import { createRecordReader } from '../../src/state/directory/records.js';
import { parseChange } from '../../src/state/directory/redis.js';
import { createTimestampFormatter, createTimestampParser } from '../../src/util/time.js';

const utc = createRecordReader('UTC');
const berlin = createRecordReader('Europe/Berlin');

const ROLE = { id: 7, slug: 'r7', name: 'Role 7', description: 'the seventh', public: true };
const SIGN = { signedNonce: 42, signedAt: 1_772_366_400_000, signedExpiredAt: 1_774_951_200_000 };
const ADDR = '0x52908400098527886e0f7030069857d2e4169ee7';

/**
 * Runs `read`, which must throw a BadStoreData (502 bad_store_data) whose cause names `path`
 * and contains none of `hidden` (the offending value, in every spelling it could be logged in).
 */
function assertRejected(read: () => unknown, path: string, hidden: unknown[] = []): string {
  let thrown: unknown;
  try {
    read();
  } catch (err) {
    thrown = err;
  }
  assert.ok(thrown instanceof BadStoreData, `expected BadStoreData for ${path}, got ${thrown === undefined ? 'no error' : String(thrown)}`);
  assert.equal(thrown.status, 502);
  assert.equal(thrown.code, 'bad_store_data');
  assert.ok(thrown.cause instanceof Error, 'the cause carries the details');
  const message = thrown.cause.message;
  assert.ok(message.includes(`${path}:`) || message.includes(`${path} `), `"${message}" names ${path}`);
  for (const value of hidden) {
    for (const spelling of new Set([String(value), JSON.stringify(value)].filter((v) => v !== '' && v !== '""'))) {
      assert.ok(!message.includes(spelling), `"${message}" must not contain the value ${spelling}`);
      assert.ok(!thrown.message.includes(spelling), `"${thrown.message}" must not contain the value ${spelling}`);
    }
  }
  return message;
}

test('createRecordReader: roles', async (t) => {
  await t.test('id: a non-negative integer or its decimal digits', () => {
    for (const [raw, id] of [[7, 7], ['7', 7], [0, 0], ['0', 0], ['123456', 123456], [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER], [String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER]] as const) {
      assert.equal(utc.role({ ...ROLE, id: raw }, 'role record').id, id, JSON.stringify(raw));
    }
  });

  await t.test('public: true/false, 0/1, "0"/"1", "true"/"false"', () => {
    for (const [raw, value] of [[true, true], [false, false], [1, true], [0, false], ['1', true], ['0', false], ['true', true], ['false', false]] as const) {
      assert.equal(utc.role({ ...ROLE, public: raw }, 'role record').public, value, JSON.stringify(raw));
    }
  });

  await t.test('slug and name: text, numbers become strings', () => {
    assert.deepEqual(utc.role({ ...ROLE, slug: 12, name: 0 }, 'role record'), { ...ROLE, slug: '12', name: '0' });
    assert.deepEqual(utc.role({ ...ROLE, slug: 'ä-ß', name: 'x'.repeat(256) }, 'role record'), { ...ROLE, slug: 'ä-ß', name: 'x'.repeat(256) });
  });

  await t.test('description: text; null or absent is ""', () => {
    assert.equal(utc.role({ ...ROLE, description: null }, 'role record').description, '');
    const { description: _d, ...noDescription } = ROLE;
    assert.equal(utc.role(noDescription, 'role record').description, '');
    assert.equal(utc.role({ ...ROLE, description: undefined }, 'role record').description, '');
    assert.equal(utc.role({ ...ROLE, description: '' }, 'role record').description, '');
    assert.equal(utc.role({ ...ROLE, description: 'd'.repeat(4096) }, 'role record').description, 'd'.repeat(4096));
  });

  await t.test('fields the gateway does not use are ignored, not passed on', () => {
    const role = utc.role({ ...ROLE, id: '7', public: '1', createdAt: '2026-01-01', owner: { name: 'x' }, pages: 3 }, 'role record');
    assert.deepEqual(role, ROLE);
    assert.deepEqual(Object.keys(role).sort(), ['description', 'id', 'name', 'public', 'slug']);
  });

  await t.test('ids that are not one unambiguous non-negative integer are refused', () => {
    for (const id of [-1, 1.5, '007', '1e3', 'yes', '-1', '+7', ' 7', '7 ', '0x10', '', '9007199254740992', 2 ** 53, true, [7], { id: 7 }]) {
      assertRejected(() => utc.role({ ...ROLE, id }, 'role record'), 'id', typeof id === 'object' ? [] : [id]);
    }
    assertRejected(() => utc.role({ ...ROLE, id: null }, 'role record'), 'id');
  });

  await t.test('public other than the eight spellings is refused', () => {
    for (const value of ['yes', 'nah', 2, -1, 'TRUE', 'False', '', '1\n', 0.5]) {
      assertRejected(() => utc.role({ ...ROLE, public: value }, 'role record'), 'public', [value]);
    }
    assertRejected(() => utc.role({ ...ROLE, public: null }, 'role record'), 'public');
  });

  await t.test('empty or overlong text, and a description that is not text, are refused', () => {
    assertRejected(() => utc.role({ ...ROLE, slug: '' }, 'role record'), 'slug');
    assertRejected(() => utc.role({ ...ROLE, name: 'secret-name-'.repeat(30) }, 'role record'), 'name', ['secret-name-'.repeat(30), 'secret-name']);
    assertRejected(() => utc.role({ ...ROLE, slug: { a: 1 } }, 'role record'), 'slug');
    assertRejected(() => utc.role({ ...ROLE, description: 'private note '.repeat(400) }, 'role record'), 'description', ['private note']);
    assertRejected(() => utc.role({ ...ROLE, description: 12345 }, 'role record'), 'description', [12345]);
  });

  await t.test('a missing field is named', () => {
    for (const field of ['id', 'slug', 'name', 'public'] as const) {
      const { [field]: _gone, ...rest } = ROLE;
      assertRejected(() => utc.role(rest, 'role record'), field);
    }
    const message = assertRejected(() => utc.role(null, 'role record'), '(record)');
    assert.match(message, /^role record: /, 'the message starts with where the record came from');
  });

  await t.test('the message starts with `where` and names every bad field', () => {
    const message = assertRejected(() => utc.role({ ...ROLE, id: 'yes', public: 'maybe' }, 'role record'), 'id', ['yes', 'maybe']);
    assert.match(message, /^role record: /);
    assert.match(message, /\bpublic: /);
  });
});

test('createRecordReader: a page of roles', async (t) => {
  await t.test('items and total; total as a number or digits; pages and other fields ignored', () => {
    const page = utc.rolePage({ items: [{ ...ROLE, id: '7', public: 0 }, { ...ROLE, id: 8, slug: 8, description: null }], total: '12', pages: '6', extra: true }, 'roles page');
    assert.deepEqual(page, {
      items: [{ ...ROLE, public: false }, { ...ROLE, id: 8, slug: '8', description: '' }],
      total: 12,
    });
    assert.deepEqual(Object.keys(page).sort(), ['items', 'total']);
    assert.deepEqual(utc.rolePage({ items: [], total: 0 }, 'roles page'), { items: [], total: 0 });
    assert.deepEqual(utc.rolePage({ items: [ROLE], total: 1 }, 'roles page'), { items: [ROLE], total: 1 });
  });

  await t.test('a bad item is named by its index', () => {
    assertRejected(() => utc.rolePage({ items: [ROLE, { ...ROLE, id: 'seven' }], total: 2 }, 'roles page'), 'items.1.id', ['seven']);
    assertRejected(() => utc.rolePage({ items: [{ ...ROLE, public: 'sometimes' }], total: 1 }, 'roles page'), 'items.0.public', ['sometimes']);
  });

  await t.test('total: negative, fractional, "007", "1e3", "yes", missing, or less than the items given', () => {
    for (const total of [-1, 2.5, '007', '1e3', 'yes', '-3']) {
      assertRejected(() => utc.rolePage({ items: [], total }, 'roles page'), 'total', [total]);
    }
    assertRejected(() => utc.rolePage({ items: [] }, 'roles page'), 'total');
    assertRejected(() => utc.rolePage({ total: 3 }, 'roles page'), 'items');
    assertRejected(() => utc.rolePage({ items: 'none', total: 3 }, 'roles page'), 'items', ['none']);
    assertRejected(() => utc.rolePage({ items: [ROLE, { ...ROLE, id: 8 }], total: 1 }, 'roles page'), 'total');
    assertRejected(() => utc.rolePage({ items: [ROLE, { ...ROLE, id: 8 }], total: '1' }, 'roles page'), 'total');
  });
});

test('createRecordReader: sign records', async (t) => {
  await t.test('signedNonce as a number or digits; the address is the one asked for; extra fields ignored', () => {
    assert.deepEqual(utc.signRecord(SIGN, ADDR, 'sign record'), { address: ADDR, ...SIGN });
    assert.deepEqual(utc.signRecord({ ...SIGN, signedNonce: '42' }, ADDR, 'sign record'), { address: ADDR, ...SIGN });
    assert.deepEqual(utc.signRecord({ ...SIGN, signedNonce: 0 }, ADDR, 'sign record').signedNonce, 0);
    assert.deepEqual(utc.signRecord({ ...SIGN, signedNonce: '0' }, ADDR, 'sign record').signedNonce, 0);
    const record = utc.signRecord({ ...SIGN, address: '0xsomeoneelse', did: 'x', signature: '0xabc' }, ADDR, 'sign record');
    assert.deepEqual(record, { address: ADDR, ...SIGN });
  });

  await t.test('times: epoch ms, ISO 8601 with an offset, or YYYY-MM-DD HH:MM:SS in the configured zone', () => {
    const at = Date.UTC(2026, 2, 1, 12, 0, 0);
    for (const [raw, expected] of [
      [at, at],
      [0, 0],
      ['2026-03-01T12:00:00Z', at],
      ['2026-03-01T12:00:00.250Z', at + 250],
      ['2026-03-01T14:00:00+02:00', at],
      ['2026-03-01T07:00:00-05:00', at],
      ['2026-03-01 12:00:00', at],
    ] as const) {
      const record = utc.signRecord({ ...SIGN, signedAt: raw, signedExpiredAt: raw }, ADDR, 'sign record');
      assert.equal(record.signedAt, expected, JSON.stringify(raw));
      assert.equal(record.signedExpiredAt, expected, JSON.stringify(raw));
    }
  });

  await t.test('local times in Europe/Berlin: UTC+1 in winter, UTC+2 in summer; epoch ms and ISO are zone-free', () => {
    const winter = berlin.signRecord({ signedNonce: 1, signedAt: '2026-01-15 10:00:00', signedExpiredAt: '2026-07-15 10:00:00' }, ADDR, 'sign record');
    assert.equal(winter.signedAt, Date.UTC(2026, 0, 15, 9, 0, 0));
    assert.equal(winter.signedExpiredAt, Date.UTC(2026, 6, 15, 8, 0, 0));
    // The last second before and the first after the spring change (29 March 2026, 01:00 UTC).
    const spring = berlin.signRecord({ signedNonce: 1, signedAt: '2026-03-29 01:59:59', signedExpiredAt: '2026-03-29 03:00:00' }, ADDR, 'sign record');
    assert.equal(spring.signedAt, Date.UTC(2026, 2, 29, 0, 59, 59));
    assert.equal(spring.signedExpiredAt, Date.UTC(2026, 2, 29, 1, 0, 0));
    const zoneFree = berlin.signRecord({ signedNonce: 1, signedAt: '2026-07-15T10:00:00Z', signedExpiredAt: 1_000 }, ADDR, 'sign record');
    assert.equal(zoneFree.signedAt, Date.UTC(2026, 6, 15, 10, 0, 0));
    assert.equal(zoneFree.signedExpiredAt, 1_000);
    // The same text in UTC is another instant.
    assert.equal(utc.signRecord({ ...SIGN, signedAt: '2026-07-15 10:00:00' }, ADDR, 'sign record').signedAt, Date.UTC(2026, 6, 15, 10, 0, 0));
  });

  await t.test('times that are not one of the three forms, or a date that does not exist, are refused', () => {
    for (const value of [
      '2026-02-30 10:00:00', '2026-02-29 10:00:00', '2026-04-31 10:00:00', '2026-13-01 10:00:00', '2026-03-01 24:00:00',
      '2026-03-01 12:60:00', '2026-03-01 12:00:61', '2026-03-01T12:00:00', '2026-03-01 12:00', '2026-3-1 12:00:00',
      'yesterday', '1e3', -5, 1.5, true,
    ]) {
      assertRejected(() => utc.signRecord({ ...SIGN, signedAt: value }, ADDR, 'sign record'), 'signedAt', [value]);
      assertRejected(() => berlin.signRecord({ ...SIGN, signedExpiredAt: value }, ADDR, 'sign record'), 'signedExpiredAt', [value]);
    }
    // A leap day that exists is read.
    assert.equal(utc.signRecord({ ...SIGN, signedAt: '2028-02-29 10:00:00' }, ADDR, 'sign record').signedAt, Date.UTC(2028, 1, 29, 10));
  });

  await t.test('signedNonce: negative, fractional, "007", "1e3", "yes" are refused', () => {
    for (const value of [-1, 0.5, '007', '1e3', 'yes', '-1', '']) {
      assertRejected(() => utc.signRecord({ ...SIGN, signedNonce: value }, ADDR, 'sign record'), 'signedNonce', [value]);
    }
  });

  await t.test('a missing field is named; the address is never in the message', () => {
    for (const field of ['signedNonce', 'signedAt', 'signedExpiredAt'] as const) {
      const { [field]: _gone, ...rest } = SIGN;
      assertRejected(() => utc.signRecord(rest, ADDR, 'sign record'), field, [ADDR]);
    }
    assertRejected(() => utc.signRecord('{"signedNonce":1}', ADDR, 'sign record'), '(record)', [ADDR, '{"signedNonce":1}']);
    assertRejected(() => utc.signRecord([], ADDR, 'sign record'), '(record)', [ADDR]);
  });
});

test('createTimestampParser', async (t) => {
  await t.test('UTC and fixed zones', () => {
    assert.equal(createTimestampParser('UTC')('2026-03-01 12:00:00'), Date.UTC(2026, 2, 1, 12));
    assert.equal(createTimestampParser('Etc/UTC')('1970-01-01 00:00:00'), 0);
    assert.equal(createTimestampParser('Asia/Tokyo')('2027-01-01 00:30:05'), Date.UTC(2026, 11, 31, 15, 30, 5));
    assert.equal(createTimestampParser('Asia/Kolkata')('2026-06-01 05:30:00'), Date.UTC(2026, 5, 1, 0, 0, 0));
  });

  await t.test('Europe/Berlin and America/New_York, winter and summer', () => {
    const berlinParse = createTimestampParser('Europe/Berlin');
    assert.equal(berlinParse('2026-01-15 10:00:00'), Date.UTC(2026, 0, 15, 9));
    assert.equal(berlinParse('2026-07-15 10:00:00'), Date.UTC(2026, 6, 15, 8));
    assert.equal(berlinParse('2026-07-01 00:00:00'), Date.UTC(2026, 5, 30, 22));
    const newYork = createTimestampParser('America/New_York');
    assert.equal(newYork('2026-01-15 00:00:00'), Date.UTC(2026, 0, 15, 5));
    assert.equal(newYork('2026-07-15 12:00:00'), Date.UTC(2026, 6, 15, 16));
  });

  await t.test('text that is not such a time, or a date that does not exist: undefined', () => {
    const parse = createTimestampParser('Europe/Berlin');
    for (const text of ['', '2026-02-30 10:00:00', '2026-02-29 00:00:00', '2026-00-10 10:00:00', '2026-03-01 24:00:00', '2026-03-01 23:60:00',
      '2026-03-01 23:59:60', '2026-03-01T10:00:00', '2026-03-01T10:00:00Z', ' 2026-03-01 10:00:00', '2026-03-01 10:00:00 ', '26-03-01 10:00:00']) {
      assert.equal(parse(text), undefined, JSON.stringify(text));
      assert.equal(createTimestampParser('UTC')(text), undefined, `UTC ${JSON.stringify(text)}`);
    }
  });

  await t.test('round trip with createTimestampFormatter across zones (property)', () => {
    const zones = ['UTC', 'Etc/UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Asia/Kolkata', 'Australia/Lord_Howe', 'America/Sao_Paulo'];
    const pairs = zones.map((zone) => ({ zone, format: createTimestampFormatter(zone), parse: createTimestampParser(zone) }));
    const HOUR = 3_600_000;
    fc.assert(fc.property(fc.integer({ min: 0, max: Date.UTC(2100, 0, 1) / 1000 }), (seconds) => {
      const epochMs = seconds * 1000;
      for (const { zone, format, parse } of pairs) {
        const text = format(epochMs);
        const back = parse(text);
        assert.ok(back !== undefined, `${zone} ${text}`);
        assert.equal(format(back), text, `${zone}: ${text} reads back to the same wall-clock time`);
        // The same wall time twice (the autumn change): either instant is right. Otherwise exactly this one.
        const twice = [-HOUR, -HOUR / 2, HOUR / 2, HOUR].some((d) => format(epochMs + d) === text);
        if (!twice) assert.equal(back, epochMs, `${zone} ${text}`);
      }
    }), { numRuns: 500 });
  });

  await t.test('minute by minute around every 2026 change of offset: back to the same instant unless the wall time happens twice', () => {
    const HOUR = 3_600_000;
    for (const zone of ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'America/Havana']) {
      const format = createTimestampFormatter(zone);
      const parse = createTimestampParser(zone);
      const offset = (epochMs: number) => Date.parse(`${format(epochMs).replace(' ', 'T')}Z`) - epochMs;
      const changes: number[] = [];
      for (let at = Date.UTC(2026, 0, 1); at < Date.UTC(2027, 0, 1); at += HOUR / 2) {
        if (offset(at) !== offset(at + HOUR / 2)) changes.push(at);
      }
      assert.equal(changes.length, 2, `${zone} changes its offset twice in 2026`);
      for (const change of changes) {
        for (let epochMs = change - 3 * HOUR; epochMs <= change + 3 * HOUR; epochMs += 60_000) {
          const text = format(epochMs);
          const back = parse(text);
          assert.ok(back !== undefined, `${zone} ${text}`);
          assert.equal(format(back), text, `${zone} ${text}`);
          const twice = [-HOUR, -HOUR / 2, HOUR / 2, HOUR].some((d) => format(epochMs + d) === text);
          if (!twice) assert.equal(back, epochMs, `${zone} ${text} (${new Date(epochMs).toISOString()})`);
        }
      }
    }
  });

  await t.test('the hour that happens twice (autumn) reads as one of its two instants', () => {
    const cases: [string, string, number][] = [
      ['Europe/Berlin', '2026-10-25 02:30:00', Date.UTC(2026, 9, 25, 0, 30)],
      ['America/New_York', '2026-11-01 01:30:00', Date.UTC(2026, 10, 1, 5, 30)],
    ];
    for (const [zone, text, first] of cases) {
      const back = createTimestampParser(zone)(text);
      assert.ok(back === first || back === first + 3_600_000, `${zone} ${text}: ${back === undefined ? 'undefined' : new Date(back).toISOString()}`);
      assert.equal(createTimestampFormatter(zone)(back!), text);
    }
  });

  await t.test('a wall time inside the spring jump reads with the offset in force before it (as time.ts documents)', () => {
    // time.ts: "lands on the right instant except inside a daylight-saving jump, where the earlier offset wins".
    // 02:30 does not exist on these days; with the offset before the jump it is 01:30 UTC in
    // Berlin (UTC+1) and 07:30 UTC in New York (UTC-5).
    assert.equal(new Date(createTimestampParser('Europe/Berlin')('2026-03-29 02:30:00')!).toISOString(), '2026-03-29T01:30:00.000Z');
    assert.equal(new Date(createTimestampParser('America/New_York')('2026-03-08 02:30:00')!).toISOString(), '2026-03-08T07:30:00.000Z');
  });
});

test('parseChange', async (t) => {
  await t.test('the three notices a writer publishes', () => {
    assert.deepEqual(parseChange('{"kind":"roles","accountId":"acct_a"}'), { kind: 'roles', accountId: 'acct_a' });
    assert.deepEqual(parseChange('{"kind":"account","accountId":"acct_a"}'), { kind: 'account', accountId: 'acct_a' });
    assert.deepEqual(parseChange(`{"kind":"sign","accountId":"acct_a","address":"${ADDR}"}`), { kind: 'sign', accountId: 'acct_a', address: ADDR });
  });

  await t.test('the address is lowercased; extra fields are dropped; ids may use . _ : @ -', () => {
    assert.deepEqual(parseChange(JSON.stringify({ kind: 'sign', accountId: 'acct_a', address: '0x52908400098527886E0F7030069857D2E4169EE7' })), { kind: 'sign', accountId: 'acct_a', address: ADDR });
    assert.deepEqual(parseChange(JSON.stringify({ kind: 'roles', accountId: 'acct_a', address: ADDR, by: 'dashboard' })), { kind: 'roles', accountId: 'acct_a' });
    assert.deepEqual(parseChange(JSON.stringify({ accountId: 'a.b_c:d@e-f', kind: 'account' })), { kind: 'account', accountId: 'a.b_c:d@e-f' });
    const longest = 'a'.repeat(128);
    assert.deepEqual(parseChange(JSON.stringify({ kind: 'roles', accountId: longest })), { kind: 'roles', accountId: longest });
  });

  await t.test('anything else is undefined', () => {
    const malformed = [
      '', 'not json', '{', 'null', '42', '"roles"', '[]', '[{"kind":"roles","accountId":"acct_a"}]', '{}',
      '{"kind":"roles"}',
      '{"accountId":"acct_a"}',
      '{"kind":"ROLES","accountId":"acct_a"}',
      '{"kind":"delete","accountId":"acct_a"}',
      '{"kind":"roles","accountId":""}',
      '{"kind":"roles","accountId":"acct a"}',
      '{"kind":"roles","accountId":7}',
      '{"kind":"roles","accountId":null}',
      `{"kind":"roles","accountId":"${'a'.repeat(129)}"}`,
      '{"kind":"roles","accountId":"acct/a"}',
      '{"kind":"sign","accountId":"acct_a"}',
      '{"kind":"sign","accountId":"acct_a","address":null}',
      '{"kind":"sign","accountId":"acct_a","address":12345}',
      `{"kind":"sign","accountId":"acct_a","address":"${ADDR.slice(0, -1)}"}`,
      `{"kind":"sign","accountId":"acct_a","address":"${ADDR}0"}`,
      `{"kind":"sign","accountId":"acct_a","address":"${ADDR.slice(2)}"}`,
      `{"kind":"sign","accountId":"acct_a","address":"0X${ADDR.slice(2)}"}`,
      `{"kind":"sign","accountId":"acct_a","address":"0x${'g'.repeat(40)}"}`,
      `{"kind":"sign","accountId":"acct_a","address":" ${ADDR}"}`,
    ];
    for (const message of malformed) assert.equal(parseChange(message), undefined, message);
  });
});
