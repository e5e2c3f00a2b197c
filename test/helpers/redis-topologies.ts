/**
 * Redis Cluster and Redis Sentinel for the tests, built from real redis-server processes on
 * free ports of 127.0.0.1, with nothing persisted: cluster and sentinel config files (which
 * both rewrite) live in a temporary directory removed on stop. Every process is killed in
 * t.after (or by `stop()`), and on a failed start before the error is thrown.
 *
 * Use inside a test run with redisSuite() (test/helpers/redis.ts): without redis-server and
 * redis-cli these cannot start.
 *
 * Both can be TLS-only (`tls`: files from test/helpers/redis-tls.ts, client certificates
 * required), and the sentinels can have a password of their own (`sentinelPassword`).
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { answersPing, freePort, PortTaken, redisArgs } from './redis.js';
import { answersTlsPing, tlsCliArgs, tlsConfigLines, tlsServerArgs, type TlsFiles } from './redis-tls.js';

const SERVER = process.env.REDIS_SERVER_BIN ?? 'redis-server';
const CLI = process.env.REDIS_CLI_BIN ?? 'redis-cli';
const START_TIMEOUT_MS = 20_000;

/** Anything with `after`: a TestContext, or a suite's own hook. */
export interface Cleanup {
  after(fn: () => Promise<void>): void;
}

export interface TestRedisCluster {
  /** Seed addresses, '127.0.0.1:port', one per master. */
  nodes: string[];
  ports: number[];
  /** SIGKILLs the node on `port` (a primary gone, with no replica to take over); resolves once it has exited. */
  killNode(port: number): Promise<void>;
  /** SIGSTOPs the node on `port`: its connections stay open, nothing is answered (stop() still kills it). */
  pauseNode(port: number): void;
  /** Kills every node and removes the config directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface TestRedisSentinel {
  /** The master, directly: redis://127.0.0.1:port. */
  url: string;
  masterPort: number;
  /** Sentinel addresses, '127.0.0.1:port'. */
  sentinels: string[];
  /** The master name the sentinels monitor. */
  name: string;
  /** Kills the sentinels and the master and removes the config directory. Safe to call twice. */
  stop(): Promise<void>;
}

/** Runs redis-cli against one port and resolves with what it printed (rejects on a non-zero exit). */
export function redisCli(port: number, args: string[], timeoutMs = 10_000, { tls, password, user }: { tls?: TlsFiles; password?: string; user?: string } = {}): Promise<string> {
  const options = [
    ...(tls === undefined ? [] : tlsCliArgs(tls)),
    ...(user === undefined ? [] : ['--user', user]),
    ...(password === undefined ? [] : ['-a', password, '--no-auth-warning']),
  ];
  return new Promise((resolve, reject) => {
    execFile(CLI, ['-h', '127.0.0.1', '-p', String(port), ...options, ...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`redis-cli -p ${port} ${args.join(' ')}: ${err.message} ${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * A Cluster of `masters` masters (3 by default: the smallest redis-cli creates) and no replicas,
 * every slot assigned and every node reporting cluster_state:ok.
 */
export function startRedisCluster(...args: Parameters<typeof startRedisClusterOnce>): Promise<TestRedisCluster> {
  return onFreshPorts(() => startRedisClusterOnce(...args));
}

async function startRedisClusterOnce(t?: Cleanup, { masters = 3, tls }: { masters?: number; tls?: TlsFiles } = {}): Promise<TestRedisCluster> {
  const group = await processGroup('gw-redis-cluster-', tls);
  t?.after(group.stop);
  try {
    const ports = await distinctFreePorts(masters * 2);
    const nodePorts = ports.slice(0, masters);
    await Promise.all(nodePorts.map((port, i) => group.launch(port, redisArgs(port, [
      '--cluster-enabled', 'yes',
      '--cluster-config-file', join(group.dir, `nodes-${port}.conf`),
      // The bus port is chosen too: port + 10000 (the default) may be taken or out of range.
      '--cluster-port', String(ports[masters + i]),
      '--cluster-node-timeout', '5000',
      '--dir', group.dir,
      ...(tls === undefined ? [] : [...tlsServerArgs(tls, port), '--tls-cluster', 'yes']),
    ]))));
    const nodes = nodePorts.map((port) => `127.0.0.1:${port}`);
    await run(CLI, [...(tls === undefined ? [] : tlsCliArgs(tls)), '--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], START_TIMEOUT_MS);
    await until(`cluster_state:ok on ${nodes.join(', ')}`, async () => {
      const infos = await Promise.all(nodePorts.map((port) => redisCli(port, ['cluster', 'info'], undefined, { tls }).catch(() => '')));
      return infos.every((info) => /cluster_state:ok/.test(info) && new RegExp(`cluster_known_nodes:${masters}\\b`).test(info));
    });
    return { nodes, ports: nodePorts, killNode: (port) => group.kill(port), pauseNode: (port) => group.signal(port, 'SIGSTOP'), stop: group.stop };
  } catch (err) {
    await group.stop();
    throw err;
  }
}

export function startRedisSentinel(...args: Parameters<typeof startRedisSentinelOnce>): Promise<TestRedisSentinel> {
  return onFreshPorts(() => startRedisSentinelOnce(...args));
}

/**
 * One master and `sentinelCount` sentinels (1 by default) monitoring it as `name` (quorum 1),
 * each answering with the master's address.
 */
async function startRedisSentinelOnce(t?: Cleanup, { name = 'mymaster', sentinelCount = 1, tls, sentinelPassword, sentinelUsername }: {
  name?: string;
  sentinelCount?: number;
  tls?: TlsFiles;
  /** The sentinels' own `requirepass` (the master has none); with `sentinelUsername`, that ACL user's password. */
  sentinelPassword?: string;
  /** An ACL user of the sentinels' own, the default user turned off. */
  sentinelUsername?: string;
} = {}): Promise<TestRedisSentinel> {
  const group = await processGroup('gw-redis-sentinel-', tls);
  t?.after(group.stop);
  try {
    const [masterPort, ...sentinelPorts] = await distinctFreePorts(1 + sentinelCount);
    await group.launch(masterPort!, redisArgs(masterPort!, ['--dir', group.dir, ...(tls === undefined ? [] : tlsServerArgs(tls, masterPort!))]));
    await Promise.all(sentinelPorts.map(async (port) => {
      const conf = join(group.dir, `sentinel-${port}.conf`);
      await writeFile(conf, [
        ...(tls === undefined ? [`port ${port}`] : tlsConfigLines(tls, port)),
        ...(sentinelPassword === undefined ? [] : sentinelUsername === undefined
          ? [`requirepass ${sentinelPassword}`]
          : [`user ${sentinelUsername} on >${sentinelPassword} allchannels +@all`, 'user default off']),
        'bind 127.0.0.1',
        `dir ${group.dir}`,
        'loglevel warning',
        `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
        `sentinel down-after-milliseconds ${name} 5000`,
        `sentinel failover-timeout ${name} 10000`,
        '',
      ].join('\n'));
      await group.launch(port, [conf, '--sentinel']);
    }));
    await until(`sentinels naming ${name} at 127.0.0.1:${masterPort}`, async () => {
      const answers = await Promise.all(sentinelPorts.map((port) => redisCli(port, ['sentinel', 'get-master-addr-by-name', name], undefined, { tls, password: sentinelPassword, user: sentinelUsername }).catch(() => '')));
      return answers.every((a) => a.split(/\s+/).filter(Boolean).join(':') === `127.0.0.1:${masterPort}`);
    });
    return {
      url: `${tls === undefined ? 'redis' : 'rediss'}://127.0.0.1:${masterPort}`,
      masterPort: masterPort!,
      sentinels: sentinelPorts.map((port) => `127.0.0.1:${port}`),
      name,
      stop: group.stop,
    };
  } catch (err) {
    await group.stop();
    throw err;
  }
}

