/**
 * TLS-ALPN-01 (RFC 8737) on the main listener: a CA validating a name connects to port 443 with
 * that name (SNI) and `acme-tls/1` as its only ALPN protocol, and must be shown a self-signed
 * certificate carrying the SHA-256 of the key authorization. Node picks a certificate (SNI)
 * before it sees the ALPN offer, so the choice is made before TLS starts: each connection's
 * first record is read (client-hello.ts), and a ClientHello offering exactly `acme-tls/1` goes
 * to a TLS server of its own, which serves the certificate the order left in the challenge
 * store (this process's or Redis's: the CA may reach any instance) and closes once the
 * handshake is done (§3: no data is exchanged). Every other connection goes to the HTTPS
 * server with the bytes read, untouched (first-record.ts reads and routes).
 * test/tls/acme-gateway.test.ts holds it against pebble and against clients that are not CAs.
 */
import type { Socket } from 'node:net';
import { createSecureContext, createServer as createTlsServer } from 'node:tls';
import type { ChallengeStore } from '../state/acme/store.js';
import type { Logger } from '../telemetry/log.js';
import type { ClientHello } from './client-hello.js';

export const ACME_TLS_PROTOCOL = 'acme-tls/1';

/** The challenge store's name for the TLS-ALPN-01 certificate of `domain`: with a colon, which no HTTP-01 token has (so the redirect listener never serves it). */
export function alpnChallengeName(domain: string): string {
  return `tls-alpn-01:${domain.toLowerCase()}`;
}

/** What the challenge store holds under alpnChallengeName: the self-signed certificate and its throwaway key. */
export interface AlpnChallengeCertificate {
  certPem: string;
  keyPem: string;
}

/** A TLS-ALPN-01 validation's connection by its ClientHello (first-record.ts), or undefined for any other. */
export type AlpnRoute = (hello: ClientHello | undefined) => ((socket: Socket) => void) | undefined;

/** The TLS server that answers TLS-ALPN-01 validations, and the route that sends them to it. */
export function alpnChallengeRoute({ challenges, handshakeTimeoutMs, log }: { challenges: ChallengeStore; handshakeTimeoutMs: number; log: Logger }): AlpnRoute {
  const responder = createTlsServer({
    ALPNProtocols: [ACME_TLS_PROTOCOL],
    handshakeTimeout: handshakeTimeoutMs,
    SNICallback: (servername, done) => {
      challenges.get(alpnChallengeName(servername)).then((stored) => {
        if (stored === undefined) throw new Error('no TLS-ALPN-01 challenge waits for this name');
        const { certPem, keyPem } = JSON.parse(stored) as AlpnChallengeCertificate;
        return createSecureContext({ cert: certPem, key: keyPem });
      }).then((context) => done(null, context), (err: unknown) => done(err as Error, undefined));
    },
  }, (socket) => socket.end());
  responder.on('tlsClientError', (err: Error, socket: Socket) => {
    log.info({ err: err.message }, 'acme: a TLS-ALPN-01 handshake failed');
    socket.destroy();
  });
  const toResponder = (socket: Socket) => responder.emit('connection', socket);
  // RFC 8737 §3: the validator offers acme-tls/1 alone; a client offering more is no CA.
  return (hello) => hello?.protocols.length === 1 && hello.protocols[0] === ACME_TLS_PROTOCOL ? toResponder : undefined;
}
