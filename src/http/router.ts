/**
 * The gateway's own routes. Each is a short list of named steps: guard, then handler.
 * Anything the router does not answer falls through to answerUnmatched, last in app.ts.
 */
import type { IncomingMessage } from 'node:http';
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { requireBearer, type Authenticate, type Identity } from '../auth/bearer.js';
import type { Introspection } from '../auth/introspection.js';
import type { LeakReportKeys } from '../auth/leak-report-keys.js';
import type { DpopProofs } from '../auth/dpop.js';
import type { AuthService } from '../auth/service.js';
import type { TokenRevocation } from '../auth/token-revocation.js';
import type { Signer } from '../auth/signer.js';
import type { Config } from '../config/schema.js';
import { MethodNotAllowed, NotFound } from '../errors/errors.js';
import type { RateLimits, RouteRef } from '../limits/rate-limits.js';
import type { Directory } from '../state/directory/store.js';
import type { OwnerServices } from '../owner/service.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { TimestampFormatter } from '../util/time.js';
import { registerDashboard, registerInviteRedirect } from '../dashboard/serve.js';
import { buildOpenApiDocument, OPENAPI_PATH, serveOpenApiDocument } from './openapi/document.js';
import { registerOwnerApi } from './owner/register.js';
import { ownerOperations } from './routes/owner/index.js';
import { reportLiveness, reportMetrics, reportReadiness, type ReadinessCheck } from './routes/health.js';
import { answerForwardAuth, FORWARD_AUTH_PATH, type ForwardAuthDecide } from './routes/forward-auth.js';
import type { ProxyTrust } from './client-address.js';
import { INTROSPECT_PATH, introspectToken, requireIntrospectScope } from './routes/introspect.js';
import { publishKeys } from './routes/jwks.js';
import type { CredentialRouteDeps } from './routes/credentials.js';
import { METADATA_PATHS, publishMetadata } from './routes/oauth-metadata.js';
import { issueTokens, TOKEN_PATH } from './routes/token.js';
import { createPublicOrigin } from './public-origin.js';
import { refresh } from './routes/refresh.js';
import { resetTokens } from './routes/reset.js';
import { LEAKS_PATH, receiveLeakReport } from './routes/leaks.js';
import { REVOKE_PATH, revokeToken } from './routes/revoke.js';
import { listRoles } from './routes/roles.js';
import { createSignAnswers, lookUpSignRecord } from './routes/sign.js';
import { signIn } from './routes/signin.js';

/** What the own routes use: services.ts's Services has all of it, and nothing else reaches a route. */
export interface RouterDeps {
  config: Pick<Config, 'server' | 'roles' | 'metrics' | 'owner' | 'dashboard' | 'management' | 'tokens' | 'oauth' | 'dpop' | 'proxy' | 'leaks'>;
  auth: AuthService;
  /** POST /api/revoke (RFC 7009) and POST /api/introspect (RFC 7662). */
  revocation: TokenRevocation;
  introspection: Introspection;
  directory: Directory;
  signer: Pick<Signer, 'jwks'>;
  authenticate: Authenticate;
  dpop: DpopProofs;
  limits: RateLimits;
  clientAddress: (req: IncomingMessage) => string;
  formatTimestamp: TimestampFormatter;
  readiness: readonly ReadinessCheck[];
  isDraining: () => boolean;
  metrics: Pick<Metrics, 'registry' | 'scrape' | 'leakReports'>;
  /** The keys that sign secret-scanning reports (POST /api/leaks/github). */
  leakKeys: LeakReportKeys;
  owner: OwnerServices;
  /** The configured routes' decision, for /api/forward-auth (proxy/decision.ts). */
  proxy: { decide: ForwardAuthDecide };
  isTrustedProxy: ProxyTrust;
}

const JWKS_PATH = '/.well-known/jwks.json';

