/**
 * What crosses the gateway in headers, in both directions. http-proxy-3 copies every header
 * it is given and removes only `Trailer`; the policy is ours, computed from the raw header
 * list (every copy of every header, whatever its case) rather than Node's folded view.
 *
 * Never forwarded, either way: hop-by-hop headers (RFC 9110 §7.6.1) and every header named in
 * `Connection`. Towards the backend also: `Expect` (the gateway already answered it), the
 * client's framing (re-declared below), forwarding headers from untrusted peers, the identity
 * header names, the client-certificate ones included, on every route whatever it sends (so a
 * client cannot speak for the gateway or claim a certificate), and `Authorization` unless the route
 * forwards it. Then the gateway adds its own: identity, forwarding, Host, and framing.
 *
 * Trace context (`traceparent`, `tracestate`) follows the forwarding headers' rule: a trusted
 * proxy's is kept, anyone else's removed, so no client can join the backends' traces to its own
 * or choose their sampling. With tracing on (telemetry/tracing.ts) the backend instead gets the
 * gateway's span as its parent, in a trace continued only from a trusted proxy's.
 *
 * Framing is re-declared from what Node's parser read, never copied: a chunked request stays
 * chunked whatever its method. (http-proxy-3's `deleteLength` pass turns a chunked DELETE or
 * OPTIONS into `Content-Length: 0` while still piping its body, so a pooled backend connection
 * would read that body as a second request; the proxy re-applies these headers after it.)
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeader, OutgoingHttpHeaders } from 'node:http';
import { isIPv4, isIPv6 } from 'node:net';
import type { ClientCertificate } from '../auth/client-certificate.js';
import { createProxyTrust, type ProxyTrust } from '../http/client-address.js';
import type { Config } from '../config/schema.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { ClaimHeaders } from './claim-headers.js';
import type { IdentityParts } from './routes.js';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'proxy-authenticate', 'proxy-authorization'];
/** Set by the gateway itself, never copied from the client. */
const REPLACED = ['host', 'content-length', 'expect', 'forwarded', 'x-forwarded-for', 'x-forwarded-proto',
  'x-forwarded-host', 'x-forwarded-port', 'x-real-ip'];
