/**
 * Admission: who a route lets through, decided the same way for a proxied request and for a
 * WebSocket handshake. Nothing reaches a backend before it.
 */
import type { IncomingMessage } from 'node:http';
import type { Identity } from '../auth/bearer.js';
import { verifiedClientCertificate } from '../auth/client-certificate.js';
import { SELF_ISSUER } from '../config/schema.js';
import { ClientCertificateRequired, Forbidden, InsufficientScope } from '../errors/errors.js';
import { createClientIp, createProxyTrust } from '../http/client-address.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { PolicyDecision } from './policy.js';
import type { Route } from './routes.js';
import type { Admitted, ProxyDeps } from './types.js';

export type Admit = (route: Route, req: IncomingMessage, token: string | undefined, requestId: string) => Promise<Admitted>;

/**
 * First, on a route with `clientCertificate: required`, a verified client certificate (a 401
 * before the token is even read). Then none on a public route; otherwise a valid token within
 * the route's scope (a token bound to a certificate, with that certificate: auth/bearer.ts), and
 * the signed assertion if the route sends one. Then the route's `allow` rules, if it has any
 * (policy.ts), after `requiredScope`: both must pass. Then the route's quota for that caller
 * (or, on a public route, its address): only callers who passed are counted.
 */
export function createAdmission(deps: Pick<ProxyDeps, 'authenticate' | 'trustedIssuers' | 'signer' | 'limits' | 'config' | 'isTrustedProxy' | 'metrics' | 'log' | 'dpop'>): Admit {
  const { authenticate, trustedIssuers, signer, limits } = deps;
  const checkRules = createRuleCheck(deps);
  return async function admit(route, req, token, requestId) {
    // Read only for a route that passes it on (a bound token has it read by authenticate).
    const certificate = route.clientCertificate === undefined ? undefined : verifiedClientCertificate(req);
    if (route.clientCertificate === 'required' && certificate === undefined) throw new ClientCertificateRequired();
    if (route.auth === 'public') {
      if (route.policy !== undefined) checkRules(route, req, undefined);
      return { identity: undefined, assertion: undefined, limitHeaders: await limits.route(route, undefined, req), certificate };
    }
    // The default, the gateway's own tokens only, costs no look at the token's issuer.
    const check = route.issuers.length === 1 && route.issuers[0] === SELF_ISSUER ? authenticate : trustedIssuers.authenticatorFor(route.issuers);
    const identity = await check(token, req);
    if (route.requiredScope !== undefined && !identity.scopes.includes(route.requiredScope)) throw new InsufficientScope(route.requiredScope);
    if (route.policy !== undefined) checkRules(route, req, identity);
    let limitHeaders = await limits.route(route, identity, req);
    // RFC 9449 §8.2: the next nonce with the answer, set on it as the quota's headers are.
    if (identity.dpopThumbprint !== undefined) {
      const nonce = deps.dpop?.nonceHeader();
      if (nonce !== undefined) limitHeaders = { ...limitHeaders, ...nonce };
    }
    const assertion = route.assertion ? await signer.issueAssertion({ ...identity, audience: route.name, requestId }) : undefined;
    return { identity, assertion, limitHeaders, certificate };
  };
}

type Outcome = 'allow' | 'deny' | 'would_deny';

/**
 * Asks the route's rules and counts the decision; throws the 403 when enforced rules refuse.
 * In report mode a refusal is logged (the rule that would have let it through is none) and the
 * request goes on. Counter children are bound once per route table's policy and label.
 */
function createRuleCheck({ config, isTrustedProxy, metrics, log }: Pick<ProxyDeps, 'config' | 'isTrustedProxy' | 'metrics' | 'log'>) {
  const clientIp = createClientIp(config.proxy, isTrustedProxy ?? createProxyTrust(config.proxy.trustedProxies));
  const children = new WeakMap<object, Map<string, ReturnType<Metrics['policyDecisions']['labels']>>>();
  const count = (route: Route, decision: PolicyDecision, outcome: Outcome) => {
    let byLabel = children.get(route.policy!);
    if (byLabel === undefined) children.set(route.policy!, byLabel = new Map());
    const key = `${outcome} ${decision.rule}`;
    let child = byLabel.get(key);
    if (child === undefined) byLabel.set(key, child = metrics.policyDecisions.labels(route.name, decision.rule, outcome));
    child.inc();
  };

  return function checkRules(route: Route, req: IncomingMessage, identity: Identity | undefined): void {
    const policy = route.policy!;
    const decision = policy.decide({ method: req.method ?? '', url: req.url ?? '', identity, clientIp: () => clientIp(req) });
    if (decision.allowed) return count(route, decision, 'allow');
    if (policy.report) {
      count(route, decision, 'would_deny');
      const url = req.url ?? '';
      const q = url.indexOf('?');
      log.warn({ route: route.name, method: req.method, path: q === -1 ? url : url.slice(0, q), accountId: identity?.accountId, missingScopes: decision.missingScopes },
        'allow rules would refuse this request (allowMode report: let through)');
      return;
    }
    count(route, decision, 'deny');
    if (decision.missingScopes !== undefined) {
      throw new InsufficientScope(decision.missingScopes, `No rule of this route allows the request; the nearest wants the scope(s) "${decision.missingScopes}".`);
    }
    throw new Forbidden('No rule of this route allows this request.');
  };
}
