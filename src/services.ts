/**
 * Builds every service from the config. Where state lives (process memory by default, Redis
 * when one is configured) is chosen once, by createState (state/index.ts); what is built here
 * from the stores it returns never asks. Callers get interfaces and never import a store's
 * module.
 */
import type { IncomingMessage } from 'node:http';
import { createAuthenticator, type Authenticate, type Identity } from './auth/bearer.js';
import { createDeniedTokens, type DeniedTokens } from './auth/denied-tokens.js';
import { createDpopProofs, type DpopProofs } from './auth/dpop.js';
import { createDemoSecretGuard, type DemoSecretGuard } from './auth/demo-secrets.js';
import { createIntrospection, type Introspection } from './auth/introspection.js';
import { countAuthOutcomes, createAuthService, type AuthService } from './auth/service.js';
import { createRevocations, type Revocations } from './auth/revocation.js';
import { createKeyUseRecorder } from './auth/key-use.js';
import { createSettingsTokenAuth } from './auth/settings-tokens.js';
import { createSigner, type Signer } from './auth/signer.js';
import { createTokenRevocation, type TokenRevocation } from './auth/token-revocation.js';
import { createLeakReportKeys, type LeakReportKeys } from './auth/leak-report-keys.js';
import { createTrustedIssuers, type TrustedIssuers } from './auth/trusted-issuers.js';
import type { Config } from './config/schema.js';
import { createClientAddress, createReplaceableProxyTrust, type ProxyTrust } from './http/client-address.js';
import { createCors, type Cors } from './http/cors.js';
import type { ReadinessCheck } from './http/routes/health.js';
import { createLimiter } from './limits/limiter.js';
import { createRateLimits, createReplaceableRateLimits, type RateLimits, type ReplaceableRateLimits } from './limits/rate-limits.js';
import { countUsage, createUsageRecorder, type UsageRecorder } from './limits/usage.js';
import { createMail, smtpSender, type Mail, type MailSender } from './owner/mail.js';
import type { WebhookParts } from './owner/webhook-notices.js';
import { createWebhookSender, type WebhookSender } from './owner/webhook-sender.js';
import { webhookSecretBox, webhookTargets } from './owner/webhooks.js';
import { createOwnerServices, type OwnerServices } from './owner/service.js';
import { createProxy, type Proxy } from './proxy/proxy.js';
import type { CachedDirectory } from './state/directory/cache.js';
import { createState, openDataFile, withSavedDemoData, type AcmeStore, type ChallengeStore, type State } from './state/index.js';
import type { KeyDirectory } from './state/keys/store.js';
import type { OwnerStore } from './state/owners/store.js';
import type { RefreshTokenStore } from './state/tokens/store.js';
import type { Logger } from './telemetry/log.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';
import { createTracing, type Tracing } from './telemetry/tracing.js';
import { systemClock, type Scheduler } from './util/clock.js';
import { createTimestampFormatter, type TimestampFormatter } from './util/time.js';

