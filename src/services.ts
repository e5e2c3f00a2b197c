/**
 * Builds every service from the config: the one place that picks implementations (process
 * memory by default, Redis when one is configured). Callers get interfaces and never import a
 * store's module.
 */
import { createAuthenticator, type Authenticate } from './auth/bearer.js';
import { createAuthService, type AuthService } from './auth/service.js';
import { createRevocations, type Revocations } from './auth/revocation.js';
import { createSigner, type Signer } from './auth/signer.js';
import { usesRedis, type Config } from './config/schema.js';
import { createProxy, type Proxy } from './proxy/proxy.js';
import { readDataFile } from './stores/data-file.js';
import { MemoryDirectory } from './stores/directory.memory.js';
import type { Directory } from './stores/directory.js';
import { MemoryKeyDirectory } from './stores/key-directory.memory.js';
import { RedisKeyDirectory } from './stores/key-directory.redis.js';
import type { KeyDirectory } from './stores/key-directory.js';
import { connectRedis, type RedisConnection } from './stores/redis/client.js';
import { MemoryRevocationStore } from './stores/revocation.memory.js';
import { RedisRevocationStore } from './stores/revocation.redis.js';
import { resetRetentionMs, type RevocationStore } from './stores/revocation.js';
import { MemoryRefreshTokenStore } from './stores/token-store.memory.js';
import { RedisRefreshTokenStore } from './stores/token-store.redis.js';
import type { RefreshTokenStore } from './stores/token-store.js';
import type { Logger } from './telemetry/log.js';
import { systemClock, type Clock } from './util/clock.js';
import { createTimestampFormatter, type TimestampFormatter } from './util/time.js';

/** A dependency that can say whether it is usable right now (GET /readyz). */
export interface ReadinessCheck {
  name: string;
  isReady(): Promise<boolean>;
}

export interface Services {
  config: Config;
  log: Logger;
  clock: Clock;
  signer: Signer;
  auth: AuthService;
  keys: KeyDirectory;
  directory: Directory;
  tokens: RefreshTokenStore;
  revocations: Revocations;
  /** The bearer-token check every protected path shares. */
  authenticate: Authenticate;
  /** The configured routes to backends. */
  proxy: Proxy;
  formatTimestamp: TimestampFormatter;
  readiness: ReadinessCheck[];
  /** Where shared state lives, for the start-up log. */
  state: 'memory' | 'redis';
  /** Waits (bounded, never failing) for the stores to connect, so the first requests find them. */
  warmUp(): Promise<void>;
  /** Releases what the services hold (connections, timers). */
  close(): Promise<void>;
}

export function createServices(config: Config, { log, clock = systemClock }: { log: Logger; clock?: Clock }): Services {
  const data = readDataFile(config.data.file);
  const directory = new MemoryDirectory(data);
  const signer = createSigner(config, clock);
  if (signer.isEphemeral) {
    log.warn('no signing key configured: made one for this process; tokens will not survive a restart (set signing.keys)');
  }
  const { tokens: t } = config;
  const retainMs = resetRetentionMs(t);
  // A heard reset notice matters as long as an access token from before it can live.
  const rememberMs = (t.accessTokenTtlSeconds + t.clockSkewSeconds) * 1000;

  let redis: RedisConnection | undefined;
  let keys: KeyDirectory;
  let tokens: RefreshTokenStore;
  let revocationStore: RevocationStore;
  const readiness: ReadinessCheck[] = [];
  if (usesRedis(config)) {
    redis = connectRedis(config.redis, log);
    const shared = redis;
    keys = config.data.keySource === 'redis' ? new RedisKeyDirectory(shared) : new MemoryKeyDirectory(data);
    tokens = new RedisRefreshTokenStore(shared);
    revocationStore = new RedisRevocationStore(shared, { retainMs, log });
    readiness.push({ name: 'redis', isReady: () => shared.ping() });
  } else {
    const resets = new MemoryRevocationStore({ clock, retainMs });
    keys = new MemoryKeyDirectory(data);
    tokens = new MemoryRefreshTokenStore({ clock, maxTokens: t.memoryStoreMaxTokens, resets });
    revocationStore = resets;
  }
  const revocations = createRevocations({ store: revocationStore, clock, ttlMs: config.redis.resetCacheTtlMs, rememberMs });
  const auth = createAuthService({ keys, tokens, signer, revocations, clock, log, settings: t });
  const authenticate = createAuthenticator(signer, revocations);
  const proxy = createProxy({ config, log, clock, signer, authenticate, revocations });

  return {
    config,
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
    formatTimestamp: createTimestampFormatter(config.data.timeZone),
    readiness,
    state: redis === undefined ? 'memory' : 'redis',
    async warmUp() {
      if (redis !== undefined && !(await redis.waitUntilReady(config.redis.connectTimeoutMs))) {
        log.warn('redis is not reachable yet: listening anyway; sign-in and refresh answer 503 until it is (see /readyz)');
      }
    },
    async close() {
      proxy.close();
      await redis?.close();
    },
  };
}
