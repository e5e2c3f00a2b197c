/**
 * Builds every service from the config: the one place that picks implementations (memory now,
 * Redis when configured). Callers get interfaces and never import a store's module.
 */
import { createAuthService, type AuthService } from './auth/service.js';
import { createSigner, type Signer } from './auth/signer.js';
import type { Config } from './config/schema.js';
import { readDataFile } from './stores/data-file.js';
import { MemoryDirectory } from './stores/directory.memory.js';
import type { Directory } from './stores/directory.js';
import { MemoryKeyDirectory } from './stores/key-directory.memory.js';
import type { KeyDirectory } from './stores/key-directory.js';
import { MemoryRefreshTokenStore } from './stores/token-store.memory.js';
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
  formatTimestamp: TimestampFormatter;
  readiness: ReadinessCheck[];
  /** Releases what the services hold (connections, timers). */
  close(): Promise<void>;
}

export function createServices(config: Config, { log, clock = systemClock }: { log: Logger; clock?: Clock }): Services {
  const data = readDataFile(config.data.file);
  const keys = new MemoryKeyDirectory(data);
  const directory = new MemoryDirectory(data);
  const tokens = new MemoryRefreshTokenStore({ clock, maxTokens: config.tokens.memoryStoreMaxTokens });
  const signer = createSigner(config, clock);
  if (signer.isEphemeral) {
    log.warn('no signing key configured: made one for this process; tokens will not survive a restart (set signing.keys)');
  }
  const auth = createAuthService({ keys, tokens, signer, clock, log, settings: config.tokens });

  return {
    config,
    log,
    clock,
    signer,
    auth,
    keys,
    directory,
    tokens,
    formatTimestamp: createTimestampFormatter(config.data.timeZone),
    readiness: [],
    async close() {},
  };
}
