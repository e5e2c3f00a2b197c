/**
 * Admission: who a route lets through, decided the same way for a proxied request and for a
 * WebSocket handshake. Nothing reaches a backend before it.
 */
import type { IncomingMessage } from 'node:http';
import { verifiedClientCertificate } from '../auth/client-certificate.js';
import { SELF_ISSUER } from '../config/schema.js';
import { ClientCertificateRequired, InsufficientScope } from '../errors/errors.js';
import type { Route } from './routes.js';
import type { Admitted, ProxyDeps } from './types.js';

export type Admit = (route: Route, req: IncomingMessage, token: string | undefined, requestId: string) => Promise<Admitted>;

/**
 * First, on a route with `clientCertificate: required`, a verified client certificate (a 401
 * before the token is even read). Then none on a public route; otherwise a valid token within
 * the route's scope (a token bound to a certificate, with that certificate: auth/bearer.ts), and
 * the signed assertion if the route sends one. Then the route's quota for that caller (or, on
 * a public route, its address): only callers who passed are counted.
 */
export function createAdmission({ authenticate, trustedIssuers, signer, limits }: Pick<ProxyDeps, 'authenticate' | 'trustedIssuers' | 'signer' | 'limits'>): Admit {
  return async function admit(route, req, token, requestId) {
    // Read only for a route that passes it on (a bound token has it read by authenticate).
    const certificate = route.clientCertificate === undefined ? undefined : verifiedClientCertificate(req);
    if (route.clientCertificate === 'required' && certificate === undefined) throw new ClientCertificateRequired();
    if (route.auth === 'public') return { identity: undefined, assertion: undefined, limitHeaders: await limits.route(route, undefined, req), certificate };
    // The default, the gateway's own tokens only, costs no look at the token's issuer.
    const check = route.issuers.length === 1 && route.issuers[0] === SELF_ISSUER ? authenticate : trustedIssuers.authenticatorFor(route.issuers);
    const identity = await check(token, req);
    if (route.requiredScope !== undefined && !identity.scopes.includes(route.requiredScope)) throw new InsufficientScope(route.requiredScope);
    const limitHeaders = await limits.route(route, identity, req);
    const assertion = route.assertion ? await signer.issueAssertion({ ...identity, audience: route.name, requestId }) : undefined;
    return { identity, assertion, limitHeaders, certificate };
  };
}
