/**
 * Refuses requests whose framing or target is ambiguous, before any route sees them. Node's
 * parser already refuses Content-Length together with Transfer-Encoding and repeated lengths;
 * these are the cases it lets through, where two HTTP implementations could disagree about
 * where a request ends or whom it is for (the root of request smuggling):
 *
 * - Transfer-Encoding other than exactly `chunked`: Node reads `gzip, chunked` as plain
 *   chunked and ignores the rest; RFC 9112 §6.1 asks for 501 for a coding we do not apply.
 * - Transfer-Encoding on an HTTP/1.0 request: RFC 9112 §6.1 says to treat the framing as
 *   faulty, so 400 and the connection closes.
 * - Host missing (HTTP/1.1), repeated, or not a host[:port]: RFC 9112 §3.2 requires 400.
 *   (Node's own missing-Host check is turned off in server.ts so that this answer, too, is
 *   the envelope.)
 *
 * Run for every request as a step of the edge (http/edge.ts); test/http/request-head.test.ts
 * holds these rules.
 */
import type { IncomingMessage } from 'node:http';
import { InvalidRequest, UnsupportedTransferCoding } from '../../errors/errors.js';
import { countHeader } from '../../util/raw-headers.js';

const CLOSE = { Connection: 'close' };

/** reg-name or IPv4, or a bracketed IPv6 literal, then an optional port. */
const HOST = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=%]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

/** Throws the 400/501 for a request head with ambiguous framing or target (also for upgrades). */
export function checkRequestHead(req: IncomingMessage): void {
  const transferEncoding = req.headers['transfer-encoding'];
  if (transferEncoding !== undefined) {
    // Framing we refuse cannot tell where the next request starts: the connection ends too.
    if (req.httpVersionMinor === 0 && req.httpVersionMajor === 1) {
      throw new InvalidRequest('Transfer-Encoding is not allowed in an HTTP/1.0 request.', { headers: CLOSE });
    }
    if (transferEncoding.trim().toLowerCase() !== 'chunked') throw new UnsupportedTransferCoding();
  }
  const hosts = countHeader(req.rawHeaders, 'host');
  const host = req.headers.host;
  if (hosts > 1) throw new InvalidRequest('The Host header may be sent once.');
  if (hosts === 0 ? req.httpVersionMinor >= 1 : !HOST.test(host ?? '')) {
    throw new InvalidRequest(hosts === 0 ? 'An HTTP/1.1 request needs a Host header.' : 'The Host header is not a valid host[:port].');
  }
}
