import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { pino } from 'pino';
import { isoTime } from '../../src/telemetry/log.js';

test('isoTime writes what pino\'s isoTime writes, for any instant from 1970 to 9999', () => {
  fc.assert(fc.property(fc.integer({ min: 0, max: 253_402_300_799_999 }), (now) => {
    assert.equal(isoTime(now), `,"time":"${new Date(now).toISOString()}"`);
  }), { numRuns: 2000 });
});

test('isoTime stays right across second boundaries and back in time', () => {
  for (const now of [1_000, 999, 1_001, 60_000, 59_999, 1_764_000_000_000, 1_764_000_000_999, 1_764_000_001_000, 1_764_000_000_001]) {
    assert.equal(isoTime(now), `,"time":"${new Date(now).toISOString()}"`);
  }
});

test('isoTime without an argument is the current time, in pino\'s format', () => {
  const before = Date.now();
  const written = JSON.parse(`{${isoTime().slice(1)}}`).time as string;
  const after = Date.now();
  assert.match(written, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  assert.ok(Date.parse(written) >= before && Date.parse(written) <= after);
  assert.match(pino.stdTimeFunctions.isoTime(), /^,"time":"/);
});
