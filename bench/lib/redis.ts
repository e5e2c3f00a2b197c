/**
 * A redis-server for a benchmark: started on a free port of 127.0.0.1 without persistence,
 * pinned to the client core, tracked (so it is stopped with everything else), and an admin
 * connection to it; and MONITOR over a piece of work, to count exactly what Redis ran.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { CLIENT_CORE, freePort, pinned } from './machine.js';
import { isRunning, Output, track } from './processes.js';

export interface RedisServer {
  proc: ChildProcess;
  port: number;
  url: string;
  admin: Redis;
  version: string;
}

/** redis-server with `--save '' --appendonly no`, its working directory in `dir`, on `core` (a taskset list). */
export async function startRedis(dir: string, core: string | null = CLIENT_CORE): Promise<RedisServer> {
  const port = await freePort();
  const [cmd, args] = pinned(core, 'redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning',
  ]);
  const proc = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  const out = new Output(proc.stdout);
  new Output(proc.stderr);
  const admin = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  admin.on('error', () => { /* a refused first connect is retried below; later errors fail the command that meets them */ });
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (!isRunning(proc)) throw new Error(`redis-server exited:\n${out.tail()}`);
    try {
      await admin.connect();
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${port}:\n${out.tail()}`);
      await sleep(50);
    }
  }
  const info = await admin.info('server');
  const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  return { proc, port, url: `redis://127.0.0.1:${port}`, admin, version };
}

/** A command as MONITOR showed it: its arguments (the name first, lowercase) and its source ("lua" inside a script). */
export interface MonitoredCommand {
  args: string[];
  source: string;
}

/** Every command Redis runs while `work` runs, in order, from MONITOR. */
export async function monitorWhile(admin: Redis, work: () => Promise<void>): Promise<MonitoredCommand[]> {
  const monitor = await admin.monitor();
  const seen: MonitoredCommand[] = [];
  const marker = `bench-marker-${process.pid}-${Math.random().toString(36).slice(2)}`;
  let sawMarker: () => void = () => {};
  const markerSeen = new Promise<void>((done) => { sawMarker = done; });
  let timer: NodeJS.Timeout | undefined;
  monitor.on('monitor', (_time: string, args: unknown[], source: string) => {
    const name = String(args[0]).toLowerCase();
    if (name === 'echo' && args[1] === marker) return sawMarker();
    seen.push({ args: [name, ...args.slice(1).map(String)], source });
  });
  try {
    await work();
    // Redis feeds MONITOR in execution order: once our marker shows, every earlier command has.
    await admin.echo(marker);
    const late = new Promise<never>((_, fail) => { timer = setTimeout(() => fail(new Error('MONITOR did not show the marker within 5 s')), 5000); });
    await Promise.race([markerSeen, late]);
  } finally {
    clearTimeout(timer);
    monitor.disconnect();
  }
  return seen;
}
