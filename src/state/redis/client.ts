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
 * must never read as a bad token or bad credentials. Except one: a script's `BADDATA` reply
 * (stored data it cannot decode, scripts.ts) is BadStoreData, and does not count against the
 * breaker: Redis answered, and one bad record must not cut every account off.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { BrokenCircuitError, CircuitState, handleWhen, type CircuitBreakerPolicy } from 'cockatiel';
import { Cluster, Command, Redis, ReplyError, type RedisOptions } from 'ioredis';
import type { Config } from '../../config/schema.js';
import { BadStoreData, StoreUnavailable } from '../../errors/errors.js';
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
   * On a Cluster, the primary (`host:port`) that the client's slot table names for `key`'s slot
   * now; undefined elsewhere (one server answers every key). For a breaker of one's own kept per
   * primary, as the connection's are (rate-counters.redis.ts).
   */
  nodeOf(key: string): string | undefined;
  /** A Cluster: a script's keys must then share one slot (rate-counters/redis.ts batches by it). */
  readonly cluster: boolean;
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
  /**
   * True when Redis takes a write now: a SET with a short PX of a key of its own (`keys.readiness`);
   * on a Cluster one on every primary, and every slot has one. For /readyz: a PING can be
   * answered by a node that does not hold the keys a sign-in writes, or by a replica-less
   * Cluster with a primary gone.
   */
  answersWrite(): Promise<boolean>;
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
  // Read once: a Cluster subscriber reconnecting later must not depend on the files still being there.
  const tls = tlsOption(settings);
  const client = createClient(settings, tls);
  for (const [name, script] of Object.entries(SCRIPTS)) client.defineCommand(name, script);
  const state: ConnectionState = { settings, log, client, tls, subscribers: [], stops: [], closed: false };
  watchConnection(client, log, 'redis', () => state.closed);

  // One breaker for a standalone server or a Sentinel's master; on a Cluster one per primary,
  // around each command sent to it, so that a lost or stalled shard fails its own slots' calls
  // at once and no other's. A reply about bad stored data is an answer: no breaker counts it.
  const nodes = client instanceof Cluster ? breakPerNode(client, settings, log) : undefined;
  const { breaker, retryAfterSeconds } = createStoreBreaker('redis', settings, log, handleWhen((err) => !isBadDataReply(err)));
  // On a Cluster a call may be retried inside ioredis (createClient): its answer is still due
  // within commandTimeoutMs of the call, whatever ioredis is doing with it.
  const deadlineMs = client instanceof Cluster ? settings.commandTimeoutMs : undefined;
  metrics?.watchRedis(() => client.status === 'ready');
  metrics?.watchBreaker('redis', nodes ?? breaker);

  const readinessKeys = keysBySlot(redisKeys(settings.keyPrefix));

  return {
    keys: redisKeys(settings.keyPrefix),

    async run(call) {
      try {
        if (deadlineMs !== undefined) return await withinDeadline(call(client as RedisClient), deadlineMs);
        return await breaker.execute(() => call(client as RedisClient));
      } catch (err) {
        if (isBadDataReply(err)) throw new BadStoreData(new Error(`stored data: ${err.message.slice('BADDATA '.length).replace(/ script: .*$/s, '')}`));
        if (!(err instanceof BrokenCircuitError)) log.debug({ err: describe(err) }, 'redis call failed');
        // Only name and message go on: an ioredis error carries the command's arguments
        // (digests, sealed pairs, whole scripts), which must not reach the log.
        throw new StoreUnavailable(new Error(describe(err)), retryAfterSeconds);
      }
    },

    cluster: client instanceof Cluster,

    nodeOf(key) {
      if (!(client instanceof Cluster)) return undefined;
      const slot = new Command('get', [key]).getSlot();
      return slot === null ? undefined : client.slots[slot]?.[0];
    },

    subscribe(channel, onMessage, onGap) {
      return subscribeChannel(state, channel, onMessage, onGap);
    },

    keepChecking(intervalMs, check) {
      keepCheckingWhileReady(state, intervalMs, check);
    },

    async answersWrite() {
      // A primary whose breaker is open fails its slots' calls: down at once, as one breaker's.
      if (nodes?.state === CircuitState.Open) return false;
      try {
        await this.run(async (c) => {
          if (!(c instanceof Cluster)) {
            await c.set(this.keys.readiness('standalone'), '1', 'PX', READINESS_KEY_TTL_MS);
            return;
          }
          await Promise.all(primariesBySlot(c).map(({ node, slot }) => node.set(readinessKeys.forSlot(c, slot), '1', 'PX', READINESS_KEY_TTL_MS)));
        });
        return true;
      } catch {
        return false;
      }
    },

    async waitUntilReady(timeoutMs) {
      return waitForReady(client, timeoutMs);
    },

    async close() {
      state.closed = true;
      for (const stop of state.stops) stop();
      for (const c of [client, ...state.subscribers]) c.disconnect();
    },
  };
}