/** One TLS-only redis-server (client certificates required): `url` is rediss://127.0.0.1:port. */
export function startRedisTls(...args: Parameters<typeof startRedisTlsOnce>): ReturnType<typeof startRedisTlsOnce> {
  return onFreshPorts(() => startRedisTlsOnce(...args));
}

async function startRedisTlsOnce(t: Cleanup, tls: TlsFiles): Promise<{ url: string; port: number; stop(): Promise<void> }> {
  const group = await processGroup('gw-redis-tls-', tls);
  t.after(group.stop);
  try {
    const [port] = await distinctFreePorts(1);
    await group.launch(port!, redisArgs(port!, ['--dir', group.dir, ...tlsServerArgs(tls, port!)]));
    return { url: `rediss://127.0.0.1:${port}`, port: port!, stop: group.stop };
  } catch (err) {
    await group.stop();
    throw err;
  }
}

/**
 * Starts again on new ports when a server could not bind one it was given: a free port is
 * picked, then bound a moment later, and another process can take it between the two (seen on
 * a busy machine). The failed attempt's processes are stopped first (each start does it).
 */
async function onFreshPorts<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt === 5) throw err;
    }
  }
}

/** redis-server processes sharing one temporary directory; `stop` kills them all and removes it. */
async function processGroup(prefix: string, tls?: TlsFiles) {
  // A server with a password answers -NOAUTH: it is up all the same.
  const answers = (port: number) => (tls === undefined ? answersPing(port, true) : answersTlsPing(tls, port));
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  let stopped = false;
  return {
    dir,
    async launch(port: number, args: string[]): Promise<void> {
      if (stopped) throw new Error('the group is stopped');
      const child = spawn(SERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      ports.push(port);
      let output = '';
      child.stdout!.on('data', (c: Buffer) => { output += c.toString(); });
      child.stderr!.on('data', (c: Buffer) => { output += c.toString(); });
      child.on('error', (err) => { output += String(err); });
      const deadline = Date.now() + START_TIMEOUT_MS;
      while (Date.now() < deadline) {
        if (child.exitCode !== null) {
          if (output.includes('Address already in use')) throw new PortTaken(`${SERVER} ${args.join(' ')}: port taken`);
          throw new Error(`${SERVER} ${args.join(' ')} exited (${child.exitCode}): ${output}`);
        }
        if (await answers(port)) return;
        await sleep(20);
      }
      assert.fail(`${SERVER} did not start on port ${port}: ${output}`);
    },
    /** Sends `signal` to the process serving `port`. */
    signal(port: number, signal: NodeJS.Signals): void {
      const index = ports.indexOf(port);
      if (index < 0) throw new Error(`no process on port ${port}`);
      children[index]!.kill(signal);
    },
    /** SIGKILLs the process serving `port` and waits for it to exit. */
    kill(port: number): Promise<void> {
      const index = ports.indexOf(port);
      if (index < 0) throw new Error(`no process on port ${port}`);
      return kill(children[index]!);
    },
    stop: async (): Promise<void> => {
      stopped = true;
      await Promise.all(children.map(kill));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

function run(command: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${command} ${args.join(' ')}: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = START_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
