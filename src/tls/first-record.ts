/**
 * The first bytes of each connection to the TLS listener, read before TLS starts, to send the
 * connection where it belongs:
 *
 * - a plain-HTTP request (`http://` where `https://` was meant: its first byte is a letter,
 *   never a TLS record's) is answered `400` in the envelope, saying to use https, and closed,
 *   where a TLS server would only close it (nginx answers so too);
 * - with ACME on, a TLS-ALPN-01 validation (alpn-challenge.ts), told by its ClientHello;
 * - everything else goes to the HTTPS server, with the bytes read, untouched.
 *
 * Without ACME only the first chunk is looked at (a handshake record's first byte is 0x16);
 * with it, one whole record. Reading is bounded: one record (16 KiB) within the handshake
 * timeout, as the HTTPS server's own handshake is.
 */
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { readClientHello, recordLength, type ClientHello } from './client-hello.js';

/** Where a connection goes: a handler of its own, or undefined for the HTTPS server. */
export type FirstRecordRoute = (socket: Socket) => void;

export interface FirstRecordOptions {
  handshakeTimeoutMs: number;
  /** Answers a plain-HTTP request on the TLS port (and closes it). */
  plainHttp: FirstRecordRoute;
  /** A handler for a TLS connection by its ClientHello (ACME's TLS-ALPN-01), or none: then only the first byte is read. */
  byHello?: (hello: ClientHello | undefined) => FirstRecordRoute | undefined;
}

export interface FirstRecordScreen {
  /** Cuts the connections whose first bytes are still awaited: no request was begun on them, and the HTTPS server does not know them. */
  cutWaiting(): void;
}

/** A request line starts with a method: an upper-case letter, which no TLS record type is. */
function isPlainHttp(head: Buffer): boolean {
  return head.length > 0 && head[0]! >= 0x41 && head[0]! <= 0x5a;
}

export function screenFirstRecord(server: HttpsServer, { handshakeTimeoutMs, plainHttp, byHello }: FirstRecordOptions): FirstRecordScreen {
  const toHttps = server.listeners('connection') as FirstRecordRoute[];
  server.removeAllListeners('connection');
  const waiting = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    let head: Buffer = Buffer.alloc(0);
    const onError = () => socket.destroy();
    const onTimeout = () => socket.destroy();
    const handOver = (route: FirstRecordRoute | undefined) => {
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('timeout', onTimeout);
      socket.setTimeout(0);
      waiting.delete(socket);
      socket.pause();
      socket.unshift(head);
      if (route !== undefined) route(socket);
      else for (const listener of toHttps) listener.call(server, socket);
    };
    const onData = (chunk: Buffer) => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      if (isPlainHttp(head)) return handOver(plainHttp);
      if (byHello === undefined) return handOver(undefined);
      const length = recordLength(head);
      if (length === undefined || head.length < length) return;
      handOver(byHello(length === 0 ? undefined : readClientHello(head)));
    };
    waiting.add(socket);
    socket.once('close', () => waiting.delete(socket));
    socket.on('error', onError);
    socket.setTimeout(handshakeTimeoutMs);
    socket.on('timeout', onTimeout);
    socket.on('data', onData);
  });
  return {
    cutWaiting() {
      for (const socket of waiting) socket.destroy();
    },
  };
}
