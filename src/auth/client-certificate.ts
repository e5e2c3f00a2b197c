/**
 * The client's TLS certificate as a credential (mTLS, docs/tls.md "Client certificates"). The
 * main listener asks every client for one (tls.clientCaFile) and lets the handshake finish
 * without it, so what a request presented is read here, per request, from its socket: a
 * certificate counts only when the handshake verified it against the configured CAs
 * (`socket.authorized`); one the CAs did not sign, an expired one, or none at all is no
 * certificate. Not cached per connection: a TLS 1.2 renegotiation may change the peer.
 *
 * Its SHA-256 (of the DER) is what binds things to it: as hex to backends
 * (X-Client-Cert-Sha256) and to API keys, as base64url in access tokens (RFC 8705 §3.1,
 * `cnf.x5t#S256`). test/tls/mtls.test.ts holds it against real certificates.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { PeerCertificate, TLSSocket } from 'node:tls';

export interface ClientCertificate {
  /** The subject as an RFC 4514 string (most specific first), made safe for a header: see formatSubject. */
  subject: string;
  /** SHA-256 of the certificate's DER: 64 lowercase hex digits. */
  sha256: string;
  /** The same digest in base64url: the value of `cnf.x5t#S256` (RFC 8705 §3.1). */
  thumbprint: string;
}

/** The verified client certificate of `req`'s connection, or undefined (plain HTTP, none, or not verified). */
export function verifiedClientCertificate(req: IncomingMessage): ClientCertificate | undefined {
  const socket = req.socket as Partial<TLSSocket>;
  if (socket.authorized !== true || typeof socket.getPeerCertificate !== 'function') return undefined;
  const peer = socket.getPeerCertificate(false);
  if (peer === null || peer.raw === undefined || peer.raw.length === 0) return undefined;
  const digest = createHash('sha256').update(peer.raw).digest();
  return { subject: formatSubject(peer.subject), sha256: digest.toString('hex'), thumbprint: digest.toString('base64url') };
}

/** RFC 4514 §2.4: the characters escaped with a backslash in an attribute value. */
const SPECIAL = /[,+"\\<>;=]/g;

/**
 * `CN=client,O=Example,C=DE`: the attributes most specific first (RFC 4514 reverses the
 * certificate's order), a repeated attribute once per value. A header carries text only, so
 * on top of RFC 4514's escapes every character outside printable ASCII, and "%" itself, is
 * percent-encoded as UTF-8 (`Zoë` is `Zo%C3%AB`): no control character or line break of a
 * certificate reaches a backend's header parser, and the value decodes without loss.
 */
export function formatSubject(subject: PeerCertificate['subject'] | undefined): string {
  if (subject === undefined || subject === null) return '';
  const parts: string[] = [];
  for (const [name, value] of Object.entries(subject)) {
    for (const one of Array.isArray(value) ? value : [value]) parts.push(`${name}=${escapeValue(String(one))}`);
  }
  return parts.reverse().join(',');
}

function escapeValue(value: string): string {
  let escaped = value.replace(SPECIAL, '\\$&');
  if (escaped.startsWith('#') || escaped.startsWith(' ')) escaped = `\\${escaped}`;
  if (escaped.endsWith(' ')) escaped = `${escaped.slice(0, -1)}\\ `;
  // Buffer.from never throws (a lone surrogate becomes U+FFFD), unlike encodeURIComponent.
  return escaped.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => [...Buffer.from(c, 'utf8')].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
}
