/**
 * Where a webhook may be sent (SSRF): an endpoint's URL may not reach the gateway's own host or
 * its network (loopback, private, link-local, unique-local, CGNAT, cloud metadata, multicast,
 * anything not global unicast), in IPv4 or IPv6, an IPv4-mapped IPv6 address counted as the IPv4
 * address it is. The URL is read by WHATWG URL, which already turns the decimal, octal and hex
 * spellings of IPv4 (`2130706433`, `0177.0.0.1`, `0x7f.1`) into dotted quads; ipaddr.js names
 * each address's range. Checked at creation (a literal address) and again at each delivery
 * against every address the name resolves to then (DNS rebinding): the delivery connects to the
 * checked address, with the name as Host and SNI, so what was checked is what is reached.
 * The operator may allow private networks, some CIDRs, or plain http (tests, in-house hooks).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

export interface WebhookNetworkPolicy {
  /** Any address may be reached (loopback included). */
  allowPrivateNetworks: boolean;
  /** Ranges reachable though not global ("10.1.0.0/16", "fd00::/8"). */
  allowCidrs: readonly string[];
  /** http:// as well as https://. */
  allowHttp: boolean;
}

export type Lookup = (hostname: string) => Promise<readonly { address: string; family: number }[]>;

export const systemLookup: Lookup = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** Why a URL is refused (a sentence for the owner), or undefined: acceptable as written. */
export type Refusal = string | undefined;

/** The URL's address as ipaddr.js reads it, or undefined for a name. */
function literalOf(hostname: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return ipaddr.isValid(bare) && (ipaddr.IPv4.isValidFourPartDecimal(bare) || bare.includes(':')) ? ipaddr.parse(bare) : undefined;
}

/** Whether one address may be reached under the policy. */
export function addressAllowed(address: string, policy: WebhookNetworkPolicy): boolean {
  if (policy.allowPrivateNetworks) return true;
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  for (const cidr of policy.allowCidrs) {
    const [range, bits] = ipaddr.parseCIDR(cidr);
    if (range.kind() === parsed.kind() && parsed.match(range, bits)) return true;
  }
  // Only global unicast: every range ipaddr.js names otherwise (private, loopback, linkLocal,
  // carrierGradeNat, uniqueLocal, 6to4, teredo, rfc6052 …) may lead inside.
  return parsed.range() === 'unicast';
}

/** Checks a URL as an owner gives it: its form, its scheme, a literal address. */
export function checkWebhookUrl(raw: string, policy: WebhookNetworkPolicy): Refusal {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url is not an absolute URL';
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) return 'url must use https';
  if (url.username !== '' || url.password !== '') return 'url may not carry credentials';
  if (url.hash !== '') return 'url may not carry a fragment';
  const literal = literalOf(url.hostname);
  if (literal !== undefined && !addressAllowed(literal.toString(), policy)) return 'url points at a private or reserved address';
  if (literal === undefined && (url.hostname === 'localhost' || url.hostname.endsWith('.localhost')) && !policy.allowPrivateNetworks) return 'url points at a private or reserved address';
  return undefined;
}

/** The checked address a delivery connects to, or the refusal. */
export type Resolved = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };

/**
 * Resolves the URL's host at delivery time and checks every address it gives (one bad answer
 * refuses all: a rebinding name answers a good and a bad address in turn).
 */
export async function resolveForDelivery(url: URL, policy: WebhookNetworkPolicy, lookup: Lookup = systemLookup): Promise<Resolved> {
  const refused = checkWebhookUrl(url.href, policy);
  if (refused !== undefined) return { ok: false, reason: refused };
  const literal = literalOf(url.hostname);
  if (literal !== undefined) return { ok: true, address: literal.toString(), family: literal.kind() === 'ipv4' ? 4 : 6 };
  let answers: readonly { address: string; family: number }[];
  try {
    answers = await lookup(url.hostname);
  } catch {
    return { ok: false, reason: 'the host name does not resolve' };
  }
  if (answers.length === 0) return { ok: false, reason: 'the host name does not resolve' };
  if (answers.some((a) => !addressAllowed(a.address, policy))) return { ok: false, reason: 'the host name resolves to a private or reserved address' };
  const first = answers[0]!;
  return { ok: true, address: first.address, family: first.family === 6 ? 6 : 4 };
}