const HOP_BY_HOP_SET: ReadonlySet<string> = new Set(HOP_BY_HOP);
const FORWARDING: ReadonlySet<string> = new Set(['forwarded', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host']);
/** W3C Trace Context: kept from a trusted proxy only, replaced while tracing is on. */
const TRACE_CONTEXT = ['traceparent', 'tracestate'];
const TRACE_CONTEXT_SET: ReadonlySet<string> = new Set(TRACE_CONTEXT);

export interface Caller {
  accountId: string;
  keyId: string;
  tokenId: string;
  scopes: readonly string[];
  /** Only a trusted issuer's token names roles (its `rolesClaim`). */
  roles?: readonly string[] | undefined;
  /** A DPoP-bound token's key thumbprint (`cnf.jkt`), its proof checked for this call. */
  dpopThumbprint?: string | undefined;
}

export interface UpstreamHeaderInput {
  /** The identity headers the route sends for this caller. */
  identity: IdentityParts;
  caller: Caller | undefined;
  requestId: string;
  assertion: string | undefined;
  forwardAuthorization: boolean;
  /** The Host to send. */
  host: string;
  /** A WebSocket handshake: Connection/Upgrade are kept as `upgrade`/`websocket`. */
  websocket: boolean;
  /** Sec-WebSocket-Protocol without the browser token entry, or undefined to drop it. */
  webSocketProtocol?: string | undefined;
  /** The verified client certificate to name to the backend (routes with `clientCertificate` only). */
  certificate?: ClientCertificate | undefined;
  /** The route's claim headers (claim-headers.ts): removed from the client's, filled from `claims`. */
  claimHeaders?: ClaimHeaders | undefined;
  /** The caller's verified token claims (none for an anonymous caller). */
  claims?: Readonly<Record<string, unknown>> | undefined;
}

/**
 * `isTrusted`: whose forwarding headers (and trace context) are kept; by default the fixed list
 * of `proxy.trustedProxies`. `tracing`: given while it is on; the backend then gets the
 * gateway's span as its parent.
 */
export function createHeaderPolicy(proxy: Config['proxy'], isTrusted: ProxyTrust = createProxyTrust(proxy.trustedProxies), tracing?: Tracing) {
  const names = proxy.identityHeaders;
  const identityNames = Object.values(names).map((name) => name.toLowerCase());
  const baseDrop = new Set([...HOP_BY_HOP, ...REPLACED, ...TRACE_CONTEXT, ...identityNames]);
  const xForwarded = proxy.forwardedHeaders !== 'forwarded';
  const forwarded = proxy.forwardedHeaders !== 'x-forwarded';

  return {
    /** The headers the backend gets for this request. */
    upstream(req: IncomingMessage, input: UpstreamHeaderInput): OutgoingHttpHeaders {
      const peer = req.socket.remoteAddress ?? '';
      const trustPeer = isTrusted(peer);
      const named = connectionNames(req.headers.connection);
      const claimNames = input.claimHeaders?.names;

      const out: OutgoingHttpHeaders = {};
      // Forwarding headers of a trusted peer, extended below rather than copied.
      const kept: Record<string, string[]> = {};
      const raw = req.rawHeaders;
      for (let i = 0; i < raw.length; i += 2) {
        const name = raw[i]!.toLowerCase();
        const value = raw[i + 1]!;
        // HTTP/2's pseudo-headers (:method, :path, :authority, :scheme) are the request line,
        // which the backend gets as such.
        if (name.charCodeAt(0) === 0x3a) continue;
        if (baseDrop.has(name)) {
          if (trustPeer && (FORWARDING.has(name) || TRACE_CONTEXT_SET.has(name))) (kept[name] ??= []).push(value);
          continue;
        }
        // The DPoP proof goes with the token it is made for (RFC 9449 §4.2 `ath`): useless without it.
        if (named?.has(name) === true || claimNames?.has(name) === true || ((name === 'authorization' || name === 'dpop') && !input.forwardAuthorization)
          || (name === 'sec-websocket-protocol' && input.websocket)) continue;
        // HTTP/2 may split Cookie into one field per cookie; HTTP/1.1 has one line (RFC 9113 §8.2.3).
        if (name === 'cookie' && out.cookie !== undefined) out.cookie = `${String(out.cookie)}; ${value}`;
        else addHeader(out, name, value);
      }

      out.host = input.host;
      if (req.headers['transfer-encoding'] !== undefined) out['transfer-encoding'] = 'chunked';
      else if (req.headers['content-length'] !== undefined) out['content-length'] = req.headers['content-length'];
      if (input.websocket) {
        out.connection = 'upgrade';
        out.upgrade = 'websocket';
        if (input.webSocketProtocol !== undefined) out['sec-websocket-protocol'] = input.webSocketProtocol;
      }

      const clientHost = req.headers.host ?? '';
      // The scheme the client used: https when the gateway terminates TLS (a WebSocket
      // handshake too); a TLS terminator in front is a trusted proxy and says so itself.
      const proto = (req.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http';
      if (xForwarded) {
        out['x-forwarded-for'] = append(kept['x-forwarded-for'], peer.startsWith('::ffff:') ? peer.slice(7) : peer);
        out['x-forwarded-proto'] = kept['x-forwarded-proto']?.[0] ?? proto;
        const forwardedHost = kept['x-forwarded-host']?.[0] ?? clientHost;
        if (forwardedHost !== '') out['x-forwarded-host'] = forwardedHost;
      }
      if (forwarded) {
        const host = clientHost === '' ? '' : `;host=${quote(clientHost)}`;
        out.forwarded = append(kept.forwarded, `for=${forwardedNode(peer)}${host};proto=${proto}`);
      }

      if (tracing !== undefined) tracing.inject(req, out);
      else if (trustPeer) {
        // Tracing off: a trusted proxy's trace context passes as it came.
        if (kept.traceparent !== undefined) out.traceparent = kept.traceparent;
        if (kept.tracestate !== undefined) out.tracestate = kept.tracestate;
      }

      addIdentityHeaders(out, names, input);
      return out;
    },

    /**
     * The backend's response headers as the client gets them (raw order and repeats kept),
     * except X-Request-Id: the gateway's own stays, the one in its log and the caller's hands.
     * `connection`: the answer's Connection values, joined as node:http joins them.
     */
    downstream(connection: string | undefined, rawHeaders: readonly string[]): OutgoingHttpHeaders {
      const named = connectionNames(connection);
      const out: OutgoingHttpHeaders = {};
      for (let i = 0; i < rawHeaders.length; i += 2) {
        const lower = rawHeaders[i]!.toLowerCase();
        if (HOP_BY_HOP_SET.has(lower) || named?.has(lower) === true || lower === 'x-request-id') continue;
        addHeader(out, lower, rawHeaders[i + 1]!);
      }
      return out;
    },
  };
}

/** What the identity headers are made of: for a backend (upstream) and for a forward-auth answer (decision.ts). */
export type IdentityHeaderInput = Pick<UpstreamHeaderInput, 'identity' | 'caller' | 'requestId' | 'assertion' | 'certificate' | 'claimHeaders' | 'claims'>;

/** The gateway's word on who calls: the identity headers the route sends, its claim headers, the certificate. */
export function addIdentityHeaders(out: OutgoingHttpHeaders, names: Config['proxy']['identityHeaders'], input: IdentityHeaderInput): void {
  const { caller, identity } = input;
  if (identity.request) out[names.request.toLowerCase()] = input.requestId;
  if (caller !== undefined) {
    if (identity.account) out[names.account.toLowerCase()] = caller.accountId;
    if (identity.key) out[names.key.toLowerCase()] = caller.keyId;
    if (identity.token) out[names.token.toLowerCase()] = caller.tokenId;
    if (identity.scopes && caller.scopes.length > 0) out[names.scopes.toLowerCase()] = caller.scopes.join(' ');
    if (identity.roles && caller.roles !== undefined && caller.roles.length > 0) out[names.roles.toLowerCase()] = caller.roles.join(' ');
    // Like the certificate's, whatever the route's `identity`: the backend may check the binding itself.
    if (caller.dpopThumbprint !== undefined) out[names.dpopThumbprint.toLowerCase()] = caller.dpopThumbprint;
    if (input.claimHeaders !== undefined) {
      for (const [name, value] of input.claimHeaders.valuesFor(input.claims)) out[name] = value;
    }
  }
  if (input.assertion !== undefined) out[names.assertion.toLowerCase()] = input.assertion;
  if (input.certificate !== undefined) {
    out[names.clientCertSubject.toLowerCase()] = input.certificate.subject;
    out[names.clientCertFingerprint.toLowerCase()] = input.certificate.sha256;
  }
}

/** Adds one header line; repeats stay separate lines (Node writes each value of an array as its own). */
function addHeader(out: Record<string, OutgoingHttpHeader | undefined>, name: string, value: string): void {
  const previous = out[name];
  if (previous === undefined) out[name] = value;
  else if (Array.isArray(previous)) previous.push(value);
  else out[name] = [String(previous), value];
}

/** The headers named in Connection (RFC 9110 §7.6.1), when it names any beyond the usual. */
function connectionNames(connection: string | undefined): Set<string> | undefined {
  if (connection === undefined || /^\s*(?:keep-alive|close)\s*$/i.test(connection)) return undefined;
  const out = new Set<string>();
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '') out.add(name);
  }
  return out;
}

function append(previous: string[] | undefined, value: string): string {
  return previous === undefined ? value : `${previous.join(', ')}, ${value}`;
}

/** An RFC 7239 node: IPv6 in brackets and quotes. */
function forwardedNode(peer: string): string {
  if (peer.startsWith('::ffff:') && isIPv4(peer.slice(7))) return peer.slice(7);
  return isIPv6(peer) ? `"[${peer}]"` : peer || 'unknown';
}

/** A token, or a quoted-string when it holds anything else (a port's ":", for one). */
function quote(value: string): string {
  return /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value) ? value : `"${value.replace(/["\\]/g, '\\$&')}"`;
}
