/**
 * The plain-HTTP listener beside an HTTPS gateway (tls.redirectPort, HTTP_REDIRECT_PORT;
 * docs/tls.md): it serves nothing of the gateway's. Every request is answered 308 to the same
 * host, path and query over HTTPS (308 keeps the method and body, where 301 lets a client turn
 * a POST into a GET), except ACME's HTTP-01 challenges, answered from the challenge store while
 * an order waits for them (Redis's when configured: the CA may reach any instance). A store
 * that cannot answer is a 503 in the envelope, as anywhere. Each request is one exchange of the main listener's kind: an access
 * line and the request metrics like any other.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { errorAnswer } from '../errors/boundary.js';
import { GatewayError, InvalidRequest, NotFound, StoreUnavailable } from '../errors/errors.js';
import type { Exchanges } from '../http/exchange.js';
import { answerResponse } from '../http/raw-response.js';
import type { ChallengeStore } from '../state/acme/store.js';

const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';
/** RFC 8555's token: base64url, at least 128 bits' worth. */
const TOKEN = /^[A-Za-z0-9_-]{22,128}$/;
/** A host name or an IPv4 address, with an optional port: what a Location may be built from. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(?::\d{1,5})?$/;

/**
 * The redirect listener's request handler. `httpsPort`: the port clients reach the HTTPS
 * listener on (omitted from the Location when 443).
 */
export function createRedirectListener({ exchanges, challenges, httpsPort }: { exchanges: Exchanges; challenges: ChallengeStore; httpsPort: number }): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const exchange = exchanges.open(req);
    const refuse = (error: GatewayError) => {
      answerResponse(res, errorAnswer(error, exchange.requestId, false), exchange.requestId);
      exchange.end(error.status);
    };
    const target = req.url ?? '/';
    if (!target.startsWith('/')) return refuse(new InvalidRequest('The request target must be a path.'));
    if (target.startsWith(CHALLENGE_PREFIX) && (req.method === 'GET' || req.method === 'HEAD')) {
      const token = target.slice(CHALLENGE_PREFIX.length);
      const found = TOKEN.test(token) ? challenges.get(token) : Promise.resolve(undefined);
      found.then((answer) => {
        if (answer === undefined) return refuse(new NotFound('No ACME challenge is waiting for this token.'));
        res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-store', 'X-Request-Id': exchange.requestId });
        res.end(req.method === 'HEAD' ? undefined : answer);
        exchange.end(200);
      }, (err: unknown) => refuse(err instanceof GatewayError ? err : new StoreUnavailable(err))).catch(() => res.destroy());
      return;
    }
    const host = req.headers.host;
    if (host === undefined || !HOST.test(host)) return refuse(new InvalidRequest('The Host header must name this gateway: the redirect goes to it.'));
    const name = host.replace(/:\d+$/, '');
    res.writeHead(308, { Location: `https://${name}${httpsPort === 443 ? '' : `:${httpsPort}`}${target}`, 'Content-Length': '0', 'X-Request-Id': exchange.requestId });
    res.end();
    exchange.end(308);
  };
}
