import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createTimestampFormatter } from '../../src/util/time.js';

const FORMAT = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

test('createTimestampFormatter', async (t) => {
  await t.test('UTC and Etc/UTC', () => {
    for (const zone of ['UTC', 'Etc/UTC']) {
      const format = createTimestampFormatter(zone);
      assert.equal(format(Date.UTC(2026, 2, 1, 12, 0, 0)), '2026-03-01 12:00:00', zone);
      assert.equal(format(Date.UTC(2026, 11, 31, 23, 59, 59, 999)), '2026-12-31 23:59:59', zone);
      assert.equal(format(0), '1970-01-01 00:00:00', zone);
    }
  });

  await t.test('Asia/Tokyo is UTC+9 and crosses the date line of the day', () => {
    const format = createTimestampFormatter('Asia/Tokyo');
    assert.equal(format(Date.UTC(2026, 2, 1, 12, 0, 0)), '2026-03-01 21:00:00');
    assert.equal(format(Date.UTC(2026, 11, 31, 15, 30, 5)), '2027-01-01 00:30:05');
  });

  await t.test('America/New_York across the spring and autumn changes of 2026', () => {
    const format = createTimestampFormatter('America/New_York');
    // 8 March 2026, 02:00 EST becomes 03:00 EDT (UTC-5 to UTC-4).
    assert.equal(format(Date.UTC(2026, 2, 8, 6, 59, 59)), '2026-03-08 01:59:59');
    assert.equal(format(Date.UTC(2026, 2, 8, 7, 0, 0)), '2026-03-08 03:00:00');
    // 1 November 2026, 02:00 EDT becomes 01:00 EST: the hour 01:xx happens twice.
    assert.equal(format(Date.UTC(2026, 10, 1, 5, 59, 59)), '2026-11-01 01:59:59');
    assert.equal(format(Date.UTC(2026, 10, 1, 6, 0, 0)), '2026-11-01 01:00:00');
    assert.equal(format(Date.UTC(2026, 10, 1, 7, 0, 0)), '2026-11-01 02:00:00');
  });

  await t.test('midnight is written 00, never 24', () => {
    assert.equal(createTimestampFormatter('Asia/Tokyo')(Date.UTC(2026, 4, 19, 15, 0, 0)), '2026-05-20 00:00:00');
    assert.equal(createTimestampFormatter('America/New_York')(Date.UTC(2026, 0, 15, 5, 0, 0)), '2026-01-15 00:00:00');
    assert.equal(createTimestampFormatter('Europe/Berlin')(Date.UTC(2026, 5, 30, 22, 0, 0)), '2026-07-01 00:00:00');
    assert.equal(createTimestampFormatter('UTC')(Date.UTC(2026, 5, 30, 24, 0, 0)), '2026-07-01 00:00:00');
  });

  await t.test('always YYYY-MM-DD HH:MM:SS and agrees with a fixed-offset zone (property)', () => {
    const tokyo = createTimestampFormatter('Asia/Tokyo');
    const utc = createTimestampFormatter('UTC');
    const formatters = ['UTC', 'Asia/Tokyo', 'America/New_York', 'Europe/Berlin', 'Australia/Lord_Howe', 'Asia/Kolkata'].map(createTimestampFormatter);
    // 1970 to the end of 9998, so no zone's local time reaches a fifth year digit.
    fc.assert(fc.property(fc.integer({ min: 0, max: Date.UTC(9998, 11, 31, 23, 59, 59, 999) }), (epochMs) => {
      for (const format of formatters) assert.match(format(epochMs), FORMAT);
      // Japan has had no daylight saving since 1951.
      assert.equal(tokyo(epochMs), utc(epochMs + 9 * 3_600_000));
    }), { numRuns: 300 });
  });
});
