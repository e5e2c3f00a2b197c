/**
 * Reloading the configuration without a restart (docs/reload.md): on SIGHUP (main.ts), or when
 * `reload.watch` is on and the GATEWAY_CONFIG file changes, the configuration is read again
 * from the same sources as at start-up (defaults, file, environment) and validated whole.
 *
 * Only some settings can change in a running gateway (RELOADABLE below: routes, limits, trusted
 * proxies, signing keys); the services put those in force (services.ts reload). Any other
 * setting that differs is named in a warn line as needing a restart and keeps its running
 * value. A file that does not validate, or keys that do not load, change nothing: an error line
 * names the problems and the running configuration stays. Log lines name settings by path,
 * never by value (values may be secrets). test/ops/reload.test.ts holds it.
 */
import { unwatchFile, watchFile, type Stats } from 'node:fs';
import type { Logger } from '../telemetry/log.js';
import { ConfigError, deepFreeze } from './load.js';
import { configSchema, describeSettings, type Config } from './schema.js';

/**
 * Settings a reload puts in force, by path or path prefix ("limits." is the whole group), less
 * the exceptions: the counters' own sizing and timeout are fixed when the stores are built.
 */
const RELOADABLE = ['routes', 'limits.', 'proxy.trustedProxies', 'signing.'];
const FIXED = ['limits.storeTimeoutMs', 'limits.memoryMaxEntries'];

export function isReloadable(path: string): boolean {
  if (FIXED.includes(path)) return false;
  return RELOADABLE.some((p) => (p.endsWith('.') ? path.startsWith(p) : path === p));
}

export interface ConfigChanges {
  /** Reloadable settings whose value changed. */
  reloaded: string[];
  /** Settings that changed but keep their running value until a restart. */
  needsRestart: string[];
}

/** The leaf settings (schema.ts describeSettings paths) whose values differ. */
export function compareConfigs(running: Config, next: Config): ConfigChanges {
  const changes: ConfigChanges = { reloaded: [], needsRestart: [] };
  for (const { path } of describeSettings()) {
    if (JSON.stringify(valueAt(running, path)) === JSON.stringify(valueAt(next, path))) continue;
    (isReloadable(path) ? changes.reloaded : changes.needsRestart).push(path);
  }
  return changes;
}

/**
 * The running configuration with the reloadable settings of `next`, validated again as a whole
 * (a route valid beside the new file's dashboard path may collide with the running one); a
 * ConfigError when it does not hold together.
 */
export function withReloadable(running: Config, next: Config): Config {
  const merged = structuredClone(running) as Record<string, unknown>;
  for (const { path } of describeSettings()) {
    if (isReloadable(path)) setAt(merged, path, structuredClone(valueAt(next, path)));
  }
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.') || '(top level)'}: ${issue.message} (against the settings that need a restart)`));
  }
  // Paths were resolved by loadConfig already; parsing again only fills nothing new.
  return deepFreeze(parsed.data);
}

export type ReloadTrigger = 'SIGHUP' | 'file changed';

export interface ConfigReloader {
  /** Reads, validates and applies the configuration; true when it was put in force. Never throws. */
  reload(trigger: ReloadTrigger): boolean;
  /** The configuration in force (the start-up one with every reload applied). */
  readonly running: Config;
  /** Polls `file` every `intervalMs` and reloads when it changes; returns the way to stop. */
  watch(file: string, intervalMs: number): () => void;
}

export interface ConfigReloaderOptions {
  /** The configuration the gateway started with, as loadConfig made it. */
  initial: Config;
  /** Reads the configuration again (loadConfig with the process's environment); throws ConfigError. */
  load: () => Config;
  /** Puts a configuration in force (services.ts reload); throws, having changed nothing, to refuse it. */
  apply: (next: Config) => void;
  log: Logger;
}

export function createConfigReloader({ initial, load, apply, log }: ConfigReloaderOptions): ConfigReloader {
  let running = initial;

  function reload(trigger: ReloadTrigger): boolean {
    let changes: ConfigChanges;
    let next: Config;
    try {
      const read = load();
      changes = compareConfigs(running, read);
      next = withReloadable(running, read);
      // Applied even when nothing compares different: a pemFile's key may have been replaced in place.
      apply(next);
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : [(err as Error).message];
      log.error({ trigger, problems }, 'configuration reload failed: the running configuration stays in force');
      return false;
    }
    running = next;
    if (changes.needsRestart.length > 0) {
      log.warn({ trigger, settings: changes.needsRestart }, 'configuration reload: these settings changed but need a restart; they keep their running values');
    }
    log.info({ trigger, reloaded: changes.reloaded }, 'configuration reloaded');
    return true;
  }

  return {
    reload,
    get running() {
      return running;
    },
    watch(file, intervalMs) {
      const listener = (current: Stats, previous: Stats) => {
        if (current.mtimeMs === previous.mtimeMs && current.size === previous.size && current.ino === previous.ino) return;
        // Removed, or between an editor's unlink and rename: the next change brings it back.
        if (current.nlink === 0 && current.size === 0) return;
        reload('file changed');
      };
      watchFile(file, { interval: intervalMs, persistent: false }, listener);
      return () => unwatchFile(file, listener);
    },
  };
}

function valueAt(config: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], config);
}

function setAt(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let node = target;
  for (const key of keys.slice(0, -1)) node = node[key] as Record<string, unknown>;
  node[keys[keys.length - 1]!] = value;
}
