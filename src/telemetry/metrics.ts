/**
 * Prometheus metrics (prom-client), one registry per gateway so that several in one process
 * (the tests) keep their counts apart. Labels are bounded sets (route names and own-route
 * patterns from the config and the code, known methods, status classes, configured targets,
 * outcomes): never an account, key, address or raw path, which would grow without bound and
 * end up in a dashboard.
 *
 * The request metrics are recorded on every request, proxied ones included, so they cost one
 * map lookup and one array index per request: the histogram's child for a route, method and
 * status class is bound once and kept (prom-client's `labels()` would hash the label values
 * on every call). Gauges of state held elsewhere (Redis connection, breakers) are read when
 * scraped, never kept up to date per event.
 *
 * Under node:cluster every worker keeps its own registry; the primary sums them on a scrape
 * (cluster-metrics.ts). Gauges say how they combine (`aggregator`): a state of the group is
 * its worst worker's.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Request and upstream latency buckets, in seconds: a proxy answers in well under a
 * millisecond from its own caches and waits tens of seconds on a slow backend or a long poll.
 */
export const LATENCY_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Methods that get their own label value; anything else is counted as "other". */
const METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'];
const METHOD_INDEX = new Map(METHODS.map((method, i) => [method, i]));
const METHOD_LABELS = [...METHODS, 'other'];
const STATUS_CLASSES = ['1xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/** Outcomes of a bearer-token check (auth/bearer.ts). */
export type TokenValidation = 'valid' | 'missing' | 'invalid' | 'expired' | 'revoked' | 'unavailable';
/** How a fetch of a trusted issuer's keys ended (auth/issuer-keys.ts). */
export type IssuerKeyFetch = 'ok' | 'timeout' | 'too_large' | 'http_error' | 'unreachable' | 'malformed' | 'error';
/** What became of a token that named a trusted issuer, or an unknown one (auth/trusted-issuers.ts). */
export type IssuerTokenOutcome = 'valid' | 'invalid' | 'expired' | 'keys_unavailable' | 'not_accepted';
/** Outcomes of a sign-in, refresh or token reset (http/routes/). */
export type CredentialOutcome = 'issued' | 'reset' | 'bad_credentials' | 'invalid' | 'reused' | 'key_disabled' | 'certificate_mismatch' | 'invalid_scope' | 'dpop_required' | 'dpop_mismatch' | 'replayed' | 'rate_limited' | 'unavailable' | 'error';
/** What a directory-cache read was answered from (state/directory/cache.ts). */
export type CacheResult = 'hit' | 'miss' | 'stale';
/** How an upstream attempt failed (proxy/flight.ts). */
export type UpstreamFailure = 'connect' | 'timeout' | 'reset' | 'other';

/** A circuit breaker's state as cockatiel numbers it: 0 closed, 1 open, 2 half-open, 3 isolated. */
export interface BreakerState {
  readonly state: number;
}

type RequestChild = ReturnType<Histogram<'route' | 'method' | 'status_class'>['labels']>;

export interface Metrics {
  readonly registry: Registry;
  /** The Prometheus text a scrape answers: this registry's, or the process group's (`scrapeWith`). */
  scrape(): Promise<string>;
  /** Replaces what a scrape answers (a cluster worker: the whole group's, cluster-metrics.ts). */
  scrapeWith(scrape: () => Promise<string>): void;
  /** Rate-limit decisions by limit and outcome (`admitted`, `refused`, `would_refuse` in dry-run). */
  readonly rateLimitDecisions: Counter<'limit' | 'outcome'>;
  /** 1 while a limit cannot reach Redis and runs under its failure policy, else 0. */
  readonly rateLimitDegraded: Gauge<'limit' | 'policy'>;
  /** Counter calls to Redis that failed, by limit and the policy applied instead. */
  readonly rateLimitStoreFailures: Counter<'limit' | 'policy'>;

  /**
   * One finished request: `route` a configured route's name or an own route's pattern (both
   * bounded), `started` its performance.now() at arrival; `upstreamOrigin` and
   * `upstreamSeconds`, the backend that answered a proxied one and how long its answer's head
   * took; `accountId`, who made it, counted only under `accountLabelMaxAccounts`.
   */
  observeRequest(route: string, method: string | undefined, status: number, seconds: number, upstreamOrigin: string | undefined, upstreamSeconds: number | undefined, accountId: string | undefined): void;
  /** A backend attempt failed before its answer; `ejected`, the failure took the target out. */
  upstreamFailed(origin: string, failure: UpstreamFailure, ejected: boolean): void;
  tokenValidated(outcome: TokenValidation): void;
  /** A fetch of a trusted issuer's keys ended so (`issuer`: a configured one, a bounded label). */
  issuerKeysFetched(issuer: string, outcome: IssuerKeyFetch): void;
  /** A token of a trusted issuer was checked; `issuer` is "(unknown)" for one no route may accept. */
  issuerTokenChecked(issuer: string, outcome: IssuerTokenOutcome): void;
  signIn(outcome: CredentialOutcome): void;
  refresh(outcome: CredentialOutcome): void;
  reset(outcome: CredentialOutcome): void;
  directoryCache(result: CacheResult): void;
  directoryStoreFailed(): void;
  /** Reports Redis as connected (1) or not (0) at each scrape, from `isReady`. */
  watchRedis(isReady: () => boolean): void;
  /** Reports a store's circuit breaker at each scrape: open (1) or closed (0). */
  watchBreaker(store: string, breaker: BreakerState): void;
  // WebSockets (proxy/websocket.ts); the reasons are the close reasons docs/proxying.md lists.
  /** WebSockets open now, by route name. */
  readonly webSocketConnections: Gauge<'route'>;
  /** WebSockets closed, by route name and reason: client, backend, expired, reset, idle, drain, error. */
  readonly webSocketsClosed: Counter<'route' | 'reason'>;
  /**
   * Decisions of the routes' `allow` rules (proxy/policy.ts), by route name, rule (its name or
   * index, `none` when no rule matched) and outcome: `allow`, `deny`, `would_deny` (report mode).
   */
  readonly policyDecisions: Counter<'route' | 'rule' | 'outcome'>;
  /** Writes of the data file by the owner store (state/owners/file.ts). */
  readonly dataFileWrites: Counter;
  /** Owner changes those writes carried (group commit: several a write under a burst). */
  readonly dataFileChangesWritten: Counter;
  /** A mail's attempt ended so (owner/mail.ts): `sent`, `retry`, `failed` (given up), `dropped` (the outbox was full). */
  mailSent(result: MailResult): void;
  /** Reports the outbox's size at each scrape, from `read` (registered only while mail is on). */
  watchOutbox(read: () => Promise<number>): void;
  /** A webhook delivery's attempt ended so (owner/webhook-sender.ts): `delivered`, `retry`, `failed` (given up), `dropped` (queue full, endpoint gone or disabled). */
  webhookDelivered(result: WebhookResult): void;
  /** Reports the webhook queue's size at each scrape, from `read`. */
  watchWebhookQueue(read: () => Promise<number>): void;
  /**
   * POST /api/revoke (RFC 7009) by what the token was (`refresh_token`, `access_token`,
   * `unknown`: nothing of ours, answered 200 all the same) and outcome (`revoked`, `ignored`:
   * unknown, foreign or already over; `full`: the denylist was at its bound).
   */
  readonly revocations: Counter<'type' | 'outcome'>;
  /** POST /api/introspect (RFC 7662) by token kind (`access_token`, `external`, `settings_token`, `refresh_token`, `unknown`) and answer. */
  readonly introspections: Counter<'type' | 'active'>;
  /**
   * POST /api/leaks/github: each reported token by `result` (`true_positive`, `false_positive`),
   * and each refused report (`bad_signature`, `unknown_key`, `malformed`, `keys_unavailable`).
   */
  readonly leakReports: Counter<'result'>;
}

/** How a mail's attempt ended (owner/mail.ts). */
export type MailResult = 'sent' | 'retry' | 'failed' | 'dropped';
export type WebhookResult = 'delivered' | 'retry' | 'failed' | 'dropped';

/**
 * `accountLabelMaxAccounts`: above 0, requests are also counted per account, for the first that
 * many accounts this process sees (the rest under "(other)"): a bound an operator chooses,
 * since each account is a series of its own (per worker, too: workers may see different ones).
 */
export function createMetrics({ processMetrics = true, accountLabelMaxAccounts = 0 }: { processMetrics?: boolean; accountLabelMaxAccounts?: number } = {}): Metrics {
  const registry = new Registry();
  if (processMetrics) collectDefaultMetrics({ register: registry, prefix: 'gateway_' });
  const registers = [registry];
  const requests = createRequestMetrics(registers, accountLabelMaxAccounts === 0 ? undefined : createAccountCounter(accountLabelMaxAccounts, registry));
  const outcomes = createOutcomeCounters(registers);
  const watched = createWatchedGauges(registers);
  let scrape = () => registry.metrics();
  return {
    registry,
    scrape: () => scrape(),
    scrapeWith(given) {
      scrape = given;
    },
    ...createRateLimitMetrics(registers),
    ...createWebSocketMetrics(registers),
    ...createDataFileMetrics(registers),
    ...createIssuerMetrics(registers),
    ...createPolicyMetrics(registers),
    ...createMailMetrics(registers),
    ...createWebhookMetrics(registers),
    ...createTokenLifecycleMetrics(registers),
    ...requests,
    ...outcomes,
    ...watched,
  };
}

type Registers = Registry[];

/**
 * gateway_request_duration_seconds and the upstream side of each request: the histograms'
 * children bound once per label set and kept (the request path's cost, see the top).
 */
function createRequestMetrics(registers: Registers, countAccount: ((accountId: string, statusClass: number) => void) | undefined): Pick<Metrics, 'observeRequest' | 'upstreamFailed'> {
  const requestDuration = new Histogram({
    name: 'gateway_request_duration_seconds',
    help: 'Requests by route (a configured route\'s name, or the gateway\'s own route pattern), method and status class: seconds from arrival to the end of the answer (its _count is the request count).',
    labelNames: ['route', 'method', 'status_class'],
    buckets: [...LATENCY_BUCKETS],
    registers,
  });
  const upstreamDuration = new Histogram({
    name: 'gateway_upstream_response_seconds',
    help: 'Backend answers by target: seconds from sending the request to the answer\'s head.',
    labelNames: ['target'],
    buckets: [...LATENCY_BUCKETS],
    registers,
  });
  const upstreamErrors = new Counter({
    name: 'gateway_upstream_errors_total',
    help: 'Backend attempts that failed before an answer, by target and kind (connect, timeout, reset, other).',
    labelNames: ['target', 'kind'],
    registers,
  });
  const upstreamEjections = new Counter({
    name: 'gateway_upstream_ejections_total',
    help: 'Times a target was taken out of its pool after consecutive failures (passive health).',
    labelNames: ['target'],
    registers,
  });

  // Bound children: by route, then [method][status class].
  const requestChildren = new Map<string, (RequestChild | undefined)[][]>();
  const requestChild = (route: string, method: number, statusClass: number): RequestChild => {
    let byMethod = requestChildren.get(route);
    if (byMethod === undefined) {
      byMethod = METHOD_LABELS.map(() => []);
      requestChildren.set(route, byMethod);
    }
    return byMethod[method]![statusClass] ??= requestDuration.labels(route, METHOD_LABELS[method]!, STATUS_CLASSES[statusClass]!);
  };
  const upstreamChildren = new Map<string, ReturnType<typeof upstreamDuration.labels>>();
  return {
    observeRequest(route, method, status, seconds, upstreamOrigin, upstreamSeconds, accountId) {
      const statusClass = status >= 100 && status < 600 ? (status / 100) | 0 : 5;
      if (countAccount !== undefined && accountId !== undefined) countAccount(accountId, statusClass);
      requestChild(route, (method === undefined ? undefined : METHOD_INDEX.get(method)) ?? METHODS.length, statusClass).observe(seconds);
      if (upstreamOrigin !== undefined && upstreamSeconds !== undefined) {
        let child = upstreamChildren.get(upstreamOrigin);
        if (child === undefined) upstreamChildren.set(upstreamOrigin, child = upstreamDuration.labels(upstreamOrigin));
        child.observe(upstreamSeconds);
      }
    },
    upstreamFailed(origin, failure, ejected) {
      upstreamErrors.labels(origin, failure).inc();
      if (ejected) upstreamEjections.labels(origin).inc();
    },
  };
}

/** Counters of outcomes by one label: token checks, sign-ins, refreshes, resets, directory reads. */
function createOutcomeCounters(registers: Registers): Pick<Metrics, 'tokenValidated' | 'signIn' | 'refresh' | 'reset' | 'directoryCache' | 'directoryStoreFailed'> {
  const tokenValidations = new Counter({
    name: 'gateway_token_validations_total',
    help: 'Bearer-token checks by outcome (valid, missing, invalid, expired, revoked, unavailable).',
    labelNames: ['outcome'],
    registers,
  });
  const signIns = new Counter({ name: 'gateway_signins_total', help: 'Sign-ins (POST /api/signin, and client_credentials at POST /api/token) by outcome.', labelNames: ['outcome'], registers });
  const refreshes = new Counter({
    name: 'gateway_token_refreshes_total',
    help: 'Refresh-token rotations (POST /api/refresh, and refresh_token at POST /api/token) by outcome; outcome="reused" is a detected reuse (the family was revoked).',
    labelNames: ['outcome'],
    registers,
  });
  const resets = new Counter({ name: 'gateway_token_resets_total', help: 'Token resets (POST /api/reset) by outcome.', labelNames: ['outcome'], registers });
  const cacheReads = new Counter({
    name: 'gateway_directory_cache_reads_total',
    help: 'Directory reads (sign records, roles) by what answered them: hit (fresh copy), miss (the store was asked), stale (an older copy, while refreshing or while the store fails).',
    labelNames: ['result'],
    registers,
  });
  const cacheStoreErrors = new Counter({
    name: 'gateway_directory_store_errors_total',
    help: 'Directory store reads that failed or timed out.',
    registers,
  });
  // A counter with one label: its children bound on first use.
  const byValue = <T extends string>(counter: Counter<'outcome'> | Counter<'result'>) => {
    const children = new Map<string, { inc(): void }>();
    return (value: T) => {
      let child = children.get(value);
      if (child === undefined) children.set(value, child = counter.labels(value));
      child.inc();
    };
  };
  return {
    tokenValidated: byValue<TokenValidation>(tokenValidations),
    signIn: byValue<CredentialOutcome>(signIns),
    refresh: byValue<CredentialOutcome>(refreshes),
    reset: byValue<CredentialOutcome>(resets),
    directoryCache: byValue<CacheResult>(cacheReads),
    directoryStoreFailed: () => cacheStoreErrors.inc(),
  };
}

/** Gauges of state held elsewhere (breakers, the Redis connection), read when scraped. */
function createWatchedGauges(registers: Registers): Pick<Metrics, 'watchRedis' | 'watchBreaker'> {
  const breakers = new Map<string, BreakerState>();
  new Gauge({
    name: 'gateway_store_breaker_open',
    help: '1 while a store\'s circuit breaker is open or half-open (calls refused at once, or one trial call), 0 while closed. Across workers: the highest.',
    labelNames: ['store'],
    registers,
    aggregator: 'max',
    collect() {
      for (const [store, breaker] of breakers) this.labels(store).set(breaker.state === 0 ? 0 : 1);
    },
  });
  return {
    watchRedis(isReady) {
      // Registered only with Redis: a gateway without it must not report a connection down.
      new Gauge({
        name: 'gateway_redis_connected',
        help: '1 while the Redis connection is ready, 0 while it is down or reconnecting (absent without Redis). Across workers: the lowest.',
        registers,
        aggregator: 'min',
        collect() {
          this.set(isReady() ? 1 : 0);
        },
      });
    },
    watchBreaker(store, breaker) {
      breakers.set(store, breaker);
    },
  };
}

function createRateLimitMetrics(registers: Registers): Pick<Metrics, 'rateLimitDecisions' | 'rateLimitDegraded' | 'rateLimitStoreFailures'> {
  return {
    rateLimitDecisions: new Counter({
      name: 'gateway_rate_limit_decisions_total',
      help: 'Rate-limit decisions, by limit and outcome (would_refuse: a dry-run limit over its quota).',
      labelNames: ['limit', 'outcome'],
      registers,
    }),
    rateLimitDegraded: new Gauge({
      name: 'gateway_rate_limit_degraded',
      help: '1 while a limit cannot reach Redis and runs under its failure policy (memory, open or closed).',
      labelNames: ['limit', 'policy'],
      registers,
      aggregator: 'max',
    }),
    rateLimitStoreFailures: new Counter({
      name: 'gateway_rate_limit_store_failures_total',
      help: 'Rate-limit counter calls to Redis that failed or timed out, by limit and the policy applied instead.',
      labelNames: ['limit', 'policy'],
      registers,
    }),
  };
}

/** WebSockets: route names come from the configuration, reasons from a fixed list. */
function createWebSocketMetrics(registers: Registers): Pick<Metrics, 'webSocketConnections' | 'webSocketsClosed'> {
  return {
    webSocketConnections: new Gauge({
      name: 'gateway_websocket_connections',
      help: 'WebSockets open now, by route.',
      labelNames: ['route'],
      registers,
    }),
    webSocketsClosed: new Counter({
      name: 'gateway_websocket_closed_total',
      help: 'WebSockets closed, by route and reason (client, backend, expired, reset, idle, drain, error).',
      labelNames: ['route', 'reason'],
      registers,
    }),
  };
}

/** Revocation and introspection (auth/token-revocation.ts, auth/introspection.ts): fixed label values. */
function createTokenLifecycleMetrics(registers: Registers): Pick<Metrics, 'revocations' | 'introspections' | 'leakReports'> {
  return {
    leakReports: new Counter({
      name: 'gateway_leak_reports_total',
      help: 'Secret-scanning reports (POST /api/leaks/github): tokens by result (true_positive, false_positive), refused reports by why (bad_signature, unknown_key, malformed, keys_unavailable).',
      labelNames: ['result'],
      registers,
    }),
    revocations: new Counter({
      name: 'gateway_revocations_total',
      help: 'Token revocations (POST /api/revoke) by token type (refresh_token, access_token, unknown) and outcome (revoked, ignored, full).',
      labelNames: ['type', 'outcome'],
      registers,
    }),
    introspections: new Counter({
      name: 'gateway_introspections_total',
      help: 'Token introspections (POST /api/introspect) by token type (access_token, external, settings_token, refresh_token, unknown) and answer (true, false).',
      labelNames: ['type', 'active'],
      registers,
    }),
  };
}

/** Trusted issuers: `issuer` is a configured issuer URL (or "(unknown)"), outcomes a fixed list. */
function createIssuerMetrics(registers: Registers): Pick<Metrics, 'issuerKeysFetched' | 'issuerTokenChecked'> {
  const fetches = new Counter({
    name: 'gateway_issuer_keys_fetch_total',
    help: 'Fetches of a trusted issuer\'s keys (discovery and JWKS) by issuer and outcome (ok, timeout, too_large, http_error, unreachable, malformed, error).',
    labelNames: ['issuer', 'outcome'],
    registers,
  });
  const tokens = new Counter({
    name: 'gateway_issuer_tokens_total',
    help: 'Access tokens of other issuers checked, by issuer ("(unknown)" for one not configured) and outcome (valid, invalid, expired, keys_unavailable, not_accepted).',
    labelNames: ['issuer', 'outcome'],
    registers,
  });
  return {
    issuerKeysFetched: (issuer, outcome) => fetches.labels(issuer, outcome).inc(),
    issuerTokenChecked: (issuer, outcome) => tokens.labels(issuer, outcome).inc(),
  };
}

/** Route names and rule labels come from the configuration, outcomes from a fixed list: bounded. */
function createPolicyMetrics(registers: Registers): Pick<Metrics, 'policyDecisions'> {
  return {
    policyDecisions: new Counter({
      name: 'gateway_policy_decisions_total',
      help: 'Decisions of the routes\' allow rules, by route, rule (its name or index; none: no rule matched) and outcome (allow, deny, would_deny in report mode).',
      labelNames: ['route', 'rule', 'outcome'],
      registers,
    }),
  };
}

function createDataFileMetrics(registers: Registers): Pick<Metrics, 'dataFileWrites' | 'dataFileChangesWritten'> {
  return {
    dataFileWrites: new Counter({
      name: 'gateway_data_file_writes_total',
      help: 'Writes of the data file by the owner API (each a whole new version, flushed to disk).',
      registers,
    }),
    dataFileChangesWritten: new Counter({
      name: 'gateway_data_file_changes_written_total',
      help: 'Owner API changes those writes carried: the changes that arrive during a write share the next one (group commit).',
      registers,
    }),
  };
}

/** Requests per account and status class, for at most `max` accounts; any later one is "(other)". */
function createAccountCounter(max: number, registry: Registry): (accountId: string, statusClass: number) => void {
  const counter = new Counter({
    name: 'gateway_account_requests_total',
    help: `Requests by account and status class, for the first ${max} accounts this process saw (metrics.accountLabelMaxAccounts); later ones under account="(other)".`,
    labelNames: ['account', 'status_class'],
    registers: [registry],
  });
  const named = new Map<string, { inc(): void }[]>();
  const other: { inc(): void }[] = [];
  return (accountId, statusClass) => {
    let children = named.get(accountId);
    let account = accountId;
    if (children === undefined) {
      if (named.size < max) named.set(accountId, children = []);
      else {
        children = other;
        account = '(other)';
      }
    }
    (children[statusClass] ??= counter.labels(account, STATUS_CLASSES[statusClass]!)).inc();
  };
}

/** Webhooks (owner/webhook-sender.ts): results a fixed list, the queue one gauge. */
function createWebhookMetrics(registers: Registers): Pick<Metrics, 'webhookDelivered' | 'watchWebhookQueue'> {
  const delivered = new Counter({
    name: 'gateway_webhook_deliveries_total',
    help: 'Webhook delivery attempts by result: delivered, retry (failed, tried again later), failed (given up), dropped (the queue was full, or the endpoint gone or disabled).',
    labelNames: ['result'],
    registers,
  });
  return {
    webhookDelivered: (result) => delivered.labels(result).inc(),
    watchWebhookQueue(read) {
      new Gauge({
        name: 'gateway_webhook_queue_size',
        help: 'Webhook deliveries waiting in the queue. Across workers: the highest (they share one queue).',
        registers,
        aggregator: 'max',
        async collect() {
          this.set(await read().catch(() => -1));
        },
      });
    },
  };
}

/** Mail (owner/mail.ts): results a fixed list, the outbox one gauge. */
function createMailMetrics(registers: Registers): Pick<Metrics, 'mailSent' | 'watchOutbox'> {
  const sent = new Counter({
    name: 'gateway_mail_sent_total',
    help: 'Mail sending attempts by result: sent, retry (failed, tried again later), failed (given up after mail.maxAttempts), dropped (the outbox was full).',
    labelNames: ['result'],
    registers,
  });
  return {
    mailSent: (result) => sent.labels(result).inc(),
    watchOutbox(read) {
      new Gauge({
        name: 'gateway_mail_outbox_size',
        help: 'Mails waiting in the outbox (absent while mail is off). Across workers: the highest (they share one outbox).',
        registers,
        aggregator: 'max',
        async collect() {
          this.set(await read().catch(() => -1));
        },
      });
    },
  };
}
