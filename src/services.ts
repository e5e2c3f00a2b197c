/**
 * Builds every service from the config: the one place that picks implementations (process
 * memory by default, Redis when one is configured). Callers get interfaces and never import a
 * store's module.
 */
import { existsSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { resolve } from 'node:path';
import { createAuthenticator, type Authenticate } from './auth/bearer.js';
import { createDemoSecretGuard } from './auth/demo-secrets.js';
import { countAuthOutcomes, createAuthService, type AuthService } from './auth/service.js';
import { createRevocations, type Revocations } from './auth/revocation.js';
import { createKeyUseRecorder } from './auth/key-use.js';
import { createSettingsTokenAuth } from './auth/settings-tokens.js';
import { createSigner, type Signer } from './auth/signer.js';
import { usesRedis, type Config } from './config/schema.js';
import { createClientAddress, createReplaceableProxyTrust, type ProxyTrust } from './http/client-address.js';
import { createCors, type Cors } from './http/cors.js';
import type { ReadinessCheck } from './http/routes/health.js';
import { createLimiter } from './limits/limiter.js';
import { createRateLimits, createReplaceableRateLimits, type RateLimits } from './limits/rate-limits.js';
import { countUsage, createUsageRecorder, type UsageRecorder } from './limits/usage.js';
import { createOwnerServices, type OwnerServices } from './owner/service.js';
import { createProxy, type Proxy } from './proxy/proxy.js';
import { readDataFile, watchDataFile, type DataFile } from './stores/data-file.js';
import { createDataFileIfMissing } from './stores/data-file-writer.js';
import { checkDemoData } from './stores/demo-data.js';
import { createCachedDirectory, type CachedDirectory } from './stores/directory.cache.js';
import { HttpDirectory } from './stores/directory.http.js';
import { MemoryDirectory } from './stores/directory.memory.js';
import { watchDirectoryStore } from './stores/directory.readiness.js';
import { createRecordReader } from './stores/directory-records.js';
import { RedisDirectory } from './stores/directory.redis.js';
import type { Directory, DirectoryChanges } from './stores/directory.js';
import { MemoryRateCounters } from './stores/rate-counters.memory.js';
import { RedisRateCounters } from './stores/rate-counters.redis.js';
import type { RateCounters } from './stores/rate-counters.js';
import { MemoryKeyDirectory } from './stores/key-directory.memory.js';
import { FileOwnerStore, isShippedDemoFile } from './stores/owner-store.file.js';
import type { OwnerStore } from './stores/owner-store.js';
import { RedisOwnerStore } from './stores/owner-store.redis.js';
import { MemorySessionStore } from './stores/session-store.memory.js';
import { RedisSessionStore } from './stores/session-store.redis.js';
import type { SessionStore } from './stores/session-store.js';
import { RedisKeyDirectory } from './stores/key-directory.redis.js';
import type { KeyDirectory } from './stores/key-directory.js';
import { connectRedis, type RedisConnection } from './stores/redis/client.js';
import { warnUnlessDurable } from './stores/redis/durability.js';
import { MemoryRevocationStore } from './stores/revocation.memory.js';
import { RedisRevocationStore } from './stores/revocation.redis.js';
import { resetRetentionMs, type RevocationStore } from './stores/revocation.js';
import { MemoryRefreshTokenStore } from './stores/token-store.memory.js';
import { RedisRefreshTokenStore } from './stores/token-store.redis.js';
import type { RefreshTokenStore } from './stores/token-store.js';
import type { KeyUseStore } from './stores/key-use.js';
import { MemoryKeyUseStore } from './stores/key-use.memory.js';
import { RedisKeyUseStore } from './stores/key-use.redis.js';
import { MemoryUsageCounters } from './stores/usage-counters.memory.js';
import { RedisUsageCounters } from './stores/usage-counters.redis.js';
import type { UsageCounters } from './stores/usage-counters.js';
import type { Logger } from './telemetry/log.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';
import { createTracing, type Tracing } from './telemetry/tracing.js';
import { systemClock, type Clock, type Scheduler } from './util/clock.js';
import { createTimestampFormatter, type TimestampFormatter } from './util/time.js';

export interface Services {
  config: Config;
  log: Logger;
  clock: Clock;
  signer: Signer;
  auth: AuthService;
  keys: KeyDirectory;
  /** Roles and sign records: the configured store behind the cache. */
  directory: CachedDirectory;
  tokens: RefreshTokenStore;
  revocations: Revocations;
  /** The bearer-token check every protected path shares. */
  authenticate: Authenticate;
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
  formatTimestamp: TimestampFormatter;
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
 * error unless `data.allowDemoData` is set (stores/demo-data.ts).
 */
export function createServices(given: Config, { log, clock = systemClock, isProduction = false }: { log: Logger; clock?: Scheduler; isProduction?: boolean }): Services {
  const config = withSavedDemoData(given, log);
  if (createDataFileIfMissing(config.data.file)) log.warn({ file: config.data.file }, 'the data file did not exist: created it with no accounts');
  const data = readDataFile(config.data.file);
  /** Throws DemoDataError for demo keys a production gateway must not serve: at start-up and on each reload. */
  const checkDemoKeys = (next: DataFile) => {
    if (config.data.keySource !== 'file') return;
    const warning = checkDemoData(next, { file: config.data.file, isProduction, allowDemoData: config.data.allowDemoData });
    if (warning !== undefined) log.warn(warning);
  };
  checkDemoKeys(data);
  // Keys in Redis are read one at a time, never searched at start-up: the sign-in checks each (auth/demo-secrets.ts).
  if (isProduction && config.data.keySource === 'redis') {
    if (config.data.allowDemoData) log.warn('ALLOW_DEMO_DATA=true: the demo API keys and owners, whose secrets and passwords are published in the README, are served if Redis holds them; anyone who can reach the gateway can sign in with them (delete ALLOW_DEMO_DATA before this gateway is reachable)');
    else log.info('API keys and owners come from Redis (KEY_SOURCE=redis): a sign-in with a demo API secret or owner password published in the README is refused (NODE_ENV=production without ALLOW_DEMO_DATA)');
  }
  const metrics = createMetrics({ processMetrics: config.metrics.enabled, accountLabelMaxAccounts: config.metrics.accountLabelMaxAccounts });
  const signer = createSigner(config, clock);
  if (signer.isEphemeral) {
    log.warn('no signing key configured: made one for this process; tokens will not survive a restart (set signing.keys, and REDIS_URL for sessions to outlive it)');
  }
  const { tokens: t } = config;
  const retainMs = resetRetentionMs(t);
  // A heard reset notice matters as long as an access token from before it can live.
  const rememberMs = (t.accessTokenTtlSeconds + t.clockSkewSeconds) * 1000;

  let redis: RedisConnection | undefined;
  let keys: KeyDirectory;
  const fileKeys = new MemoryKeyDirectory(data);
  const fileDirectory = new MemoryDirectory(data);
  let tokens: RefreshTokenStore;
  let revocationStore: RevocationStore;
  const memoryCounters = new MemoryRateCounters({ clock, maxEntries: config.limits.memoryMaxEntries });
  let counters: RateCounters = memoryCounters;
  let draining = false;
  const readiness: ReadinessCheck[] = [];
  if (usesRedis(config)) {
    redis = connectRedis(config.redis, log, metrics);
    const shared = redis;
    keys = config.data.keySource === 'redis'
      ? new RedisKeyDirectory(shared, { cache: { ttlMs: config.redis.keyCacheTtlMs, maxEntries: config.redis.keyCacheMaxEntries, clock } })
      : fileKeys;
    tokens = new RedisRefreshTokenStore(shared);
    // The epoch is checked as often as a cached copy of resets is trusted without a notice.
    revocationStore = new RedisRevocationStore(shared, { retainMs, log, clock, checkEveryMs: config.redis.resetCacheTtlMs });
    counters = new RedisRateCounters(shared, {
      timeoutMs: config.limits.storeTimeoutMs,
      breakerFailures: config.redis.breakerFailures,
      breakerCooldownMs: config.redis.breakerCooldownMs,
    });
    // A write, not a PING: see RedisConnection.answersWrite.
    // Degradable unless required: every instance shares this Redis, and calls with valid tokens
    // go on without it (health.ts).
    readiness.push({ name: 'redis', timeoutMs: config.redis.commandTimeoutMs, isReady: () => shared.answersWrite(), degradable: !config.readiness.requireRedis });
  } else {
    const resets = new MemoryRevocationStore({ clock, retainMs });
    keys = fileKeys;
    tokens = new MemoryRefreshTokenStore({ clock, maxTokens: t.memoryStoreMaxTokens, resets });
    revocationStore = resets;
  }
  const ownerStore = createOwnerStore(config, { log, data, fileKeys, fileDirectory, isProduction, redis, keys, metrics });
  const fileOwners = ownerStore instanceof FileOwnerStore ? ownerStore : undefined;
  // Watched only while something is read from it.
  const fileInUse = config.data.keySource === 'file' || config.directory.store === 'file';
  const stopWatching = watchDataFile(config.data.file, fileInUse ? config.data.watchIntervalMs : 0, log, (next) => {
    checkDemoKeys(next);
    if (fileOwners === undefined) {
      fileKeys.load(next);
      fileDirectory.load(next);
    } else {
      // The store reads the file itself, in turn with its changes; keys and directory follow in its onCommit.
      fileOwners.refresh().catch((err: unknown) => log.warn({ err }, 'data file changed but the owner store could not read it'));
    }
  }, { isOwnVersion: (text) => fileOwners?.isOwnVersion(text) ?? false });
  const directory = createDirectory(config, { log, clock, redis, fileDirectory, readiness, metrics });
  // Always true today (createSigner throws without a usable key); listed so that /readyz says
  // so, and so that a key set replaced at run time is checked as well.
  readiness.push({ name: 'signingKeys', timeoutMs: config.redis.commandTimeoutMs, isReady: async () => signer.jwks.keys.length > 0 });
  // The skew is for instances whose clocks disagree with the one that made Redis's epoch. A
  // memory store's epoch comes from this process's clock, which issued every token it must
  // accept: allowing skew there would accept tokens reset in the seconds before a restart.
  const epochSkewMs = redis === undefined ? 0 : t.clockSkewSeconds * 1000;
  const revocations = createRevocations({ store: revocationStore, clock, ttlMs: config.redis.resetCacheTtlMs, rememberMs, skewMs: epochSkewMs });
  // Redis lost its data (a new epoch): no credential cached from it may answer another request.
  // The settings tokens' cache drops itself (auth/settings-tokens.ts); resets are read again.
  revocations.whenDataLost(() => {
    signer.forgetVerifiedTokens();
    if (keys instanceof RedisKeyDirectory) keys.dropCache();
    log.info('dropped every cached credential (verified access tokens, key records, API settings tokens): redis lost its data');
  });
  const keyUse: KeyUseStore = redis === undefined ? new MemoryKeyUseStore() : new RedisKeyUseStore(redis);
  // Whatever the key source: keys and owners in Redis are never checked at start-up (checkDemoKeys).
  const demoSecrets = createDemoSecretGuard({ refuse: isProduction && !config.data.allowDemoData, log });
  const auth = countAuthOutcomes(createAuthService({
    keys, tokens, signer, revocations, clock, log, settings: t,
    // An account reset also revokes its API settings tokens for good (a reset is remembered for a while only).
    onAccountReset: (accountId) => owner.settingsTokens.revokeAllOf(accountId),
    onSignIn: createKeyUseRecorder({ store: keyUse, clock, log }),
    demoSecrets,
  }), metrics);
  const settingsTokens = createSettingsTokenAuth({
    store: ownerStore, revocations, clock, log,
    cacheTtlMs: config.owner.settingsTokenCacheTtlMs, accessTokenTtlSeconds: t.accessTokenTtlSeconds, resetsRememberedMs: rememberMs,
  });
  const authenticate = createAuthenticator(signer, revocations, settingsTokens, metrics);
  const proxyTrust = createReplaceableProxyTrust(config.proxy.trustedProxies);
  const clientAddress = createClientAddress(config.proxy, proxyTrust.isTrusted);
  const limiter = createLimiter({ counters, memory: memoryCounters, log, metrics, clock });
  // Per-key usage, counted around the rate limits (a decorator, so that counting holds whatever
  // limits.mode is: counting usage is no rate limit) and flushed to the usage store.
  let usageStore: UsageCounters | undefined;
  if (config.usage.enabled) usageStore = redis === undefined ? new MemoryUsageCounters({ clock }) : new RedisUsageCounters(redis);
  const usage = usageStore === undefined ? undefined : createUsageRecorder({ store: usageStore, clock, log, flushIntervalMs: config.usage.flushIntervalMs });
  // Counters stay with the limiter across reloads; the rules that count on them are replaced whole.
  const limitsOf = (next: Config['limits']) => {
    const rateLimits = createRateLimits(next, limiter, clientAddress);
    return usage === undefined ? rateLimits : countUsage(rateLimits, usage);
  };
  const limits = createReplaceableRateLimits(limitsOf(config.limits));
  const cors = createCors(config.cors);
  // The trusted proxies as currently configured: a reload that changes them changes whose trace context is believed.
  const tracing = createTracing(config.tracing, { log, isTrustedPeer: proxyTrust.isTrusted, flushTimeoutMs: config.server.shutdownTimeoutMs });
  const proxy = createProxy({ config, log, clock, signer, authenticate, revocations, limits, cors, isTrustedProxy: proxyTrust.isTrusted, metrics, tracing });
  const sessions: SessionStore = redis === undefined ? new MemorySessionStore({ clock }) : new RedisSessionStore(redis, { clock });
  const owner = createOwnerServices({ store: ownerStore, sessions, revocations, clock, limits, log, config, usage: usageStore, keyUse, demoSecrets });

  return {
    config,
    cors,
    log,
    clock,
    signer,
    auth,
    keys,
    directory,
    tokens,
    revocations,
    authenticate,
    proxy,
    limits,
    usage,
    clientAddress,
    isTrustedProxy: proxyTrust.isTrusted,
    metrics,
    tracing,
    owner,
    ownerStore,
    formatTimestamp: createTimestampFormatter(config.data.timeZone),
    readiness,
    startDraining() {
      draining = true;
    },
    isDraining: () => draining,
    state: redis === undefined ? 'memory' : 'redis',
    async warmUp() {
      // The one wait that may fail: a gateway told to trace must not run without it.
      await tracing?.ready;
      if (redis === undefined) return;
      if (!(await redis.waitUntilReady(config.redis.connectTimeoutMs))) {
        log.warn('redis is not reachable yet: listening anyway; sign-in and refresh answer 503 until it is (see /readyz)');
        return;
      }
      // The epoch exists before the first token is issued, so no token of this start is from before it.
      await revocationStore.epoch().catch(() => {});
      await warnUnlessDurable(redis, log);
    },
    reload(next) {
      // The one step that can refuse goes first, so a refusal leaves everything as it was.
      signer.useKeys(next.signing);
      proxyTrust.replace(next.proxy.trustedProxies);
      limits.replace(limitsOf(next.limits));
      proxy.replaceRoutes(next.routes);
    },
    async close() {
      stopWatching();
      proxy.close();
      // Before Redis closes: the counts since the last flush go with it.
      await usage?.stop();
      await redis?.close();
      // Last: the spans of the requests that just finished go to the collector.
      await tracing?.shutdown();
    },
  };
}

/**
 * The configured directory store behind the one cache. Change notices come from the store
 * itself (a reloaded data file) and, whenever Redis is configured, from the Redis channel, so
 * the owners of an HTTP upstream can announce changes too.
 */
function createDirectory(config: Config, { log, clock, redis, fileDirectory, readiness, metrics }: {
  log: Logger;
  metrics: Metrics;
  clock: Clock;
  redis: RedisConnection | undefined;
  fileDirectory: MemoryDirectory;
  /** Gets the directory's check: its store answers, or a cached copy may still be served. */
  readiness: ReadinessCheck[];
}): CachedDirectory {
  const records = createRecordReader(config.directory.timeZone);
  const viaRedis = redis === undefined ? undefined : new RedisDirectory(redis, { records, log });
  let store: Directory;
  const changes: DirectoryChanges[] = [];
  if (config.directory.store === 'redis') {
    store = viaRedis!;
  } else if (config.directory.store === 'http') {
    store = new HttpDirectory(config.directory.http, { records, accountHeader: config.proxy.identityHeaders.account, log, metrics });
  } else {
    store = fileDirectory;
    changes.push(fileDirectory);
  }
  if (viaRedis !== undefined) changes.push(viaRedis);
  const { cache } = config.directory;
  const watched = watchDirectoryStore(store, { clock, servableMs: cache.ttlMs + cache.maxStaleMs });
  readiness.push({
    name: 'directory',
    timeoutMs: config.directory.store === 'http' ? config.directory.http.timeoutMs : config.redis.commandTimeoutMs,
    isReady: () => watched.isReady(),
    // A directory kept in Redis is down with Redis, on every instance alike (see the redis check).
    degradable: config.directory.store === 'redis' && !config.readiness.requireRedis,
  });
  return createCachedDirectory({ store: watched.store, changes, settings: cache, clock, log, metrics });
}

/**
 * Where the owner API writes: the data file when keys are read from it, Redis when they are.
 * A data file behind several instances (Redis configured, keys still from the file) is only
 * read: each instance would write its own copy. Roles and sign records are written only where
 * they are read (directory.store), so a change never goes where no instance would see it.
 */
function createOwnerStore(config: Config, { log, data, fileKeys, fileDirectory, isProduction, redis, keys, metrics }: {
  log: Logger;
  metrics: Metrics;
  /** The gateway's key directory: the owner store's key writes drop its cached records. */
  keys: KeyDirectory;
  data: DataFile;
  fileKeys: MemoryKeyDirectory;
  fileDirectory: MemoryDirectory;
  isProduction: boolean;
  redis: RedisConnection | undefined;
}): OwnerStore {
  const readOnly = usesRedis(config) && config.data.keySource === 'file'
    ? 'The data file is only read while Redis is configured (each instance has its own copy): set KEY_SOURCE=redis to manage accounts through the owner API.'
    : undefined;
  const directoryReadOnly = config.directory.store === 'http'
    ? 'Roles and sign records belong to the directory upstream (directory.store is "http"): change them there.'
    : config.directory.store !== config.data.keySource
      ? `Roles and sign records are read from ${config.directory.store === 'redis' ? 'Redis' : 'the data file'} while the owner API writes to ${config.data.keySource === 'redis' ? 'Redis' : 'the data file'}: set DIRECTORY_STORE and KEY_SOURCE alike to manage them here.`
      : undefined;
  if (config.data.keySource === 'redis') {
    const records = createRecordReader(config.directory.timeZone);
    return new RedisOwnerStore(redis!, {
      records, log, maxAuditEvents: config.owner.auditMaxEventsPerAccount, directoryReadOnly,
      onKeysWritten: keys instanceof RedisKeyDirectory ? () => keys.dropCache() : undefined,
    });
  }
  // Written back to the data file (the shipped demo file's changes to their own file): see stores/owner-store.file.ts.
  return new FileOwnerStore(config.data.file, data, {
    log,
    saveDemoTo: resolve(config.data.demoSaveFile),
    readOnly,
    directoryReadOnly,
    maxAuditEvents: config.owner.auditMaxEventsPerAccount,
    // The watcher's refusal (checkDemoKeys), without its warning: logged once per version already.
    check: config.data.keySource === 'file' ? (next) => void checkDemoData(next, { file: config.data.file, isProduction, allowDemoData: config.data.allowDemoData }) : undefined,
    onWrite(changes) {
      metrics.dataFileWrites.inc();
      metrics.dataFileChangesWritten.inc(changes);
    },
    onCommit(next, changes) {
      fileKeys.load(next);
      // Own changes name what they touched; a version read from the file may have touched anything.
      fileDirectory.load(next, changes);
    },
  });
}

/**
 * The file this configuration's owner store writes, which the process must lock first
 * (stores/data-file-lock.ts): the data file when keys are read from it and there is no Redis
 * (with Redis it is only read), the demo's save file in place of the shipped demo file.
 */
export function dataFileWrittenBy(config: Config): { file: string; createDirectory: boolean } | undefined {
  if (config.data.keySource !== 'file' || usesRedis(config)) return undefined;
  return isShippedDemoFile(config.data.file) ? { file: resolve(config.data.demoSaveFile), createDirectory: true } : { file: config.data.file, createDirectory: false };
}

/**
 * The shipped demo file is never written; what owners change on it is saved to
 * `data.demoSaveFile` (stores/owner-store.file.ts). Once that file exists it is the data file,
 * so the embedded default loses nothing at a restart.
 */
function withSavedDemoData(config: Config, log: Logger): Config {
  const saved = resolve(config.data.demoSaveFile);
  if (!isShippedDemoFile(config.data.file) || !existsSync(saved)) return config;
  log.info({ file: saved }, 'reading the demo data with the owner changes saved to it (data.demoSaveFile), not the shipped demo file');
  return { ...config, data: { ...config.data, file: saved } };
}