export interface Services {
  config: Config;
  log: Logger;
  clock: Scheduler;
  signer: Signer;
  auth: AuthService;
  keys: KeyDirectory;
  /** Roles and sign records: the configured store behind the cache. */
  directory: CachedDirectory;
  tokens: RefreshTokenStore;
  revocations: Revocations;
  /** The bearer-token check every protected path shares. */
  authenticate: Authenticate;
  /** Revoked access tokens, refused by `authenticate` on every instance (auth/denied-tokens.ts). */
  denied: DeniedTokens;
  /** POST /api/revoke (RFC 7009). */
  revocation: TokenRevocation;
  /** The keys that sign secret-scanning reports (auth/leak-report-keys.ts). */
  leakKeys: LeakReportKeys;
  /** POST /api/introspect (RFC 7662). */
  introspection: Introspection;
  /** DPoP proofs (auth/dpop.ts): bound at sign-in and refresh, checked with every bound token. */
  dpop: DpopProofs;
  /** The bearer check of routes that also accept other issuers' tokens (`trustedIssuers`, route `issuers`). */
  trustedIssuers: TrustedIssuers;
  /** The configured routes to backends. */
  proxy: Proxy;
  /** CORS for browsers on listed origins; undefined while it is off. */
  cors: Cors | undefined;
  /** Sign-in lockouts and quotas (limits/), counting each key's calls on `usage`. */
  limits: RateLimits;
  /** Per-key usage counting (limits/usage.ts); undefined while `usage.enabled` is off. Tests flush it. */
  usage: UsageRecorder | undefined;
  /** The client's address as the limits count it (http/client-address.ts). */
  clientAddress: (req: IncomingMessage) => string;
  /** True for an address in `proxy.trustedProxies` as currently configured (a reload may replace the list). */
  isTrustedProxy: ProxyTrust;
  metrics: Metrics;
  /** Spans per request (telemetry/tracing.ts); undefined while tracing is off, as it is without `tracing.otlpEndpoint`. */
  tracing: Tracing | undefined;
  /** The owner API's service (src/owner/). */
  owner: OwnerServices;
  /** What the owner API writes to (tests reach the store through it). */
  ownerStore: OwnerStore;
  /** The outbox's sender (owner/mail.ts); undefined while mail is off. Tests on a manual clock run its rounds. */
  mailSender: MailSender | undefined;
  /** The webhook queue's sender (owner/webhook-sender.ts). Tests on a manual clock run its rounds. */
  webhookSender: WebhookSender;
  formatTimestamp: TimestampFormatter;
  /** ACME's state (tls/acme.ts): account key, certificate and order lock, and the HTTP-01 answers. */
  acme: { store: AcmeStore; challenges: ChallengeStore };
  readiness: ReadinessCheck[];
  /**
   * From now on /readyz answers 503 `draining`, whatever the stores say: the gateway is
   * stopping (server.ts), and load balancers should take it out while it still serves.
   */
  startDraining(): void;
  isDraining(): boolean;
  /** Where shared state lives, for the start-up log. */
  state: 'memory' | 'redis';
  /**
   * Waits (bounded, never failing) for the stores to connect, so the first requests find them;
   * and for the tracing SDK to load, which fails the start if it cannot.
   */
  warmUp(): Promise<void>;
  /**
   * Puts the reloadable part of a reloaded configuration in force (config/reload.ts decides
   * what that is and logs the rest): routes, limits, trusted proxies and signing keys, all
   * within one synchronous step, so a request sees the old set or the new one, never a mix.
   * Throws SigningKeyError, having replaced nothing, when the new keys do not load.
   */
  reload(next: Config): void;
  /** Releases what the services hold (connections, timers). */
  close(): Promise<void>;
}

/**
 * `isProduction` (NODE_ENV=production, read by main.ts) makes demo keys in the data file an
 * error unless `data.allowDemoData` is set (state/data-file/demo-data.ts).
 */
