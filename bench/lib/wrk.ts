/**
 * wrk as the load generator: C, closed loop, a fixed number of keep-alive connections, and a
 * latency histogram that needs no post-processing. Its scripts in bench/wrk/ print one line
 * `BENCHJSON {...}` at the end, read here.
 */
import { spawn } from 'node:child_process';
import { CLIENT_CORE, pinned } from './machine.js';
import { Output, track } from './processes.js';

export interface WrkSummary {
  requests: number;
  duration_us: number;
  /** Answers with a status above 399. */
  status_errors: number;
  connect_errors: number;
  read_errors: number;
  write_errors: number;
  timeouts: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  max_us: number;
  mean_us: number;
  /** Script-specific counters (-1 where a script keeps none). */
  ok: number;
  bad: number;
  starved: number;
}

export interface WrkRun {
  /** Lua script, one of bench/wrk/*.lua. */
  script: string;
  url: string;
  connections: number;
  seconds: number;
  /** Arguments after `--`, for the script's init(). */
  args?: string[];
}

/** Runs wrk (one thread, on the client core) and returns its summary; throws if it failed. */
export async function runWrk({ script, url, connections, seconds, args = [] }: WrkRun): Promise<WrkSummary> {
  const [cmd, argv] = pinned(CLIENT_CORE, 'wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '5s', '-s', script, url, '--', ...args]);
  const proc = track(spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] }));
  const out = new Output(proc.stdout);
  const err = new Output(proc.stderr);
  // wrk stops by itself after -d; this only guards against a wedged one.
  const killer = setTimeout(() => proc.kill('SIGKILL'), (seconds + 15) * 1000);
  // 'close', not 'exit': the summary line may still be in the pipe when the process has exited.
  const code = await new Promise<number | null>((done) => proc.once('close', (c) => done(c)));
  clearTimeout(killer);
  const line = out.lines.find((l) => l.startsWith('BENCHJSON '));
  if (code !== 0 || line === undefined) throw new Error(`wrk failed (exit ${code}):\n${err.tail()}\n${out.tail()}`);
  return JSON.parse(line.slice('BENCHJSON '.length)) as WrkSummary;
}

/** Requests that failed at the socket level (not an HTTP status). */
export function socketErrors(w: WrkSummary): number {
  return w.connect_errors + w.read_errors + w.write_errors + w.timeouts;
}
