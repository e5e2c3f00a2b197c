/**
 * wrk as the load generator: C, closed loop, a fixed number of keep-alive connections, and a
 * latency histogram that needs no post-processing. Its scripts in bench/wrk/ print one line
 * `BENCHJSON {...}` at the end, read here.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLIENT_CORE, foreignCores, pinned, processCpuSeconds, sampleLoad, stolenCores } from './machine.js';
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
  /** Requests written (bench/wrk/bearer.lua; -1 for the other scripts), answered or not. */
  sent: number;
}

export interface WrkRun {
  /** Lua script, one of bench/wrk/*.lua. */
  script: string;
  url: string;
  connections: number;
  seconds: number;
  /** Arguments after `--`, for the script's init(). */
  args?: string[];
  /** The core(s) wrk runs on, a taskset list: CLIENT_CORE unless given (ALL_CORES: anywhere). */
  core?: string | null;
}

const BEARER_LUA = join(dirname(fileURLToPath(import.meta.url)), '..', 'wrk', 'bearer.lua');

/**
 * A run of `GET <path>` on the server at `url`, each request with the next token of
 * `tokensFile` (bench/wrk/bearer.lua), beginning after the first `start` tokens.
 */
export function bearerRun(url: string, path: string, tokensFile: string, connections: number, seconds: number, start = 0): WrkRun {
  return { script: BEARER_LUA, url: `${url}${path}`, connections, seconds, args: [tokensFile, path, String(start)] };
}

/** Runs wrk (one thread, on the client core) and returns its summary; throws if it failed. */
export async function runWrk({ script, url, connections, seconds, args = [], core = CLIENT_CORE }: WrkRun): Promise<WrkSummary> {
  const [cmd, argv] = pinned(core, 'wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '5s', '-s', script, url, '--', ...args]);
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

/** What a load run against one server yields. */
export interface LoadFigures {
  requests: number;
  /** Requests wrk wrote, answered or not (-1 when its script does not count them). */
  sent: number;
  /** Answers other than 2xx: must be 0. */
  non2xx: number;
  socketErrors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** CPU time of the server under test (all its threads) per request, µs. */
  serverCpuUsPerReq: number;
  /** Share of its core the server used: near 100 % when it is the bottleneck. */
  serverCoreUse: number;
  /** The server behind the one under test (a proxy's backend, on the client core), per request; only when there is one. */
  backendCpuUsPerReq?: number;
  /** wrk and this script, per request. */
  clientCpuUsPerReq: number;
  /** Share of one core used by wrk, this script and the backend if any (core 0 when pinned). */
  clientCoreUse: number;
  /** Cores' worth of CPU used by other processes on the machine during the run. */
  foreignCores: number;
  /** Cores' worth of time stolen by the hypervisor during the run. */
  stolenCores: number;
  /** 1, or more when earlier tries were disturbed by other processes and discarded. */
  attempts?: number;
}

/**
 * `run` (its script counting 2xx answers as `ok`, others as `bad`) against the server of pid
 * `server`, with the CPU it, the `backend` behind it if any, and the client side used meanwhile.
 */
export async function measureLoad(run: WrkRun, pids: { server: number }): Promise<LoadFigures>;
export async function measureLoad(run: WrkRun, pids: { server: number; backend: number }): Promise<LoadFigures & { backendCpuUsPerReq: number }>;
export async function measureLoad(run: WrkRun, { server, backend }: { server: number; backend?: number }): Promise<LoadFigures> {
  const serverBefore = processCpuSeconds(server);
  const backendBefore = backend === undefined ? 0 : processCpuSeconds(backend);
  const loadBefore = sampleLoad();
  const w = await runWrk(run);
  const loadAfter = sampleLoad();
  const serverAfter = processCpuSeconds(server);
  const backendAfter = backend === undefined ? 0 : processCpuSeconds(backend);
  const elapsed = w.duration_us / 1e6;
  const perReq = (cpuSeconds: number) => (cpuSeconds * 1e6) / Math.max(w.requests, 1);
  const client = loadAfter.self - loadBefore.self;
  return {
    requests: w.requests,
    sent: w.sent,
    non2xx: w.bad,
    socketErrors: socketErrors(w),
    rps: w.ok / elapsed,
    p50Ms: w.p50_us / 1000, p99Ms: w.p99_us / 1000, maxMs: w.max_us / 1000,
    serverCpuUsPerReq: perReq(serverAfter - serverBefore),
    serverCoreUse: (serverAfter - serverBefore) / elapsed,
    ...(backend === undefined ? {} : { backendCpuUsPerReq: perReq(backendAfter - backendBefore) }),
    clientCpuUsPerReq: perReq(client),
    clientCoreUse: (client + backendAfter - backendBefore) / elapsed,
    foreignCores: foreignCores(loadBefore, loadAfter),
    stolenCores: stolenCores(loadBefore, loadAfter),
  };
}