export function createServices(given: Config, { log, clock = systemClock, isProduction = false }: { log: Logger; clock?: Scheduler; isProduction?: boolean }): Services {
  const config = withSavedDemoData(given, log);
  // Read (and refused when it must be) before anything connects, so a bad file leaves nothing open.
  const dataFile = openDataFile(config, { log, isProduction });
  const metrics = createMetrics({ processMetrics: config.metrics.enabled, accountLabelMaxAccounts: config.metrics.accountLabelMaxAccounts });
  const signer = createSigner(config, clock);
  if (signer.isEphemeral) {
    log.warn('no signing key configured: made one for this process; tokens will not survive a restart (set signing.keys, and REDIS_URL for sessions to outlive it)');
  }
  const state = createState(config, { dataFile, log, clock, metrics, isProduction });
  const core: Core = { config, log, clock, metrics, signer, state };
  // An account reset also revokes its API settings tokens for good (a reset is remembered for a while only).
  const trust = createReplaceableProxyTrust(config.proxy.trustedProxies);
  const auth = buildAuth(core, { isProduction, isTrustedProxy: trust.isTrusted, onAccountReset: (accountId) => owner.settingsTokens.revokeAllOf(accountId) });
  const clientAddress = createClientAddress(config.proxy, trust.isTrusted);
  const limits = buildLimits(core, clientAddress);
  const edge = buildProxy(core, { auth, limits: limits.limits, isTrustedProxy: trust.isTrusted });
  const mail = buildMail(core);
  const webhooks = buildWebhooks(core);
  const owner = createOwnerServices({
    store: state.owners, sessions: state.sessions, ceremonies: state.ceremonies, revocations: auth.revocations, clock, limits: limits.limits, log, config,
    usage: state.usage, keyUse: state.keyUse, demoSecrets: auth.demoSecrets, ...(mail !== undefined ? { mail: mail.mail } : {}),
    tokenRevocation: auth.revocation, webhooks: webhooks.parts,
  });
  return {
    config, log, clock, signer, metrics, owner, clientAddress,
    auth: auth.service, revocations: auth.revocations, authenticate: auth.authenticate, trustedIssuers: auth.trustedIssuers, dpop: auth.dpop,
    denied: auth.denied, revocation: auth.revocation, introspection: auth.introspection,
    leakKeys: createLeakReportKeys({ settings: config.leaks, clock, log }),
    keys: state.keys, directory: state.directory, tokens: state.tokens, ownerStore: state.owners, state: state.where, mailSender: mail?.sender, webhookSender: webhooks.sender,
    limits: limits.limits, usage: limits.usage, isTrustedProxy: trust.isTrusted,
    cors: edge.cors, tracing: edge.tracing, proxy: edge.proxy,
    formatTimestamp: createTimestampFormatter(config.data.timeZone),
    acme: { store: state.acme, challenges: state.challenges },
    // Always true today (createSigner throws without a usable key); listed so that /readyz says
    // so, and so that a key set replaced at run time is checked as well.
    readiness: [...state.readiness, { name: 'signingKeys', timeoutMs: config.redis.commandTimeoutMs, isReady: async () => signer.jwks.keys.length > 0 }],
    ...drainSwitch(),
    ...lifecycle(core, { trust, limits, edge, mail: mail?.sender, webhooks: webhooks.sender }),
  };
}

/**
 * Webhooks: deliveries from the queue by the sender (started with the gateway), each attempt in
 * its endpoint's log, the endpoint and its secret read from the owner store at every attempt.
 */
function buildWebhooks({ config, log, clock, metrics, state }: Core): { parts: WebhookParts; sender: WebhookSender } {
  const { allowPrivateNetworks, allowCidrs, allowHttp, timeoutMs, maxAttempts, maxQueued } = config.webhooks;
  const policy = { allowPrivateNetworks, allowCidrs, allowHttp };
  const count = (result: Parameters<typeof metrics.webhookDelivered>[0]) => metrics.webhookDelivered(result);
  const sender = createWebhookSender({
    queue: state.webhookQueue, clock, log, delivery: { policy, timeoutMs }, maxAttempts, count,
    endpoint: webhookTargets(state.owners, webhookSecretBox(config), clock),
    record: (endpointId, attempt) => state.webhookLogs.record(endpointId, attempt),
  });
  metrics.watchWebhookQueue(() => state.webhookQueue.size());
  return { parts: { policy, logs: state.webhookLogs, sender, queue: state.webhookQueue, maxQueued, count }, sender };
}

/** Mail to owners through the outbox, or none (said once, here) while `mail.smtpUrl` is unset. */
function buildMail({ config, log, clock, metrics, state }: Core): { mail: Mail; sender: MailSender } | undefined {
  const { smtpUrl, from } = config.mail;
  const origin = config.owner.publicOrigin;
  // config/schema.ts requires the sender and the origin with smtpUrl: only an unset smtpUrl leaves here.
  if (smtpUrl === undefined || from === undefined || origin === undefined || state.outbox === undefined) {
    log.info('mail is off (no SMTP_URL): invites are only returned to the inviter, no password reset by mail, no security notices');
    return undefined;
  }
  return createMail({ config: { ...config.mail, from, origin }, outbox: state.outbox, send: smtpSender(smtpUrl), clock, log, metrics, store: state.owners });
}