/** What the connection's parts share: the command client, the subscribers' connections, and whether it was closed. */
interface ConnectionState {
  readonly settings: Config['redis'];
  readonly log: Logger;
  readonly client: Redis | Cluster;
  readonly tls: { tls?: ConnectionOptions };
  readonly subscribers: (Redis | Cluster)[];
  /** What `close` stops besides the connections (the timers of `keepChecking`). */
  readonly stops: (() => void)[];
  closed: boolean;
}

/** `RedisConnection.subscribe`. */
function subscribeChannel(state: ConnectionState, channel: string, onMessage: (message: string) => void, onGap: () => void): Subscription {
  const subscription = { listening: false };
  const listen = (subscriber: Redis) => listenOn(state, subscriber, subscription, channel, onMessage, onGap);
  const { client } = state;
  if (!(client instanceof Cluster)) {
    listen(client.duplicate(PATIENT));
    return subscription;
  }
  followClusterNodes(state, client, listen);
  return subscription;
}

// Commands wait for the connection here: a subscription must outlive any outage.
const PATIENT = { enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined, autoResubscribe: false };

/** Listens for `channel` on one subscriber connection, for as long as it lives. */
function listenOn(state: ConnectionState, subscriber: Redis, subscription: { listening: boolean }, channel: string, onMessage: (message: string) => void, onGap: () => void): void {
  const { log } = state;
  state.subscribers.push(subscriber);
  watchConnection(subscriber, log, 'redis subscriber', () => state.closed);
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
}

/**
 * On a Cluster, PUBLISH reaches every node, so one plain connection to any node hears all.
 * (ioredis's own Cluster subscriber replaces its connection without an event, which would
 * hide the gap.) When that node goes away, the next known node is tried.
 */
function followClusterNodes(state: ConnectionState, cluster: Cluster, listen: (subscriber: Redis) => void): void {
  const { settings, subscribers } = state;
  const seeds = settings.clusterNodes.map(hostPort);
  let attempt = 0;
  const connectNext = () => {
    if (state.closed) return;
    const known = cluster.nodes('master').map((n) => ({ host: n.options.host, port: n.options.port }));
    const pool = known.length > 0 ? known : seeds;
    const node = pool[attempt++ % pool.length]!;
    const subscriber = new Redis({ ...clientOptions(settings), ...PATIENT, ...node, ...state.tls, retryStrategy: () => null });
    subscriber.once('end', () => {
      subscribers.splice(subscribers.indexOf(subscriber), 1);
      setTimeout(connectNext, backoffMs(attempt)).unref();
    });
    listen(subscriber);
  };
  connectNext();
}

/** `RedisConnection.keepChecking`. */
function keepCheckingWhileReady(state: ConnectionState, intervalMs: number, check: () => Promise<unknown>): void {
  const { client } = state;
  let retry: NodeJS.Timeout | undefined;
  const attempt = (failures: number) => {
    clearTimeout(retry);
    if (state.closed || client.status !== 'ready') return;
    check().catch(() => {
      if (state.closed) return;
      retry = setTimeout(() => attempt(failures + 1), Math.min(backoffMs(failures), intervalMs));
      retry.unref();
    });
  };
  const onReady = () => attempt(0);
  client.on('ready', onReady);
  const timer = setInterval(onReady, intervalMs);
  timer.unref();
  state.stops.push(() => {
    clearInterval(timer);
    clearTimeout(retry);
  });
  onReady();
}

