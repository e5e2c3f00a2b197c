/**
 * A real redis-server for the tests: started on a free port on 127.0.0.1 with nothing
 * persisted (`--save '' --appendonly no`), stopped in t.after. It can be killed, paused and
 * restarted on the same port, to test what the gateway does when Redis fails.
 *
 * Where no redis-server is installed, Redis suites skip with a loud message, except under CI
 * (`CI` set), where a missing server fails the run: .ci/run installs it.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';
import type { TestContext } from 'node:test';
import { Redis } from 'ioredis';

import { configSchema, type Config } from '../../src/config/schema.js';
import { connectRedis, type RedisConnection } from '../../src/state/redis/client.js';
import { RedisRevocationStore } from '../../src/state/revocation/redis.js';
import type { RevocationStore } from '../../src/state/revocation/store.js';
import { createLogger } from '../../src/telemetry/log.js';

const BINARY = process.env.REDIS_SERVER_BIN ?? 'redis-server';

export const redisAvailable: boolean = spawnSync(BINARY, ['--version'], { stdio: 'ignore' }).status === 0;

let warned = false;

/**
 * Options for `test(name, redisSuite(), fn)`: skips the suite, loudly, when no redis-server is
 * installed and CI is unset; under CI the suite runs and fails.
 */
export function redisSuite(): { skip: string | false } {
  if (redisAvailable || process.env.CI) return { skip: false };
  const message = `redis-server is not installed: Redis suites SKIPPED (install it, e.g. apt-get install redis-server; CI runs them)`;
  if (!warned) {
    warned = true;
    process.stderr.write(`\n*** ${message} ***\n\n`);
  }
  return { skip: message };
}

export interface TestRedis {
  url: string;
  port: number;
  /** SIGKILL: the server is gone, with everything in it. */
  kill(): Promise<void>;
  /** SIGSTOP: the server keeps its connections but answers nothing. */
  pause(): void;
  resume(): void;
  /** Starts a new, empty server on the same port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startRedis(t?: TestContext, extraArgs: string[] = []): Promise<TestRedis> {
  let port = await freePort();
  let child: ChildProcess;
  // A free port is picked, then bound by redis-server a moment later: another process can take
  // it between the two (seen on a busy machine). Then a new port is picked.
  for (let attempt = 1; ; attempt++) {
    try {
      child = await launch(port, extraArgs);
      break;
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt === 5) throw err;
      port = await freePort();
    }
  }
  const redis: TestRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async kill() {
      await terminate(child, 'SIGKILL');
    },
    pause() {
      child.kill('SIGSTOP');
    },
    resume() {
      child.kill('SIGCONT');
    },
    async restart() {
      await terminate(child, 'SIGKILL');
      child = await launch(port, extraArgs);
    },
    async stop() {
      child.kill('SIGCONT');
      await terminate(child, 'SIGKILL');
    },
  };
  t?.after(() => redis.stop());
  return redis;
}

export function redisArgs(port: number, extra: string[] = []): string[] {
  return ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning', ...extra];
}

/** redis-server could not bind its port: another process holds it. */
export class PortTaken extends Error {}

/**
 * Starts redis-server on `port` and resolves once it serves there: its own "Ready to accept
 * connections" line (notice level), so that a server another test runs on a port this one could
 * not bind is never taken for it; where the caller sets its own log level, a PING answered while
 * this one runs.
 */
async function launch(port: number, extraArgs: string[]): Promise<ChildProcess> {
  const ownLogLevel = extraArgs.includes('--loglevel');
  const args = ownLogLevel ? redisArgs(port, extraArgs) : [...redisArgs(port), '--loglevel', 'notice', ...extraArgs];
  const child = spawn(BINARY, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => { output += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { output += c.toString(); });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      if (output.includes('Address already in use')) throw new PortTaken(`port ${port} is taken`);
      assert.fail(`redis-server exited: ${output}`);
    }
    if ((ownLogLevel || output.includes('Ready to accept connections')) && await answersPing(port) && child.exitCode === null) return child;
    await new Promise((r) => setTimeout(r, 20));
  }
  child.kill('SIGKILL');
  assert.fail(`redis-server did not start on port ${port}: ${output}`);
}

/** A raw PING over TCP, so the helper does not depend on the client under test; `orNoAuth`: a server asking for a password counts as up. */
export function answersPing(port: number, orNoAuth = false): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (ok: boolean) => { socket.destroy(); resolve(ok); };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('data', (d: Buffer) => done(d.toString().startsWith('+PONG') || (orNoAuth && d.toString().startsWith('-NOAUTH'))));
    socket.write('PING\r\n');
  });
}

function terminate(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

/**
 * The gateway's Redis settings for `url`, with a command timeout of 5 s unless `extra` sets one:
 * the product's 500 ms is for a server on its own machine, and a test's Redis shares two cores
 * with the whole suite (a healthy command went past 500 ms there). Tests of a stall set theirs.
 */
export function redisSettings(url: string, extra: Partial<Config['redis']> = {}): Config['redis'] {
  return { ...configSchema.parse({ redis: { url } }).redis, commandTimeoutMs: 5000, ...extra };
}

export const silentLog = createLogger('silent');

/**
 * A plain ioredis client, as an operator's redis-cli would be: to read what the stores wrote
 * and to change the server's settings behind the gateway's back. Closed in t.after.
 */
export async function rawRedisClient(t: TestContext, server: { url: string }): Promise<Redis> {
  const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  await client.connect();
  t.after(() => client.disconnect());
  return client;
}

/** A connection of the gateway's own client, once it is ready. */
export async function connectedRedis(settings: Config['redis'], timeoutMs = 10_000): Promise<RedisConnection> {
  const redis = connectRedis(settings, silentLog);
  if (!(await redis.waitUntilReady(timeoutMs))) {
    await redis.close();
    assert.fail('the Redis client did not become ready');
  }
  return redis;
}

/**
 * A new redis-server with a ready connection of the gateway's client, for a contract's factory
 * (no TestContext there): `close` ends both; a connection that fails stops the server first.
 */
export async function serverWithConnection(): Promise<{ server: TestRedis; redis: RedisConnection; close(): Promise<void> }> {
  const server = await startRedis();
  let redis: RedisConnection;
  try {
    redis = await connectedRedis(redisSettings(server.url));
  } catch (err) {
    await server.stop();
    throw err;
  }
  return {
    server,
    redis,
    close: async () => {
      await redis.close();
      await server.stop();
    },
  };
}

/**
 * Two connections, each with its own reset store: two gateway instances on one Redis, for the
 * revocation contract. `close` closes both, then runs `after` (stopping a server, say).
 */
export async function twoRevocationStores(settings: Config['redis'], retainMs: number, after: () => Promise<void> = async () => {}): Promise<{ a: RevocationStore; b: RevocationStore; close(): Promise<void> }> {
  const connections: RedisConnection[] = [];
  const close = async () => {
    for (const redis of connections) await redis.close();
    await after();
  };
  try {
    for (let i = 0; i < 2; i++) connections.push(await connectedRedis(settings));
  } catch (err) {
    await close();
    throw err;
  }
  const [a, b] = connections.map((redis) => new RedisRevocationStore(redis, { retainMs, log: silentLog }));
  return { a: a!, b: b!, close };
}