/** What every builder below starts from. */
interface Core {
  config: Config;
  log: Logger;
  clock: Scheduler;
  metrics: Metrics;
  signer: Signer;
  state: State;
}

interface AuthParts {
  service: AuthService;
  revocations: Revocations;
  authenticate: Authenticate;
  trustedIssuers: TrustedIssuers;
  demoSecrets: DemoSecretGuard;
  denied: DeniedTokens;
  revocation: TokenRevocation;
  introspection: Introspection;
  dpop: DpopProofs;
}

/** Sign-in, refresh and resets; the bearer check every protected path shares. */
function buildAuth({ config, log, clock, metrics, signer, state }: Core, { isProduction, isTrustedProxy, onAccountReset }: { isProduction: boolean; isTrustedProxy: ProxyTrust; onAccountReset: (accountId: string) => Promise<void> }): AuthParts {
  const { tokens: t } = config;
  // A heard reset notice matters as long as an access token from before it can live.
  const rememberMs = (t.accessTokenTtlSeconds + t.clockSkewSeconds) * 1000;
  const revocations = createRevocations({ store: state.resets, clock, ttlMs: config.redis.resetCacheTtlMs, rememberMs, skewMs: state.epochSkewMs });
  // Redis lost its data (a new epoch): no credential cached from it may answer another request.
  // The settings tokens' cache drops itself (auth/settings-tokens.ts); resets are read again.
  revocations.whenDataLost(() => {
    signer.forgetVerifiedTokens();
    state.forgetCachedKeys();
    log.info('dropped every cached credential (verified access tokens, key records, API settings tokens): redis lost its data');
  });
  // Whatever the key source: keys and owners in Redis are never checked at start-up (state/data-file/open.ts).
  const demoSecrets = createDemoSecretGuard({ refuse: isProduction && !config.data.allowDemoData, log });
  const service = countAuthOutcomes(createAuthService({
    keys: state.keys, tokens: state.tokens, signer, revocations, clock, log, settings: t, onAccountReset,
    onSignIn: createKeyUseRecorder({ store: state.keyUse, clock, log }),
    demoSecrets,
  }), metrics);
  const settingsTokens = createSettingsTokenAuth({
    store: state.owners, revocations, clock, log,
    cacheTtlMs: config.owner.settingsTokenCacheTtlMs, accessTokenTtlSeconds: t.accessTokenTtlSeconds, resetsRememberedMs: rememberMs,
  });
  const denied = createDeniedTokens({ store: state.denylist, clock, log });
  const dpop = createDpopProofs({ config: config.dpop, clockSkewSeconds: t.clockSkewSeconds, clock, proofs: state.dpopProofs, isTrustedProxy });
  const authenticate = createAuthenticator(signer, revocations, settingsTokens, metrics, denied, dpop);
  const trustedIssuers = createTrustedIssuers({ authenticate, config, clock, log, metrics });
  return { service, revocations, authenticate, trustedIssuers, demoSecrets, denied, dpop, ...buildTokenLifecycle({ config, log, clock, metrics, signer, state }, { revocations, denied, settingsTokens, trustedIssuers }) };
}

/** Revocation (RFC 7009) and introspection (RFC 7662) over the same checks as the bearer guard. */
function buildTokenLifecycle({ config, log, clock, metrics, signer, state }: Core, parts: Pick<AuthParts, 'revocations' | 'denied' | 'trustedIssuers'> & { settingsTokens: (token: string) => Promise<Identity> }): Pick<AuthParts, 'revocation' | 'introspection'> {
  const { revocations, denied, settingsTokens, trustedIssuers } = parts;
  const external = config.trustedIssuers.map((issuer) => issuer.issuer);
  return {
    revocation: createTokenRevocation({
      tokens: state.tokens, signer, denied, log, clock, metrics,
      accessTokenTtlSeconds: config.tokens.accessTokenTtlSeconds, clockSkewSeconds: config.tokens.clockSkewSeconds,
    }),
    introspection: createIntrospection({
      signer, revocations, denied, keys: state.keys, tokens: state.tokens, settingsTokens,
      externalTokens: external.length === 0 ? undefined : trustedIssuers.authenticatorFor(external),
      issuer: config.tokens.issuer, clock, metrics,
    }),
  };
}

