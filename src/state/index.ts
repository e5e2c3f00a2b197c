/**
 * The one choice of state. Memory in this process, or Redis (one server, Sentinel or Cluster:
 * which of those is the connection's own business, redis/client.ts) is picked here, once, at
 * start-up; what comes out is the set of stores, and nothing above this folder asks where they
 * live. The data file, the directory store and the key source are choices of their own
 * (`data.*`, `directory.store`), made beside it.
 */
import { usesRedis, type Config } from '../config/schema.js';
import type { Logger } from '../telemetry/log.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Clock } from '../util/clock.js';
import { createFileAcmeStore, createMemoryChallengeStore } from './acme/file.js';
import { RedisAcmeStore, RedisChallengeStore } from './acme/redis.js';
import type { AcmeStore, ChallengeStore } from './acme/store.js';
import { watchDataFile } from './data-file/data-file.js';
import type { OpenedDataFile } from './data-file/open.js';
import type { CachedDirectory } from './directory/cache.js';
import { createDirectory } from './directory/create.js';
import { MemoryDpopProofStore } from './dpop-proofs/memory.js';
import { RedisDpopProofStore } from './dpop-proofs/redis.js';
import type { DpopProofStore } from './dpop-proofs/store.js';
import { MemoryDirectory } from './directory/memory.js';
import { MemoryTokenDenylist } from './denylist/memory.js';
import { RedisTokenDenylist } from './denylist/redis.js';
import type { TokenDenylist } from './denylist/store.js';
import { MemoryKeyUseStore } from './key-use/memory.js';
import { RedisKeyUseStore } from './key-use/redis.js';
import type { KeyUseStore } from './key-use/store.js';
import { MemoryKeyDirectory } from './keys/memory.js';
import { RedisKeyDirectory } from './keys/redis.js';
import type { KeyDirectory } from './keys/store.js';
import { openFileOutbox } from './outbox/file.js';
import { RedisOutbox } from './outbox/redis.js';
import type { OutboxStore } from './outbox/store.js';
import { MemoryWebhookLog } from './webhooks/memory.js';
import { fileWebhookQueue, redisWebhookQueue, type WebhookQueue } from './webhooks/queue.js';
import { RedisWebhookLog } from './webhooks/redis.js';
import type { WebhookLogStore } from './webhooks/store.js';
import { createOwnerStore } from './owners/create.js';
import { FileOwnerStore } from './owners/file.js';
import type { OwnerStore } from './owners/store.js';
import { MemoryRateCounters } from './rate-counters/memory.js';
import { RedisRateCounters } from './rate-counters/redis.js';
import type { RateCounters } from './rate-counters/store.js';
import type { StoreCheck } from './readiness.js';
import { connectRedis, type RedisConnection } from './redis/client.js';
import { warnUnlessDurable } from './redis/durability.js';
import { MemoryRevocationStore } from './revocation/memory.js';
import { RedisRevocationStore } from './revocation/redis.js';
import { resetRetentionMs, type RevocationStore } from './revocation/store.js';
import { MemoryCeremonyStore } from './ceremonies/memory.js';
import { RedisCeremonyStore } from './ceremonies/redis.js';
import type { CeremonyStore } from './ceremonies/store.js';
import { MemorySessionStore } from './sessions/memory.js';
import { RedisSessionStore } from './sessions/redis.js';
import type { SessionStore } from './sessions/store.js';
import { MemoryRefreshTokenStore } from './tokens/memory.js';
import { RedisRefreshTokenStore } from './tokens/redis.js';
import type { RefreshTokenStore } from './tokens/store.js';
import { MemoryUsageCounters } from './usage/memory.js';
import { RedisUsageCounters } from './usage/redis.js';
import type { UsageCounters } from './usage/store.js';

export { openDataFile, withSavedDemoData, type OpenedDataFile } from './data-file/open.js';
export { dataFileWrittenBy } from './owners/create.js';
export type { StoreCheck } from './readiness.js';
export type { AcmeCertificate, AcmeStore, ChallengeStore } from './acme/store.js';

