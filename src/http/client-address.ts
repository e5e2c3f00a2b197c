/**
 * Who the client is, by network address: the socket's peer, unless that peer is one of the
 * configured trusted proxies (`proxy.trustedProxies`), in which case the forwarding header they
 * maintain (`proxy.clientAddressHeader`) is read from the right: each trusted proxy appends
 * the address it received from, so the last address that is not a trusted proxy is the first
 * one nobody trusted vouches for, and everything left of it may be the client's own invention.
 * Only one header is read: a proxy that maintains X-Forwarded-For passes a client's own
 * `Forwarded` through untouched, and the other way round.
 *
 * The address is a limit's key, so it is normalised: an IPv4-mapped IPv6 address is IPv4, and
 * an IPv6 address stands for its /64, the block one subscriber is given, which otherwise would
 * hand an attacker 2^64 fresh addresses.
 */
import type { IncomingMessage } from 'node:http';
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import parseForwarded from 'forwarded-parse';
import ipaddr from 'ipaddr.js';
import type { Config } from '../config/schema.js';

/** True for an address (as the socket or a forwarding header gives it) of a trusted proxy. */
export type ProxyTrust = (address: string) => boolean;

export function createProxyTrust(trustedProxies: readonly string[]): ProxyTrust {
  if (trustedProxies.length === 0) return () => false;
  const trusted = new BlockList();
  for (const entry of trustedProxies) {
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const type = isIPv6(address) ? 'ipv6' : 'ipv4';
    if (bits === undefined) trusted.addAddress(address, type);
    else trusted.addSubnet(address, Number(bits), type);
  }
  return (address) => {
    const plain = unmapped(address);
    if (isIPv4(plain)) return trusted.check(plain, 'ipv4');
    return isIPv6(plain) && trusted.check(plain, 'ipv6');
  };
}

/** A ProxyTrust whose list a reload replaces (services.ts): each check reads the list in force. */
export interface ReplaceableProxyTrust {
  readonly isTrusted: ProxyTrust;
  replace(trustedProxies: readonly string[]): void;
}

export function createReplaceableProxyTrust(trustedProxies: readonly string[]): ReplaceableProxyTrust {
  let current = createProxyTrust(trustedProxies);
  return {
    isTrusted: (address) => current(address),
    replace(next) {
      current = createProxyTrust(next);
    },
  };
}

/** `isTrusted` defaults to the fixed list of `proxy.trustedProxies`; services.ts passes a replaceable one. */
export function createClientAddress(proxy: Pick<Config['proxy'], 'trustedProxies' | 'clientAddressHeader'>, isTrusted = createProxyTrust(proxy.trustedProxies)): (req: IncomingMessage) => string {
  const hop = createClientHop(proxy, isTrusted);
  return (req) => {
    const address = hop(req);
    return address.startsWith(INVALID) ? address : limitKey(address);
  };
}

/**
 * The client's own address by the same reading (IPv4-mapped IPv6 as IPv4, IPv6 whole, not its
 * /64), for a route's `sources` rules (proxy/policy.ts); undefined when the entry that names the
 * client is unreadable.
 */
export function createClientIp(proxy: Pick<Config['proxy'], 'trustedProxies' | 'clientAddressHeader'>, isTrusted = createProxyTrust(proxy.trustedProxies)): (req: IncomingMessage) => string | undefined {
  const hop = createClientHop(proxy, isTrusted);
  return (req) => {
    const address = hop(req);
    if (address.startsWith(INVALID)) return undefined;
    // How Node spells a mapped peer on a dual-stack socket: unmapped without ipaddr.js's parse (µs).
    if (address.startsWith('::ffff:') && isIPv4(address.slice(7))) return address.slice(7);
    return unmapped(address);
  };
}

/** Never the start of an address. */
const INVALID = 'invalid:';

/** The address as the socket or the forwarding header gives it, or `invalid:<entry>`. */
function createClientHop(proxy: Pick<Config['proxy'], 'clientAddressHeader'>, isTrusted: ProxyTrust): (req: IncomingMessage) => string {
  const header = proxy.clientAddressHeader;
  const hopAddress = header === 'forwarded' ? forwardedFor : plainHop;

  return (req) => {
    const peer = req.socket.remoteAddress ?? '';
    if (!isTrusted(peer)) return peer;
    const value = req.headers[header];
    if (typeof value !== 'string' || value === '') return peer;
    const hops = value.split(',');
    for (let i = hops.length - 1; i >= 0; i--) {
      const address = hopAddress(hops[i]!);
      // Left of an unreadable entry nothing can be trusted: the entry itself names the client.
      if (address === undefined) return `${INVALID}${hops[i]!.trim().slice(0, 64)}`;
      if (i === 0 || !isTrusted(address)) return address;
    }
    return peer;
  };
}

/** The key an address is limited by: IPv4 as is, IPv6 by its /64. */
export function limitKey(address: string): string {
  const plain = unmapped(address);
  if (!isIPv6(plain)) return plain;
  const parts = ipaddr.IPv6.parse(plain).parts;
  return `${parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
}

/** An X-Forwarded-For entry: an address, maybe with a port as some proxies add (`[v6]:p`, `v4:p`). */
function plainHop(entry: string): string | undefined {
  const hop = entry.trim();
  if (isIPv4(hop) || isIPv6(hop)) return hop;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(hop);
  if (bracketed !== null && isIPv6(bracketed[1]!)) return bracketed[1];
  const withPort = /^([\d.]+):\d{1,5}$/.exec(hop);
  if (withPort !== null && isIPv4(withPort[1]!)) return withPort[1];
  return undefined;
}

/** The `for` of one `Forwarded` element (RFC 7239 §4), when it is an address. */
function forwardedFor(element: string): string | undefined {
  let node: string | undefined;
  try {
    // Elements are joined with ", ": the space is not part of the next one.
    node = parseForwarded(element.trim())[0]?.for;
  } catch {
    return undefined;
  }
  return node === undefined ? undefined : plainHop(node);
}

/** An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, however spelt) as the IPv4 address it is. */
function unmapped(address: string): string {
  if (!isIPv6(address)) return address;
  const parsed = ipaddr.IPv6.parse(address);
  return parsed.isIPv4MappedAddress() ? parsed.toIPv4Address().toString() : address;
}