interface LimitParts {
  limits: ReplaceableRateLimits;
  usage: UsageRecorder | undefined;
  /** Puts reloaded limits in force; the counters stay with the limiter, the rules that count on them are replaced whole. */
  reload(next: Config['limits']): void;
}

/** Sign-in lockouts and quotas, and per-key usage counted around them. */
function buildLimits({ config, log, clock, metrics, state }: Core, clientAddress: (req: IncomingMessage) => string): LimitParts {
  const limiter = createLimiter({ counters: state.rateCounters, memory: state.memoryRateCounters, log, metrics, clock });
  // Per-key usage, counted around the rate limits (a decorator, so that counting holds whatever
  // limits.mode is: counting usage is no rate limit) and flushed to the usage store.
  const usage = state.usage === undefined ? undefined : createUsageRecorder({ store: state.usage, clock, log, flushIntervalMs: config.usage.flushIntervalMs });
  const limitsOf = (next: Config['limits']) => {
    const rateLimits = createRateLimits(next, limiter, clientAddress);
    return usage === undefined ? rateLimits : countUsage(rateLimits, usage);
  };
  const limits = createReplaceableRateLimits(limitsOf(config.limits));
  return { limits, usage, reload: (next) => limits.replace(limitsOf(next)) };
}

interface EdgeParts {
  cors: Cors | undefined;
  tracing: Tracing | undefined;
  proxy: Proxy;
}

/** CORS, tracing and the configured routes to backends. */
function buildProxy({ config, log, clock, metrics, signer }: Core, { auth, limits, isTrustedProxy }: { auth: AuthParts; limits: RateLimits; isTrustedProxy: ProxyTrust }): EdgeParts {
  const cors = createCors(config.cors);
  // The trusted proxies as currently configured: a reload that changes them changes whose trace context is believed.
  const tracing = createTracing(config.tracing, { log, isTrustedPeer: isTrustedProxy, flushTimeoutMs: config.server.shutdownTimeoutMs });
  const proxy = createProxy({ config, log, clock, signer, authenticate: auth.authenticate, trustedIssuers: auth.trustedIssuers, revocations: auth.revocations, denied: auth.denied, limits, cors, isTrustedProxy, metrics, tracing, dpop: auth.dpop });
  return { cors, tracing, proxy };
}

function drainSwitch(): Pick<Services, 'startDraining' | 'isDraining'> {
  let draining = false;
  return {
    startDraining() {
      draining = true;
    },
    isDraining: () => draining,
  };
}

/** Start, reload and stop. */
function lifecycle({ signer, state }: Core, { trust, limits, edge, mail, webhooks }: { trust: ReturnType<typeof createReplaceableProxyTrust>; limits: LimitParts; edge: EdgeParts; mail: MailSender | undefined; webhooks: WebhookSender }): Pick<Services, 'warmUp' | 'reload' | 'close'> {
  return {
    async warmUp() {
      // The one wait that may fail: a gateway told to trace must not run without it.
      await edge.tracing?.ready;
      await state.warmUp();
      // Once the stores answer: the outbox may hold mail, and the queue deliveries, from before a restart.
      mail?.start();
      webhooks.start();
    },
    reload(next) {
      // The one step that can refuse goes first, so a refusal leaves everything as it was.
      signer.useKeys(next.signing);
      trust.replace(next.proxy.trustedProxies);
      limits.reload(next.limits);
      edge.proxy.replaceRoutes(next.routes);
    },
    async close() {
      edge.proxy.close();
      // A send under way finishes (and settles) before the outbox's store closes.
      await mail?.stop();
      await webhooks.stop();
      // Before Redis closes: the counts since the last flush go with it.
      await limits.usage?.stop();
      await state.close();
      // Last: the spans of the requests that just finished go to the collector.
      await edge.tracing?.shutdown();
    },
  };
}
