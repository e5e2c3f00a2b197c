/**
 * The one Redis client factory: standalone, Sentinel or Cluster from the config, set up to
 * fail fast. ioredis by default queues commands while disconnected and retries each up to 20
 * times, so a down Redis would hold every caller for seconds; here a command is refused at
 * once when there is no connection (no offline queue, no retries, nothing resent after a
 * reconnect), times out after `commandTimeoutMs` when Redis stalls, and a circuit breaker
 * (cockatiel) stops calling Redis at all after `breakerFailures` failures in a row, until one
 * trial call succeeds after `breakerCooldownMs`. The connection itself is retried forever in
 * the background, so the gateway recovers by itself.
 *
 * Every failure leaves here as StoreUnavailable (503 with Retry-After): a dependency failure
 * must never read as a bad token or bad credentials.
 */
import { BrokenCircuitError } from 'cockatiel';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../../config/schema.js';
import { StoreUnavailable } from '../../errors/errors.js';
import type { Logger } from '../../telemetry/log.js';
import type { Metrics } from '../../telemetry/metrics.js';
import { createStoreBreaker } from '../breaker.js';
import { redisKeys, type RedisKeys } from './keys.js';
import { SCRIPTS, type ScriptCommands } from './scripts.js';

export type RedisClient = (Redis | Cluster) & ScriptCommands;