/** The stores the gateway keeps, wherever they live. */
export interface State {
  /** Where shared state lives, for the start-up log. */
  where: 'memory' | 'redis';
  /** The API keys sign-in checks: the data file's, or Redis's with `data.keySource: redis`. */
  keys: KeyDirectory;
  tokens: RefreshTokenStore;
  /** Revoked access tokens, by jti until their expiry (RFC 7009; auth/denied-tokens.ts). */
  denylist: TokenDenylist;
  /** Account and global resets, and the epoch of the data they are kept in. */
  resets: RevocationStore;
  /**
   * The skew allowed between this instance's clock and the one that made the reset epoch: an
   * instance's own clock for Redis's epoch, none for a memory store's (this process's clock
   * issued every token it must accept; a skew would accept tokens reset in the seconds before a
   * restart).
   */
  epochSkewMs: number;
  /** The rate limits' counters: Redis's when configured, else `memoryRateCounters` itself. */
  rateCounters: RateCounters;
  /** This process's counters, which a limit with `policy: memory` falls back on (limits/limiter.ts). */
  memoryRateCounters: MemoryRateCounters;
  /** Roles and sign records: the configured store behind the one cache. */
  directory: CachedDirectory;
  /** What the owner API writes to. */
  owners: OwnerStore;
  /** Owner sign-in sessions. */
  sessions: SessionStore;
  /** WebAuthn ceremonies in flight (owner/passkeys.ts). */
  ceremonies: CeremonyStore;
  /** When each API key last signed in. */
  keyUse: KeyUseStore;
  /** DPoP proofs already used (their `jti`s), so a replay is refused on every instance. */
  dpopProofs: DpopProofStore;
  /** Per-key usage counts; undefined while `usage.enabled` is off. */
  usage: UsageCounters | undefined;
  /** ACME's account key, certificate and order lock: a file (acme.stateFile) alone, Redis's when configured. */
  acme: AcmeStore;
  /** The HTTP-01 answers the redirect listener serves: this process's, or Redis's, shared by every instance. */
  challenges: ChallengeStore;
  /** Mails waiting for the SMTP server: a file of its own alone, Redis's when configured; undefined while mail is off (`mail.smtpUrl`). */
  outbox: OutboxStore | undefined;
  /** Webhook deliveries owed: a file of their own alone (webhooks.queueFile), Redis's when configured. */
  webhookQueue: WebhookQueue;
  /** Each webhook endpoint's delivery log: this process's memory alone, Redis's when configured. */
  webhookLogs: WebhookLogStore;
  /** The stores' parts of /readyz (the HTTP layer adds its own). */
  readiness: StoreCheck[];
  /** Drops every key record cached from Redis (Redis lost its data); nothing is cached otherwise. */
  forgetCachedKeys(): void;
  /** Waits (bounded, never failing) for Redis to connect, then makes sure of the epoch and checks durability. */
  warmUp(): Promise<void>;
  /** Stops watching the data file and closes the connection to Redis. */
  close(): Promise<void>;
}

export interface StateDeps {
  /** The data file as start-up read it (openDataFile, before anything connects). */
  dataFile: OpenedDataFile;
  log: Logger;
  clock: Clock;
  metrics: Metrics;
  /** NODE_ENV=production: demo keys written to the data file are refused (data-file/demo-data.ts). */
  isProduction: boolean;
}

/** What lives where the shared state lives: made by one of the two functions below. */
interface SharedStores extends Pick<State, 'where' | 'keys' | 'tokens' | 'denylist' | 'resets' | 'epochSkewMs' | 'rateCounters' | 'sessions' | 'ceremonies' | 'keyUse' | 'dpopProofs' | 'usage' | 'acme' | 'challenges' | 'outbox' | 'webhookQueue' | 'webhookLogs' | 'readiness' | 'forgetCachedKeys' | 'warmUp'> {
  redis: RedisConnection | undefined;
}

export function createState(config: Config, { dataFile, log, clock, metrics, isProduction }: StateDeps): State {
  const { data } = dataFile;
  const fileKeys = new MemoryKeyDirectory(data);
  const fileDirectory = new MemoryDirectory(data);
  const memoryRateCounters = new MemoryRateCounters({ clock, maxEntries: config.limits.memoryMaxEntries });
  const shared = usesRedis(config)
    ? keptInRedis(config, connectRedis(config.redis, log, metrics), { log, clock, fileKeys })
    : keptInMemory(config, { clock, fileKeys, memoryRateCounters });
  const { redis } = shared;
  const owners = createOwnerStore(config, { log, data, fileKeys, fileDirectory, isProduction, redis, keys: shared.keys, metrics });
  const stopWatching = watchForChanges(config, { log, dataFile, owners, fileKeys, fileDirectory });
  const { directory, check } = createDirectory(config, { log, clock, redis, fileDirectory, metrics });
  return {
    where: shared.where,
    keys: shared.keys,
    tokens: shared.tokens,
    denylist: shared.denylist,
    resets: shared.resets,
    epochSkewMs: shared.epochSkewMs,
    rateCounters: shared.rateCounters,
    memoryRateCounters,
    directory,
    owners,
    sessions: shared.sessions,
    ceremonies: shared.ceremonies,
    keyUse: shared.keyUse,
    dpopProofs: shared.dpopProofs,
    usage: shared.usage,
    acme: shared.acme,
    challenges: shared.challenges,
    outbox: shared.outbox,
    webhookQueue: shared.webhookQueue,
    webhookLogs: shared.webhookLogs,
    readiness: [...shared.readiness, check],
    forgetCachedKeys: shared.forgetCachedKeys,
    warmUp: shared.warmUp,
    async close() {
      stopWatching();
      await redis?.close();
    },
  };
}

