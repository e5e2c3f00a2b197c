/**
 * Device cookies (owner/devices.ts): a cookie counts only for the email it was set for, until it
 * expires, under the key that signed it; anything else is an untrusted client's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createDeviceCookies } from '../../src/owner/devices.js';
import { ManualClock } from '../helpers/clock.js';

const SECRET = 'a device cookie key of 32 characters or more';

test('a device cookie names its device for its own email only, until it expires', () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const devices = createDeviceCookies({ secret: SECRET, days: 2, clock });
  const cookie = devices.issue('Owner@Example.com');
  assert.match(cookie, /^[0-9A-Za-z]{22}\.\d+\.[A-Za-z0-9_-]{43}$/);
  assert.ok(!cookie.toLowerCase().includes('owner'), 'the email is not in the cookie');
  const id = devices.deviceOf(cookie, 'owner@example.com');
  assert.equal(id, cookie.split('.')[0], 'the email is compared lowercase');
  assert.notEqual(devices.deviceOf(devices.issue('owner@example.com'), 'owner@example.com'), id, 'each cookie is a device of its own');
  assert.equal(devices.deviceOf(cookie, 'other@example.com'), undefined, 'another email');
  const [device, expires, mac] = cookie.split('.') as [string, string, string];
  assert.equal(devices.deviceOf(`${device}.${Number(expires) + 86_400}.${mac}`, 'owner@example.com'), undefined, 'a moved expiry');
  assert.equal(devices.deviceOf(`${device.slice(0, -1)}${device.endsWith('A') ? 'B' : 'A'}.${expires}.${mac}`, 'owner@example.com'), undefined, 'another device id');
  for (const garbage of [undefined, '', 'x', `${cookie}.x`, cookie.replace(/\./g, '|')]) {
    assert.equal(devices.deviceOf(garbage, 'owner@example.com'), undefined, String(garbage));
  }
  assert.equal(createDeviceCookies({ secret: `${SECRET}!`, days: 2, clock }).deviceOf(cookie, 'owner@example.com'), undefined, 'another key');
  assert.equal(createDeviceCookies({ secret: SECRET, days: 2, clock }).deviceOf(cookie, 'owner@example.com'), id, 'the same key on another instance');
  clock.advance(2 * 86_400_000 - 1000);
  assert.equal(devices.deviceOf(cookie, 'owner@example.com'), id, 'still within its days');
  clock.advance(1000);
  assert.equal(devices.deviceOf(cookie, 'owner@example.com'), undefined, 'expired');
});

test('without a configured key each process signs with a random one of its own', () => {
  const clock = new ManualClock();
  const one = createDeviceCookies({ secret: undefined, days: 1, clock });
  const cookie = one.issue('owner@example.com');
  assert.ok(one.deviceOf(cookie, 'owner@example.com') !== undefined);
  assert.equal(createDeviceCookies({ secret: undefined, days: 1, clock }).deviceOf(cookie, 'owner@example.com'), undefined);
});