export interface RedisConnection {
  readonly keys: RedisKeys;
  /** Runs one call through the breaker; any failure (no connection, timeout, open breaker, error reply) is StoreUnavailable. */
  run<T>(call: (client: RedisClient) => Promise<T>): Promise<T>;
  /**
   * Subscribes to a channel on a connection of its own, which waits and reconnects by itself.
   * `onGap` runs each time Redis confirms the subscription on a new connection: messages sent
   * before it were lost. `listening` is true from that moment until the connection drops.
   */
  subscribe(channel: string, onMessage: (message: string) => void, onGap: () => void): Subscription;
  /**
   * Runs `check` whenever the connection becomes ready (at start, and after each reconnection:
   * Redis may have come back empty) and every `intervalMs` while it is, until close. A check
   * that fails is tried again soon (backing off, at most `intervalMs` later): right after a
   * reconnection the breaker may still be open from the outage.
   */
  keepChecking(intervalMs: number, check: () => Promise<unknown>): void;
  /** True when Redis answers a PING now. */
  ping(): Promise<boolean>;
  /** Resolves once connected, or after `timeoutMs` whatever the state (it never rejects). */
  waitUntilReady(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface Subscription {
  /** True while the subscription is confirmed and its connection up: no message is being missed. */
  readonly listening: boolean;
}

/** `metrics`: the connection's state and its breaker's are reported there at each scrape. */
export function connectRedis(settings: Config['redis'], log: Logger, metrics?: Pick<Metrics, 'watchRedis' | 'watchBreaker'>): RedisConnection {
  const client = createClient(settings);
  for (const [name, script] of Object.entries(SCRIPTS)) client.defineCommand(name, script);
  let closed = false;
  const isClosed = () => closed;
  watchConnection(client, log, 'redis', isClosed);

  const { breaker, retryAfterSeconds } = createStoreBreaker('redis', settings, log);
  metrics?.watchRedis(() => client.status === 'ready');
  metrics?.watchBreaker('redis', breaker);

  const subscribers: (Redis | Cluster)[] = [];
  const stops: (() => void)[] = [];

  return {
    keys: redisKeys(settings.keyPrefix),

    async run(call) {
      try {
        return await breaker.execute(() => call(client as RedisClient));
      } catch (err) {
        if (!(err instanceof BrokenCircuitError)) log.debug({ err: describe(err) }, 'redis call failed');
        // Only name and message go on: an ioredis error carries the command's arguments
        // (digests, sealed pairs, whole scripts), which must not reach the log.
        throw new StoreUnavailable(new Error(describe(err)), retryAfterSeconds);
      }
    },

    subscribe(channel, onMessage, onGap) {
      const subscription = { listening: false };
      const listen = (subscriber: Redis) => {
        subscribers.push(subscriber);
        watchConnection(subscriber, log, 'redis subscriber', isClosed);
        subscriber.on('close', () => {
          subscription.listening = false;
        });
        // Subscribed anew on each (re)connection, and the gap reported once Redis confirms it:
        // a notice published before that moment is lost, one published after it is heard.
        // (ioredis's own resubscription gives no sign of when it took effect.)
        subscriber.on('ready', () => {
          subscriber.subscribe(channel).then(() => {
            subscription.listening = subscriber.status === 'ready';
            onGap();
          }, (err: unknown) => {
            // Refused on a live connection (an ACL, say) is worth a warning; cut off by a
            // reconnection it is tried again on the next 'ready'.
            if (subscriber.status === 'ready') log.warn({ err: describe(err) }, 'redis subscribe failed');
            else log.debug({ err: describe(err) }, 'redis subscribe interrupted');
          });
        });
        subscriber.on('message', (from: string, message: string) => {
          if (from === channel) onMessage(message);
        });
      };
      // Commands wait for the connection here: a subscription must outlive any outage.
      const patient = { enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined, autoResubscribe: false };
      if (!(client instanceof Cluster)) {
        listen(client.duplicate(patient));
        return subscription;
      }
      // On a Cluster, PUBLISH reaches every node, so one plain connection to any node hears all.
      // (ioredis's own Cluster subscriber replaces its connection without an event, which would
      // hide the gap.) When that node goes away, the next known node is tried.
      const seeds = settings.clusterNodes.map(hostPort);
      let attempt = 0;
      const connectNext = () => {
        if (closed) return;
        const known = client.nodes('master').map((n) => ({ host: n.options.host, port: n.options.port }));
        const pool = known.length > 0 ? known : seeds;
        const node = pool[attempt++ % pool.length]!;
        const subscriber = new Redis({ ...clientOptions(settings), ...patient, ...node, ...(settings.tls ? { tls: {} } : {}), retryStrategy: () => null });
        subscriber.once('end', () => {
          subscribers.splice(subscribers.indexOf(subscriber), 1);
          setTimeout(connectNext, backoffMs(attempt)).unref();
        });
        listen(subscriber);
      };
      connectNext();
      return subscription;
    },

    keepChecking(intervalMs, check) {
      let retry: NodeJS.Timeout | undefined;
      const attempt = (failures: number) => {
        clearTimeout(retry);
        if (closed || client.status !== 'ready') return;
        check().catch(() => {
          if (closed) return;
          retry = setTimeout(() => attempt(failures + 1), Math.min(backoffMs(failures), intervalMs));
          retry.unref();
        });
      };
      const onReady = () => attempt(0);
      client.on('ready', onReady);
      const timer = setInterval(onReady, intervalMs);
      timer.unref();
      stops.push(() => {
        clearInterval(timer);
        clearTimeout(retry);
      });
      onReady();
    },

    async ping() {
      try {
        await this.run((c) => c.ping());
        return true;
      } catch {
        return false;
      }
    },

    async waitUntilReady(timeoutMs) {
      if (client.status === 'ready') return true;
      return new Promise<boolean>((resolve) => {
        const done = (ready: boolean) => {
          clearTimeout(timer);
          client.off('ready', onReady);
          resolve(ready);
        };
        const onReady = () => done(true);
        const timer = setTimeout(() => done(false), timeoutMs);
        client.on('ready', onReady);
      });
    },

    async close() {
      closed = true;
      for (const stop of stops) stop();
      for (const c of [client, ...subscribers]) c.disconnect();
    },
  };
}

/** True for the StoreUnavailable of a call Redis did not answer within `commandTimeoutMs`. */
export function timedOut(error: unknown): boolean {
  return error instanceof StoreUnavailable && error.cause instanceof Error && error.cause.message.endsWith('Command timed out');
}

function clientOptions(settings: Config['redis']): RedisOptions {
  return {
    connectTimeout: settings.connectTimeoutMs,
    commandTimeout: settings.commandTimeoutMs,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    retryStrategy: backoffMs,
    ...(settings.username !== undefined ? { username: settings.username } : {}),
    ...(settings.password !== undefined ? { password: settings.password } : {}),
  };
}

function createClient(settings: Config['redis']): Redis | Cluster {
  const options = clientOptions(settings);
  if (settings.clusterNodes.length > 0) {
    return new Cluster(settings.clusterNodes.map(hostPort), {
      enableOfflineQueue: false,
      clusterRetryStrategy: backoffMs,
      redisOptions: { ...options, ...(settings.tls ? { tls: {} } : {}) },
    });
  }
  if (settings.sentinels.length > 0) {
    return new Redis({
      ...options,
      sentinels: settings.sentinels.map(hostPort),
      name: settings.sentinelName,
      // `tls` is for the master; the sentinels have an option of their own.
      ...(settings.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
    });
  }
  return new Redis(settings.url!, options);
}

/** Reconnect forever, backing off from 100 ms to one attempt a second. */
function backoffMs(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(attempt, 5), 1000);
}

function hostPort(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
}

/** Logs each loss and recovery once (not every failed reconnect), without the URL or password. */
function watchConnection(client: Redis | Cluster, log: Logger, name: string, isClosed: () => boolean): void {
  let up = false;
  client.on('ready', () => {
    up = true;
    log.info(`${name} connected`);
  });
  client.on('close', () => {
    if (up && !isClosed()) log.warn(`${name} connection lost: reconnecting`);
    up = false;
  });
  // Without a listener ioredis prints every connection error to the console.
  client.on('error', (err: unknown) => log.debug({ err: describe(err) }, `${name} error`));
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