/** `isOwnPath`: asked per request (app.ts builds it from this router), for /api/forward-auth. */
export function createRouter(deps: RouterDeps, isOwnPath: (path: string) => boolean): Router {
  const { auth, directory, signer, authenticate, config, formatTimestamp, readiness, isDraining, limits, clientAddress, metrics, owner } = deps;
  const bodyLimitBytes = config.server.bodyLimitBytes;
  const credentials = { auth, limits, clientAddress, bodyLimitBytes, dpop: deps.dpop };
  const bearer = requireBearer(authenticate, deps.dpop);
  const router = new Router({ sensitive: true });

  router.use(noStore);
  router.post('/api/signin', signIn(credentials));
  router.post('/api/refresh', refresh(credentials));
  router.post('/api/reset', resetTokens({ ...credentials, formatTimestamp }));
  registerOAuth(router, deps, credentials);
  router.post(REVOKE_PATH, revokeToken({ revocation: deps.revocation, limits, clientAddress, bodyLimitBytes }));
  router.post(LEAKS_PATH, receiveLeakReport({ keys: deps.leakKeys, leaks: owner.leaks, limits, clientAddress, settings: config.leaks, metrics }));
  router.post(INTROSPECT_PATH, bearer, requireIntrospectScope(), quota(limits, { name: 'introspect', auth: 'required' }), introspectToken({ introspection: deps.introspection, bodyLimitBytes }));
  // One reader for /api/sign and the owner API's `served` sign record: the same answer by construction.
  const signAnswers = createSignAnswers({ directory, formatTimestamp });
  const signRecord = lookUpSignRecord({ answers: signAnswers, bodyLimitBytes });
  const signQuota = quota(limits, { name: 'sign', auth: 'required' });
  router.get('/api/sign', bearer, signQuota, signRecord);
  router.post('/api/sign', bearer, signQuota, signRecord);
  router.get('/api/roles', bearer, quota(limits, { name: 'roles', auth: 'required' }), listRoles({ directory, ...config.roles }));
  router.get(JWKS_PATH, publishKeys({ signer }));
  // Any method, and any path below it (Envoy's ext_authz asks at a prefix plus the original path).
  const forwardAuth = answerForwardAuth({ decide: deps.proxy.decide, isTrustedProxy: deps.isTrustedProxy, isOwnPath });
  router.all([FORWARD_AUTH_PATH, `${FORWARD_AUTH_PATH}/{*rest}`], forwardAuth);
  // With a management listener they are served there only (createManagementRouter); here they
  // stay the gateway's own paths, answered 404, so that a catch-all route cannot take them either.
  if (config.management.port === undefined) registerOperations(router, { config, readiness, isDraining, metrics });
  else router.get(['/healthz', '/readyz', '/metrics'], notHere);
  const operations = ownerOperations(owner, { config, signAnswers });
  router.get(OPENAPI_PATH, serveOpenApiDocument(() => buildOpenApiDocument(operations)));
  // Before the owner API, whose catch-all answers every other path under /owner.
  if (config.dashboard.enabled) registerInviteRedirect(router, config.dashboard);
  registerOwnerApi(router, {
    config, operations, sessions: owner.sessions, limits, clientAddress,
    requireReachable: async (caller, accountId) => { await owner.accounts.getAccount(caller, accountId); },
  });
  if (config.dashboard.enabled) registerDashboard(router, config.dashboard);
  return router;
}

/**
 * The standard OAuth 2.0 face (docs/oauth.md): the token endpoint and the metadata that names
 * it beside the JWKS, introspection and revocation endpoints.
 */
function registerOAuth(router: Router, { config, isTrustedProxy }: RouterDeps, credentials: CredentialRouteDeps): void {
  router.post(TOKEN_PATH, issueTokens({ ...credentials, accessTokenTtlSeconds: config.tokens.accessTokenTtlSeconds }));
  const publicOrigin = createPublicOrigin(config.oauth.publicOrigin ?? config.owner.publicOrigin, config.proxy, isTrustedProxy);
  const endpoints = { token: TOKEN_PATH, jwks: JWKS_PATH, introspection: '/api/introspect', revocation: '/api/revoke' };
  router.get(METADATA_PATHS, publishMetadata({ issuer: config.tokens.issuer, publicOrigin, endpoints, dpopAlgorithms: config.dpop.enabled ? config.dpop.algorithms : undefined }));
}

/**
 * The management listener's routes (server.ts), when `management.port` is set: health and
 * metrics only, none of the gateway's API.
 */
export function createManagementRouter(deps: Pick<RouterDeps, 'config' | 'readiness' | 'isDraining' | 'metrics'>): Router {
  const router = new Router({ sensitive: true });
  router.use(noStore);
  registerOperations(router, deps);
  return router;
}

function registerOperations(router: Router, { config, readiness, isDraining, metrics }: Pick<RouterDeps, 'config' | 'readiness' | 'isDraining' | 'metrics'>): void {
  router.get('/healthz', reportLiveness());
  router.get('/readyz', reportReadiness({ checks: readiness, isDraining }));
  if (config.metrics.enabled) router.get('/metrics', reportMetrics({ metrics }));
}

/** The own route's quota for the caller the bearer guard let through (limits/rate-limits.ts). */
function quota(limits: RateLimits, route: RouteRef) {
  return async function quota(ctx: Context, next: Next): Promise<void> {
    const headers = await limits.route(route, ctx.state.identity as Identity, ctx.req);
    if (headers !== undefined) ctx.set(headers);
    await next();
  };
}

async function notHere(): Promise<void> {
  throw new NotFound();
}

/** Token and account answers must never be stored by a cache (RFC 6749 §5.1). */
async function noStore(ctx: Context, next: Next): Promise<void> {
  ctx.set('Cache-Control', 'no-store');
  await next();
}

/**
 * The last middleware: nothing answered. A path the router knows under other methods is a 405
 * with Allow; anything else is the 404 envelope, and no backend was reached.
 */
export function answerUnmatched() {
  return async function answerUnmatched(ctx: Context): Promise<void> {
    const matched = (ctx as Context & { matched?: { methods: string[] }[] }).matched ?? [];
    const allowed = [...new Set(matched.flatMap((layer) => layer.methods))];
    if (allowed.length > 0) throw new MethodNotAllowed(allowed.join(', '));
    throw new NotFound();
  };
}
