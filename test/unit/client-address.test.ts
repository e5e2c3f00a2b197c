/**
 * createClientAddress and limitKey (src/http/client-address.ts): who a request is by network
 * address, as a limit's key. Requests are plain objects with what the function reads
 * (`socket.remoteAddress` and `headers`, lowercase names as Node gives them).
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { createClientAddress, limitKey } from '../../src/http/client-address.js';

function req(remoteAddress: string | undefined, headers: Record<string, string> = {}): IncomingMessage {
  return { socket: { remoteAddress }, headers } as unknown as IncomingMessage;
}

const TRUSTED = ['10.0.0.0/8', '192.0.2.7', '2001:db8:ffff::/48'];
const xff = createClientAddress({ trustedProxies: TRUSTED, clientAddressHeader: 'x-forwarded-for' });
const fwd = createClientAddress({ trustedProxies: TRUSTED, clientAddressHeader: 'forwarded' });

test('limitKey: IPv4 as is, IPv6 by its /64, IPv4-mapped IPv6 as IPv4', () => {
  assert.equal(limitKey('1.2.3.4'), '1.2.3.4');
  assert.equal(limitKey('::ffff:1.2.3.4'), '1.2.3.4');
  assert.equal(limitKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  assert.equal(limitKey('2001:DB8:1:2::1'), '2001:db8:1:2::/64', 'hex case does not matter');
  assert.equal(limitKey('2001:db8::1'), '2001:db8:0:0::/64');
  // Two addresses in one /64 are one key; the neighbouring /64 is another.
  assert.equal(limitKey('2001:db8:1:2::1'), limitKey('2001:db8:1:2:ffff:ffff:ffff:ffff'));
  assert.notEqual(limitKey('2001:db8:1:2::1'), limitKey('2001:db8:1:3::1'));
});

test('an untrusted peer is the client: X-Forwarded-For and Forwarded are ignored', () => {
  const headers = { 'x-forwarded-for': '6.6.6.6', forwarded: 'for=6.6.6.6' };
  assert.equal(xff(req('203.0.113.9', headers)), '203.0.113.9');
  assert.equal(fwd(req('203.0.113.9', headers)), '203.0.113.9');
  assert.equal(xff(req('11.0.0.1', headers)), '11.0.0.1', 'just outside 10.0.0.0/8');
  assert.equal(xff(req('192.0.2.8', headers)), '192.0.2.8', 'a single trusted address is not a range');
});

test('an untrusted IPv6 peer is keyed by its /64, an IPv4-mapped one by its IPv4', () => {
  assert.equal(xff(req('2001:db8:aa:bb::1234', { 'x-forwarded-for': '6.6.6.6' })), '2001:db8:aa:bb::/64');
  assert.equal(xff(req('2001:db8:aa:bb:1::1')), xff(req('2001:db8:aa:bb:2::2')));
  assert.notEqual(xff(req('2001:db8:aa:bb::1')), xff(req('2001:db8:aa:bc::1')));
  assert.equal(xff(req('::ffff:203.0.113.9', { 'x-forwarded-for': '6.6.6.6' })), '203.0.113.9');
});

test('a trusted peer without the header is the client', () => {
  assert.equal(xff(req('10.1.1.1')), '10.1.1.1');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '' })), '10.1.1.1');
  assert.equal(fwd(req('10.1.1.1')), '10.1.1.1');
});

test('trusted peer: the rightmost X-Forwarded-For entry that is not a trusted proxy', () => {
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '1.2.3.4' })), '1.2.3.4');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '5.5.5.5, 1.2.3.4' })), '1.2.3.4', 'the rightmost untrusted, not the leftmost');
});

test('trusted peer: several trusted hops are skipped', () => {
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '1.2.3.4, 10.9.9.9, 192.0.2.7, 10.2.2.2' })), '1.2.3.4');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '1.2.3.4,10.2.2.2' })), '1.2.3.4', 'no space after the comma');
  assert.equal(xff(req('2001:db8:ffff:1::1', { 'x-forwarded-for': '1.2.3.4, 2001:db8:ffff:2::2' })), '1.2.3.4', 'trusted IPv6 range, peer and hop');
  assert.equal(xff(req('::ffff:10.1.1.1', { 'x-forwarded-for': '1.2.3.4, ::ffff:10.2.2.2' })), '1.2.3.4', 'IPv4-mapped trusted proxies are trusted');
});

test('trusted peer: when every entry is a trusted proxy, the leftmost is the client', () => {
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '10.0.0.5, 10.0.0.6, 192.0.2.7' })), '10.0.0.5');
});

test('a client-supplied leftmost entry never wins once a trusted proxy appended the real one', () => {
  // The client sent "X-Forwarded-For: 6.6.6.6, 10.0.0.1"; the trusted proxy appended 198.51.100.20.
  for (const forged of ['6.6.6.6', '6.6.6.6, 10.0.0.1', '10.0.0.1', 'garbage', '::1']) {
    assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': `${forged}, 198.51.100.20` })), '198.51.100.20', `forged: ${forged}`);
  }
});

test('ports in X-Forwarded-For entries are dropped', () => {
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '1.2.3.4:80' })), '1.2.3.4');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '[2001:db8:5:6::1]:443' })), '2001:db8:5:6::/64');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '[2001:db8:5:6::1]' })), '2001:db8:5:6::/64');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '1.2.3.4:80, 10.2.2.2:8080' })), '1.2.3.4', 'a trusted hop with a port is still trusted');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '1.2.3.4, [2001:db8:ffff::9]:1' })), '1.2.3.4');
});

test('X-Forwarded-For hops: IPv6 by its /64, IPv4-mapped as IPv4', () => {
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '2001:db8:1:2::a' })), '2001:db8:1:2::/64');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '2001:db8:1:2::a' })), xff(req('10.1.1.1', { 'x-forwarded-for': '2001:db8:1:2:ffff::b' })));
  assert.notEqual(xff(req('10.1.1.1', { 'x-forwarded-for': '2001:db8:1:2::a' })), xff(req('10.1.1.1', { 'x-forwarded-for': '2001:db8:1:3::a' })));
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '::ffff:1.2.3.4' })), '1.2.3.4');
});

test('an unreadable entry, met before any untrusted address, names the client as invalid:<entry>', () => {
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': 'not-an-ip' })), 'invalid:not-an-ip');
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': '1.2.3.4, unknown, 10.2.2.2' })), 'invalid:unknown', 'nothing left of it is trusted');
  const long = xff(req('10.1.1.1', { 'x-forwarded-for': 'x'.repeat(500) }));
  assert.equal(long, `invalid:${'x'.repeat(64)}`, 'the entry is cut to 64 characters');
  // Right of an untrusted address the garbage is never reached.
  assert.equal(xff(req('10.1.1.1', { 'x-forwarded-for': 'garbage, 1.2.3.4' })), '1.2.3.4');
});

test('forwarded mode: for= of the rightmost untrusted element; X-Forwarded-For ignored', () => {
  const only = (forwarded: string) => fwd(req('10.1.1.1', { forwarded, 'x-forwarded-for': '6.6.6.6' }));
  assert.equal(only('for=1.2.3.4'), '1.2.3.4');
  assert.equal(only('for="[2001:db8:cafe:1::17]:4711"'), '2001:db8:cafe:1::/64', 'quoted IPv6 with a port');
  assert.equal(only('for="1.2.3.4:8080";proto=https;by=10.1.1.1'), '1.2.3.4', 'quoted IPv4 with a port, other parameters');
  assert.equal(only('For=1.2.3.4'), '1.2.3.4', 'parameter names are case-insensitive');
  assert.equal(only('for=unknown'), 'invalid:for=unknown');
  assert.equal(only('for=_hidden'), 'invalid:for=_hidden', 'an obfuscated node is no address');
  assert.equal(only('proto=https'), 'invalid:proto=https', 'an element without for=');
  // Without a Forwarded header the peer is the client, whatever X-Forwarded-For says.
  assert.equal(fwd(req('10.1.1.1', { 'x-forwarded-for': '6.6.6.6' })), '10.1.1.1');
});

test('x-forwarded-for mode ignores Forwarded', () => {
  assert.equal(xff(req('10.1.1.1', { forwarded: 'for=6.6.6.6', 'x-forwarded-for': '1.2.3.4' })), '1.2.3.4');
  assert.equal(xff(req('10.1.1.1', { forwarded: 'for=6.6.6.6' })), '10.1.1.1');
});

test('forwarded mode: several elements without spaces, trusted ones skipped', () => {
  assert.equal(fwd(req('10.1.1.1', { forwarded: 'for=6.6.6.6,for=1.2.3.4,for=10.2.2.2' })), '1.2.3.4');
  assert.equal(fwd(req('10.1.1.1', { forwarded: 'for=10.0.0.5,for=10.2.2.2' })), '10.0.0.5', 'all trusted: the leftmost');
});

// The RFC 7239 §4 form (and what Node makes of two Forwarded lines): elements joined by ", ".
test('forwarded mode: elements separated by ", " as RFC 7239 writes them', () => {
  assert.equal(fwd(req('10.1.1.1', { forwarded: 'for=192.0.2.43, for=198.51.100.17' })), '198.51.100.17');
  assert.equal(fwd(req('10.1.1.1', { forwarded: 'for=1.2.3.4, for=10.2.2.2' })), '1.2.3.4', 'a trusted hop is skipped');
  assert.equal(fwd(req('10.1.1.1', { forwarded: 'for=6.6.6.6, for="[2001:db8:cafe:1::17]:4711"' })), '2001:db8:cafe:1::/64');
});

// Every spelling of an IPv4-mapped address is the IPv4 client: otherwise they would all share
// the one /64 `0:0:0:0::/64`.
test('IPv4-mapped addresses in any spelling are keyed as IPv4', () => {
  assert.equal(limitKey('::FFFF:1.2.3.4'), '1.2.3.4');
  assert.equal(limitKey('0:0:0:0:0:ffff:1.2.3.4'), '1.2.3.4');
  assert.equal(limitKey('::ffff:102:304'), '1.2.3.4');
  assert.notEqual(limitKey('::FFFF:1.2.3.4'), limitKey('::FFFF:5.6.7.8'));
});