function keptInMemory(config: Config, { clock, fileKeys, memoryRateCounters }: { clock: Clock; fileKeys: MemoryKeyDirectory; memoryRateCounters: MemoryRateCounters }): SharedStores {
  const { tokens: t } = config;
  const resets = new MemoryRevocationStore({ clock, retainMs: resetRetentionMs(t) });
  return {
    where: 'memory',
    redis: undefined,
    keys: fileKeys,
    tokens: new MemoryRefreshTokenStore({ clock, maxTokens: t.memoryStoreMaxTokens, resets }),
    denylist: new MemoryTokenDenylist({ maxEntries: t.revokedAccessTokensMax }),
    resets,
    epochSkewMs: 0,
    // The same object: the limiter tells shared counters from its insurance by identity.
    rateCounters: memoryRateCounters,
    sessions: new MemorySessionStore({ clock }),
    ceremonies: new MemoryCeremonyStore({ clock }),
    keyUse: new MemoryKeyUseStore(),
    dpopProofs: new MemoryDpopProofStore({ clock, maxEntries: config.dpop.replayCacheMaxEntries }),
    usage: config.usage.enabled ? new MemoryUsageCounters({ clock }) : undefined,
    acme: createFileAcmeStore(config.acme.stateFile, clock),
    challenges: createMemoryChallengeStore(clock),
    outbox: config.mail.smtpUrl === undefined ? undefined : openFileOutbox(config.mail.outboxFile),
    webhookQueue: fileWebhookQueue(config.webhooks.queueFile),
    webhookLogs: new MemoryWebhookLog(),
    readiness: [],
    forgetCachedKeys: () => {},
    warmUp: async () => {},
  };
}

function keptInRedis(config: Config, redis: RedisConnection, { log, clock, fileKeys }: { log: Logger; clock: Clock; fileKeys: MemoryKeyDirectory }): SharedStores {
  const keys = config.data.keySource === 'redis'
    ? new RedisKeyDirectory(redis, { cache: { ttlMs: config.redis.keyCacheTtlMs, maxEntries: config.redis.keyCacheMaxEntries, clock } })
    : fileKeys;
  // The epoch is checked as often as a cached copy of resets is trusted without a notice.
  const resets = new RedisRevocationStore(redis, { retainMs: resetRetentionMs(config.tokens), log, clock, checkEveryMs: config.redis.resetCacheTtlMs });
  return {
    where: 'redis',
    redis,
    keys,
    tokens: new RedisRefreshTokenStore(redis),
    denylist: new RedisTokenDenylist(redis, { maxEntries: config.tokens.revokedAccessTokensMax, log }),
    resets,
    epochSkewMs: config.tokens.clockSkewSeconds * 1000,
    rateCounters: new RedisRateCounters(redis, {
      timeoutMs: config.limits.storeTimeoutMs,
      breakerFailures: config.redis.breakerFailures,
      breakerCooldownMs: config.redis.breakerCooldownMs,
    }),
    sessions: new RedisSessionStore(redis, { clock }),
    ceremonies: new RedisCeremonyStore(redis, { clock }),
    keyUse: new RedisKeyUseStore(redis),
    dpopProofs: new RedisDpopProofStore(redis),
    usage: config.usage.enabled ? new RedisUsageCounters(redis) : undefined,
    acme: new RedisAcmeStore(redis),
    challenges: new RedisChallengeStore(redis),
    outbox: config.mail.smtpUrl === undefined ? undefined : new RedisOutbox(redis),
    webhookQueue: redisWebhookQueue(redis),
    webhookLogs: new RedisWebhookLog(redis),
    // A write, not a PING: see RedisConnection.answersWrite.
    // Degradable unless required: every instance shares this Redis, and calls with valid tokens
    // go on without it (health.ts).
    readiness: [{ name: 'redis', timeoutMs: config.redis.commandTimeoutMs, isReady: () => redis.answersWrite(), degradable: !config.readiness.requireRedis }],
    forgetCachedKeys: () => {
      if (keys instanceof RedisKeyDirectory) keys.dropCache();
    },
    async warmUp() {
      if (!(await redis.waitUntilReady(config.redis.connectTimeoutMs))) {
        log.warn('redis is not reachable yet: listening anyway; sign-in and refresh answer 503 until it is (see /readyz)');
        return;
      }
      // The epoch exists before the first token is issued, so no token of this start is from before it.
      await resets.epoch().catch(() => {});
      await warnUnlessDurable(redis, log);
    },
  };
}

/**
 * Follows the data file while something is read from it: keys and the directory load each new
 * version, or, when the owner store writes the file, the store reads it in turn with its own
 * changes and they follow in its onCommit.
 */
function watchForChanges(config: Config, { log, dataFile, owners, fileKeys, fileDirectory }: {
  log: Logger;
  dataFile: OpenedDataFile;
  owners: OwnerStore;
  fileKeys: MemoryKeyDirectory;
  fileDirectory: MemoryDirectory;
}): () => void {
  const fileOwners = owners instanceof FileOwnerStore ? owners : undefined;
  const fileInUse = config.data.keySource === 'file' || config.directory.store === 'file';
  return watchDataFile(config.data.file, fileInUse ? config.data.watchIntervalMs : 0, log, (next) => {
    dataFile.checkDemoKeys(next);
    if (fileOwners === undefined) {
      fileKeys.load(next);
      fileDirectory.load(next);
    } else {
      fileOwners.refresh().catch((err: unknown) => log.warn({ err }, 'data file changed but the owner store could not read it'));
    }
  }, { isOwnVersion: (text) => fileOwners?.isOwnVersion(text) ?? false });
}
