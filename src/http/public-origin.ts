/**
 * The origin a client used to reach the gateway (`https://api.example.com`), for URLs the
 * gateway hands out about itself (the OAuth metadata, docs/oauth.md): the configured one when
 * set; otherwise the request's own, read the way http/client-address.ts reads the client's
 * address. From a trusted proxy (`proxy.trustedProxies`), the scheme and host it names: the
 * first `Forwarded` element's `proto` and `host` when `proxy.clientAddressHeader` is
 * `forwarded`, else the first X-Forwarded-Proto and X-Forwarded-Host entries (the outermost
 * proxy's, which saw the client's request). From anyone else, the connection's scheme and the
 * Host header (`:authority` on HTTP/2): a client that sends another Host is only told URLs of
 * its own making. A value that is not a plain scheme and host is ignored, never echoed.
 */
import type { IncomingMessage } from 'node:http';
import parseForwarded from 'forwarded-parse';
import type { Config } from '../config/schema.js';
import { InvalidRequest } from '../errors/errors.js';
import type { ProxyTrust } from './client-address.js';

/** A host as URLs spell it: a name or IPv4 address, or an IPv6 literal in brackets, and an optional port. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

export type PublicOrigin = (req: IncomingMessage) => string;

export function createPublicOrigin(configured: string | undefined, proxy: Pick<Config['proxy'], 'clientAddressHeader'>, isTrusted: ProxyTrust): PublicOrigin {
  if (configured !== undefined) return () => configured;
  const forwarded = proxy.clientAddressHeader === 'forwarded' ? fromForwarded : fromXForwarded;
  return (req) => {
    const own = { proto: (req.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http', host: req.headers[':authority'] ?? req.headers.host };
    const named = isTrusted(req.socket.remoteAddress ?? '') ? forwarded(req) : {};
    const proto = named.proto === 'http' || named.proto === 'https' ? named.proto : own.proto;
    const host = typeof named.host === 'string' && HOST.test(named.host) ? named.host : own.host;
    const url = typeof host === 'string' && HOST.test(host) ? URL.parse(`${proto}://${host}`) : null;
    if (url === null) throw new InvalidRequest('The request names no valid Host.');
    return url.origin;
  };
}

interface Named {
  proto?: string | undefined;
  host?: string | undefined;
}

function fromXForwarded(req: IncomingMessage): Named {
  return { proto: firstEntry(req.headers['x-forwarded-proto'])?.toLowerCase(), host: firstEntry(req.headers['x-forwarded-host']) };
}

function fromForwarded(req: IncomingMessage): Named {
  const value = req.headers.forwarded;
  if (typeof value !== 'string') return {};
  try {
    const first = parseForwarded(value)[0];
    return { proto: first?.proto?.toLowerCase(), host: first?.host };
  } catch {
    return {};
  }
}

function firstEntry(value: string | string[] | undefined): string | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  return text?.split(',')[0]?.trim();
}