/** `RedisConnection.waitUntilReady`. */
function waitForReady(client: Redis | Cluster, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
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

/** `pending`, or a rejection once `ms` have passed without its answer (the command may still run). */
function withinDeadline<T>(pending: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Command timed out (no answer within ${ms} ms)`)), ms);
  });
  return Promise.race([pending, late]).finally(() => clearTimeout(timer));
}

function createClient(settings: Config['redis'], { tls }: { tls?: ConnectionOptions }): Redis | Cluster {
  const options = clientOptions(settings);
  if (settings.clusterNodes.length > 0) {
    return new Cluster(settings.clusterNodes.map(hostPort), {
      enableOfflineQueue: false,
      clusterRetryStrategy: backoffMs,
      // A command that a node answers CLUSTERDOWN or TRYAGAIN is by default sent again 100 ms
      // later, after a slots refresh, up to 16 times; failing at once is this client's way (the
      // breaker and Retry-After do the waiting). A command whose node connection closed under
      // it is still sent again (100 ms later, after a slots refresh): ioredis closes and remakes
      // node connections as its slot table changes, even on a healthy Cluster, and those
      // commands never reached Redis. Since a command's `commandTimeout` starts only when it is
      // first written to a node, such retries could outlast it (a killed primary once gave 503s
      // after 708 ms against 500 ms): `run` holds every Cluster call to the timeout itself.
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 0,
      retryDelayOnTryAgain: 0,
      redisOptions: { ...options, ...(tls !== undefined ? { tls } : {}) },
    });
  }
  if (settings.sentinels.length > 0) {
    return new Redis({
      ...options,
      sentinels: settings.sentinels.map(hostPort),
      name: settings.sentinelName,
      // The sentinels' own credentials: they are often not the master's.
      ...(settings.sentinelUsername !== undefined ? { sentinelUsername: settings.sentinelUsername } : {}),
      ...(settings.sentinelPassword !== undefined ? { sentinelPassword: settings.sentinelPassword } : {}),
      // `tls` is for the master; the sentinels have an option of their own.
      ...(tls !== undefined ? { tls, sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
    });
  }
  // A rediss:// URL turns TLS on by itself; the options add the CA and client certificate.
  return new Redis(settings.url!, { ...options, ...(tls !== undefined ? { tls } : {}) });
}

/**
 * The `tls` option when TLS is on: the CA to trust instead of the system's, and the client
 * certificate for servers that ask for one (`tls-auth-clients`). Read once, at start-up: a file
 * that cannot be read stops the start with its path in the error.
 */
function tlsOption(settings: Config['redis']): { tls?: ConnectionOptions } {
  const on = settings.url === undefined ? settings.tls : settings.url.startsWith('rediss:');
  if (!on) return {};
  const read = (path: string | undefined) => (path === undefined ? undefined : readFileSync(path));
  const ca = read(settings.tlsCaFile);
  const cert = read(settings.tlsCertFile);
  const key = read(settings.tlsKeyFile);
  return { tls: { ...(ca !== undefined ? { ca } : {}), ...(cert !== undefined ? { cert } : {}), ...(key !== undefined ? { key } : {}) } };
}

/** How long a readiness key lives: long enough to see it written, short enough to leave nothing behind. */
const READINESS_KEY_TTL_MS = 5000;
const SLOTS = 16_384;

/**
 * The primary of each slot range, one slot of it each, from the client's slot table; throws when
 * a slot has no primary the client holds a connection to (it is unserved).
 */
function primariesBySlot(cluster: Cluster): { node: Redis; slot: number }[] {
  const nodes = new Map(cluster.nodes('master').map((n) => [`${n.options.host}:${n.options.port}`, n]));
  const seen = new Map<string, { node: Redis; slot: number }>();
  for (let slot = 0; slot < SLOTS; slot++) {
    const owner = cluster.slots[slot]?.[0];
    const node = owner === undefined ? undefined : nodes.get(owner);
    if (node === undefined) throw new Error(`slot ${slot} has no primary`);
    if (!seen.has(owner!)) seen.set(owner!, { node, slot });
  }
  return [...seen.values()];
}

/**
 * A readiness key whose slot lives on the same primary as `slot`: the tag is found by trying
 * 0, 1, 2… (slots as ioredis computes them) and remembered per primary while it stays there.
 */
function keysBySlot(keys: RedisKeys) {
  const slotOf = (key: string) => new Command('set', [key]).getSlot()!;
  const found = new Map<string, string>();
  return {
    forSlot(cluster: Cluster, slot: number): string {
      const owner = cluster.slots[slot]![0]!;
      const known = found.get(owner);
      if (known !== undefined && cluster.slots[slotOf(known)]?.[0] === owner) return known;
      for (let tag = 0; tag < SLOTS * 8; tag++) {
        const key = keys.readiness(String(tag));
        if (cluster.slots[slotOf(key)]?.[0] === owner) {
          found.set(owner, key);
          return key;
        }
      }
      throw new Error(`no readiness key found for ${owner}`);
    },
  };
}

/**
 * A breaker per Cluster primary, around every command the Cluster client sends by slot: the
 * primary is the one the client's slot table names for the command's slot when it is sent (so a
 * replica promoted in its place gets a breaker of its own). An open breaker refuses the command
 * before it is sent. Commands with no key (PUBLISH, CLUSTER …), those sent to a node named by
 * the caller (the readiness writes) and MULTI transactions (sent node by node by ioredis) pass
 * unguarded: they still fail fast, by the command timeout and the deadline of `run`. A NOSCRIPT answer is no failure of the node:
 * ioredis sends the script itself next (scripts.ts).
 *
 * `state` is Open while any primary's breaker is, else the state of one that is not closed (the
 * gauge and /readyz: a shard is unserved).
 */
function breakPerNode(cluster: Cluster, settings: Config['redis'], log: Logger): { readonly state: CircuitState } {
  const breakers = new Map<string, CircuitBreakerPolicy>();
  const countsAgainstNode = handleWhen((err) => !err.message.includes('NOSCRIPT') && !isBadDataReply(err));
  const breakerOf = (node: string) => {
    let breaker = breakers.get(node);
    if (breaker === undefined) {
      breaker = createStoreBreaker(`redis node ${node}`, settings, log, countsAgainstNode).breaker;
      breakers.set(node, breaker);
    }
    return breaker;
  };
  const send = cluster.sendCommand.bind(cluster);
  cluster.sendCommand = ((command: Command, stream?: unknown, node?: unknown) => {
    const slot = node === undefined ? command.getSlot() : null;
    const owner = slot === null ? undefined : cluster.slots[slot]?.[0];
    if (owner === undefined) return send(command, stream as never, node);
    breakerOf(owner).execute(() => send(command, stream as never) as Promise<unknown>).catch((err: unknown) => {
      // Refused unsent: the caller waits on the command itself. (Other failures reach it there.)
      if (err instanceof BrokenCircuitError) command.reject(err);
    });
    return command.promise;
  }) as typeof cluster.sendCommand;
  return {
    get state() {
      const states = [...breakers.values()].map((b) => b.state);
      return states.includes(CircuitState.Open) ? CircuitState.Open : states.find((state) => state !== CircuitState.Closed) ?? CircuitState.Closed;
    },
  };
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

/** A script's refusal of stored data it cannot decode (scripts.ts, LIVE_FN): names the key, never the data. */
function isBadDataReply(err: unknown): err is Error {
  return err instanceof Error && err instanceof (ReplyError as typeof Error) && err.message.startsWith('BADDATA ');
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
