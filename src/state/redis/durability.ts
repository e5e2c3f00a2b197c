/**
 * What the gateway needs of Redis to keep its promises, asked once at start-up: that it
 * persists every write (AOF: RDB snapshots alone lose what came after the last one, and that
 * partial loss leaves the epoch record in place, so nothing notices it), and that it evicts
 * nothing (`maxmemory-policy noeviction`: every gateway key has a TTL, so the volatile-*
 * policies would evict tokens and resets too). Neither is required to run, so an answer that
 * falls short is a warn line, not a refusal to start; a whole loss is caught anyway by the
 * epoch (state/revocation/store.ts), at the price of refusing every access token issued before it.
 *
 * Managed Redis often refuses CONFIG: then INFO says whether AOF is on (not whether RDB
 * snapshots are taken) and which eviction policy runs; if neither can be read, one line says
 * so. Everything is asked in one pipeline, whose error replies do not count against the
 * connection's circuit breaker.
 */
import type { Logger } from '../../telemetry/log.js';
import type { RedisConnection } from './client.js';

export interface Durability {
  /** AOF on: true, off: false, unknown: undefined. */
  aof: boolean | undefined;
  /** RDB save points configured: true, none: false, unknown (CONFIG refused): undefined. */
  snapshots: boolean | undefined;
  /** `maxmemory-policy`, undefined when it cannot be read. */
  evictionPolicy: string | undefined;
}

export async function readDurability(redis: RedisConnection): Promise<Durability | undefined> {
  let replies: [Error | null, unknown][] | null;
  try {
    replies = await redis.run((c) => c.pipeline()
      .config('GET', 'save')
      .config('GET', 'appendonly')
      .config('GET', 'maxmemory-policy')
      .info('persistence')
      .info('memory')
      .exec());
  } catch {
    return undefined;
  }
  const [save, appendonly, policy, persistence, memory] = (replies ?? []).map(([err, value]) => (err === null ? value : undefined));
  const aofInfo = infoField(persistence, 'aof_enabled');
  const aofConfig = configValue(appendonly);
  const saveConfig = configValue(save);
  return {
    aof: aofConfig !== undefined ? aofConfig === 'yes' : aofInfo !== undefined ? aofInfo === '1' : undefined,
    snapshots: saveConfig === undefined ? undefined : saveConfig.trim() !== '',
    evictionPolicy: configValue(policy) ?? infoField(memory, 'maxmemory_policy'),
  };
}

/** Logs what falls short, once; silent when Redis persists and evicts nothing. */
export async function warnUnlessDurable(redis: RedisConnection, log: Logger): Promise<void> {
  const d = await readDurability(redis);
  if (d === undefined || (d.aof === undefined && d.evictionPolicy === undefined)) {
    log.warn('could not learn whether redis persists its data (CONFIG GET and INFO refused): without AOF or RDB a restart loses every refresh token and reset, and the gateway then refuses every access token issued before');
    return;
  }
  if (d.aof === false && d.snapshots === false) {
    log.warn('redis persists nothing (no AOF, no RDB snapshots): a restart loses every refresh token and reset, and the gateway then refuses every access token issued before; turn on appendonly');
  } else if (d.aof === false && d.snapshots === true) {
    log.warn('redis has AOF off and keeps only RDB snapshots: a restart loses what was written since the last one, resets among them, and the gateway cannot tell; turn on appendonly');
  } else if (d.aof !== true) {
    log.warn('redis has AOF off (or does not say), and whether it takes RDB snapshots cannot be read (CONFIG GET refused): a restart may lose refresh tokens and resets; turn on appendonly');
  }
  if (d.evictionPolicy === undefined) {
    log.warn('could not read redis maxmemory-policy: it must be noeviction, or refresh tokens and resets may be evicted');
  } else if (d.evictionPolicy !== 'noeviction') {
    log.warn({ maxmemoryPolicy: d.evictionPolicy }, 'redis may evict keys (maxmemory-policy is not noeviction): refresh tokens and resets could vanish under memory pressure; set noeviction');
  }
}

/** The value of a CONFIG GET reply ([name, value]), undefined when refused or absent. */
function configValue(reply: unknown): string | undefined {
  return Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1] : undefined;
}

function infoField(reply: unknown, field: string): string | undefined {
  if (typeof reply !== 'string') return undefined;
  const match = new RegExp(`^${field}:(.*)$`, 'm').exec(reply);
  return match?.[1]?.trim();
}
