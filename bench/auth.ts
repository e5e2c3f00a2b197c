/**
 * Sign-in and refresh throughput, memory state vs Redis state, side by side in one run, and the
 * Redis round trips each operation costs. Results: a table on stdout, the section "Sign-in and
 * refresh: memory vs Redis" of bench/README.md, and bench/results/auth-<time>.json.
 *
 *   npm run bench:auth [-- --rounds 10 --seconds 3 --warmup 2 --connections 32 --quiet-wait 120
 *                          --runtime dist|tsx --profile --no-keys-variant --no-readme]
 *
 * What runs (everything on 127.0.0.1, every process started here is stopped here, also on
 * error and Ctrl-C):
 * - one redis-server on a free port (`--save '' --appendonly no`);
 * - three gateways, each on a free port with LOG_LEVEL=warn: `memory` (no Redis), `redis`
 *   (REDIS_URL, API keys from the data file: the default) and `redis+keys` (also
 *   KEY_SOURCE=redis, the keys imported with the product's own keys:import);
 * - wrk as the load generator, closed loop, a fixed number of keep-alive connections.
 * With two or more cores, the gateways are pinned to core 1, and wrk, redis-server and this
 * script to core 0, so the gateway under test has one core to itself and the client side
 * cannot steal from it.
 *
 * Rounds interleave the states (memory, redis, redis+keys, then the reverse order in the next
 * round), each run bounded by --seconds; figures are medians over the rounds. Redis round
 * trips are counted exactly with MONITOR over sequential calls (which tells the commands the
 * gateway sends from those its Lua scripts run inside Redis), and during each timed run from
 * INFO commandstats deltas (our own INFO calls excluded, the idle background subtracted).
 * The machine may be shared: before each run the script waits (within --quiet-wait seconds in
 * all) until other processes use less than 0.15 of a core, and reports what they used.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { describeSettings } from '../src/config/schema.js';
import { formatProfileSummary, summarizeProfile, type CpuProfile, type ProfileSummary } from './cpuprofile.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = join(ROOT, 'bench', 'results');
const BUILD_DIR = join(RESULTS, 'dist');
const README = join(ROOT, 'bench', 'README.md');
const SECTION = '## Sign-in and refresh: memory vs Redis';
const BEGIN = '<!-- bench:auth results: begin (written by npm run bench:auth) -->';
const END = '<!-- bench:auth results: end -->';

const API_KEY = 'ak_demo_alice';
const API_SECRET_HASH = createHash('sha256').update('sk_demo_alice_secret').digest('hex');
const SIGNIN_BODY = JSON.stringify({ apiKey: API_KEY, apiSecret: API_SECRET_HASH });

type StateName = 'memory' | 'redis' | 'redis+keys';
type Op = 'signin' | 'refresh';
const OPS: Op[] = ['signin', 'refresh'];

// ---------------------------------------------------------------------------------------------
// Options

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    runtime: { type: 'string', default: 'dist' },
    profile: { type: 'boolean', default: false },
    'no-keys-variant': { type: 'boolean', default: false },
    'no-readme': { type: 'boolean', default: false },
    'quiet-wait': { type: 'string', default: '120' },
  },
});
const ROUNDS = boundedInt('rounds', opt.rounds, 1, 20);
const SECONDS = boundedInt('seconds', opt.seconds, 1, 30);
const WARMUP = boundedInt('warmup', opt.warmup, 0, 30);
const CONNECTIONS = boundedInt('connections', opt.connections, 1, 512);
const QUIET_WAIT = boundedInt('quiet-wait', opt['quiet-wait'], 0, 600);
if (opt.runtime !== 'dist' && opt.runtime !== 'tsx') usage('--runtime is dist or tsx');
const STATES: StateName[] = opt['no-keys-variant'] ? ['memory', 'redis'] : ['memory', 'redis', 'redis+keys'];
/** Chains per refresh run: more than connections, see bench/wrk/refresh.lua. */
const CHAINS = 2 * CONNECTIONS + 1;
const PROBE_OPS = 200;
/** Hard bound on the whole run, whatever happens. */
const BUDGET_MS = (60 + QUIET_WAIT + STATES.length * OPS.length * (WARMUP + ROUNDS * (SECONDS + 2) + (opt.profile ? WARMUP + SECONDS + 5 : 0))) * 2 * 1000;

function boundedInt(name: string, text: string | undefined, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) usage(`--${name} must be an integer from ${min} to ${max}`);
  return n;
}

function usage(message: string): never {
  process.stderr.write(`bench:auth: ${message}\n`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Child processes: every one is tracked and stopped, whatever ends this script.

const children = new Set<ChildProcess>();
let stopping: Promise<void> | undefined;
/** This run's scratch folder (tokens, redis dir, profiles), removed at exit. */
let scratch: string | undefined;

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (!isRunning(child)) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => {
    if (isRunning(child)) child.kill('SIGKILL');
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

function stopAll(): Promise<void> {
  stopping ??= Promise.all([...children].map((c) => stopChild(c))).then(() => undefined);
  return stopping;
}

// Last resort (the event loop is gone): no grace, but nothing is left behind.
process.on('exit', () => {
  for (const child of children) if (isRunning(child) && child.pid !== undefined) {
    try { process.kill(child.pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  // Kept installed, so that a second Ctrl-C while stopping does not cut the clean-up short.
  process.on(signal, () => {
    if (stopping !== undefined) return;
    process.stderr.write(`\nbench:auth: ${signal}: stopping ${children.size} process(es)\n`);
    void stopAll().finally(() => process.exit(130));
  });
}

/** The last lines a process wrote, and how many were warnings or errors (pino levels 40+). */
class Output {
  readonly lines: string[] = [];
  problems = 0;
  #partial = '';
  constructor(stream: NodeJS.ReadableStream | null) {
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      const parts = (this.#partial + chunk).split('\n');
      this.#partial = parts.pop() ?? '';
      for (const line of parts) {
        if (/"level":\s*(4|5|6)\d/.test(line)) this.problems++;
        this.lines.push(line);
        if (this.lines.length > 40) this.lines.shift();
      }
    });
  }
  tail(n = 10): string {
    return [...this.lines.slice(-n), this.#partial].filter((l) => l !== '').join('\n');
  }
}

// ---------------------------------------------------------------------------------------------
// Machine

const nproc = cpus().length;
const hasTaskset = spawnSync('taskset', ['-V']).status === 0;
const PIN = hasTaskset && nproc >= 2;
const GATEWAY_CORE = '1';
const CLIENT_CORE = '0';
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

function pinned(core: string, cmd: string, args: string[]): [string, string[]] {
  return PIN ? ['taskset', ['-c', core, cmd, ...args]] : [cmd, args];
}

function firstLine(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n')[0]!.trim();
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** utime + stime of a whole process (every thread), in seconds; 0 once it is gone. */
function processCpuSeconds(pid: number, withReapedChildren = false): number {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 0;
  }
  // After "(name) ": stat(5) fields from 3 (state) on; utime is 14, stime 15, cutime 16, cstime 17.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  return (f[11]! + f[12]! + (withReapedChildren ? f[13]! + f[14]! : 0)) / CLK_TCK;
}

/** Context switches of every thread of a process so far (voluntary and not). */
function contextSwitches(pid: number): number {
  let n = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        for (const m of readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8').matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/gm)) n += Number(m[1]);
      } catch { /* the thread ended */ }
    }
  } catch { /* the process ended */ }
  return n;
}

/** CPU seconds every core of the machine spent busy (idle, iowait and steal excluded), and stolen by the hypervisor. */
function machineSeconds(): { busy: number; steal: number } {
  let busy = 0;
  let steal = 0;
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    if (!/^cpu\d+ /.test(line)) continue;
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
    busy += v[0]! + v[1]! + v[2]! + v[5]! + v[6]!;
    steal += v[7] ?? 0;
  }
  return { busy: busy / CLK_TCK, steal: steal / CLK_TCK };
}

/**
 * CPU used by this benchmark (this script, the processes it waited for such as wrk, and the
 * live ones it started) and by everything else on the machine. Others may be running tests in
 * the same checkout: their load is measured, waited out where possible, and reported.
 */
interface Load {
  at: number;
  machine: number;
  steal: number;
  self: number;
  children: number;
}

function sampleLoad(): Load {
  let live = 0;
  for (const child of children) if (isRunning(child) && child.pid !== undefined) live += processCpuSeconds(child.pid);
  const m = machineSeconds();
  return { at: performance.now(), machine: m.busy, steal: m.steal, self: processCpuSeconds(process.pid, true), children: live };
}

/** Cores' worth of CPU that something other than this benchmark used between two samples. */
function foreignCores(a: Load, b: Load): number {
  const seconds = (b.at - a.at) / 1000;
  const foreign = (b.machine - a.machine) - (b.self - a.self) - (b.children - a.children);
  return seconds <= 0 ? 0 : Math.max(0, foreign / seconds);
}

/** Cores' worth of time the hypervisor took from this machine between two samples. */
function stolenCores(a: Load, b: Load): number {
  const seconds = (b.at - a.at) / 1000;
  return seconds <= 0 ? 0 : (b.steal - a.steal) / seconds;
}

/** Foreign load above this many cores makes a run wait (up to the quiet-wait budget). */
const QUIET_CORES = 0.15;
let quietBudgetMs = 0;

async function waitForQuiet(label: string): Promise<number> {
  let waited = 0;
  for (;;) {
    const a = sampleLoad();
    await sleep(500);
    const load = foreignCores(a, sampleLoad());
    if (load < QUIET_CORES || quietBudgetMs <= 0) {
      if (waited > 0) log(`  (waited ${(waited / 1000).toFixed(1)} s for other load to pass before ${label}; now ${load.toFixed(2)} cores)`);
      return load;
    }
    if (waited === 0) log(`  other processes use ${load.toFixed(2)} cores: waiting before ${label}…`);
    waited += 500;
    quietBudgetMs -= 500;
  }
}

// ---------------------------------------------------------------------------------------------
// Redis

interface RedisServer {
  proc: ChildProcess;
  port: number;
  url: string;
  admin: Redis;
  version: string;
}

async function startRedis(dir: string): Promise<RedisServer> {
  const port = await freePort();
  const [cmd, args] = pinned(CLIENT_CORE, 'redis-server', [
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

/** Calls per command since the server started, without INFO (which this script sends). */
async function commandCalls(admin: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info') calls.set(m[1]!, Number(m[2]));
  }
  return calls;
}

function diffCalls(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const d = new Map<string, number>();
  for (const [cmd, n] of after) {
    const delta = n - (before.get(cmd) ?? 0);
    if (delta !== 0) d.set(cmd, delta);
  }
  return d;
}

function sumCalls(m: Map<string, number>): number {
  let n = 0;
  for (const v of m.values()) n += v;
  return n;
}

function describeCalls(m: Map<string, number>, per: number): string {
  if (m.size === 0) return 'none';
  return [...m].sort((a, b) => b[1] - a[1]).map(([cmd, n]) => `${cmd.toUpperCase()} ${(n / per).toFixed(2)}`).join(' + ');
}

// ---------------------------------------------------------------------------------------------
// Gateways

interface Gateway {
  state: StateName;
  proc: ChildProcess;
  pid: number;
  url: string;
  out: Output;
  err: Output;
}

interface Runtime {
  mode: 'dist' | 'tsx';
  /** Node arguments before any extra flags, then the entry point. */
  entry: string[];
  cli: (name: string) => string[];
  note: string;
}

function prepareRuntime(): Runtime {
  const tsx: Runtime = {
    mode: 'tsx',
    entry: ['--import', 'tsx', join(ROOT, 'src', 'main.ts')],
    cli: (name) => ['--import', 'tsx', join(ROOT, 'src', 'cli', `${name}.ts`)],
    note: 'src/ run through tsx (`node --import tsx src/main.ts`)',
  };
  if (opt.runtime === 'tsx') return tsx;
  rmSync(BUILD_DIR, { recursive: true, force: true });
  const tsc = join(ROOT, 'node_modules', '.bin', 'tsc');
  const r = spawnSync(tsc, ['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', BUILD_DIR], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0 || !existsSync(join(BUILD_DIR, 'main.js'))) {
    log(`build failed (src/ may be mid-edit), falling back to tsx:\n${(r.stdout + r.stderr).split('\n').slice(0, 10).join('\n')}`);
    return tsx;
  }
  return {
    mode: 'dist',
    entry: [join(BUILD_DIR, 'main.js')],
    cli: (name) => [join(BUILD_DIR, 'cli', `${name}.js`)],
    note: 'src/ compiled by `tsc -p tsconfig.build.json` into bench/results/dist and run as `node main.js` (as the Docker image runs dist/main.js; dist/ itself is not touched)',
  };
}

/** The environment with every gateway setting removed, so nothing from the caller's shell leaks in. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const row of describeSettings()) if (row.env !== undefined) delete env[row.env];
  delete env.GATEWAY_CONFIG;
  delete env.NODE_OPTIONS;
  return env;
}

function gatewayEnv(state: StateName, port: number, signingKeys: string, redisUrl: string): NodeJS.ProcessEnv {
  return {
    ...cleanEnv(),
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    SIGNING_KEYS: signingKeys,
    ...(state === 'memory' ? {} : { REDIS_URL: redisUrl }),
    ...(state === 'redis+keys' ? { KEY_SOURCE: 'redis' } : {}),
  };
}

async function startGateway(state: StateName, runtime: Runtime, signingKeys: string, redisUrl: string, nodeFlags: string[] = []): Promise<Gateway> {
  // PORT=0 would pick a port, but the line that names it is logged at info, under LOG_LEVEL=warn.
  const port = await freePort();
  const [cmd, args] = pinned(GATEWAY_CORE, process.execPath, [...nodeFlags, ...runtime.entry]);
  const proc = track(spawn(cmd, args, { cwd: ROOT, env: gatewayEnv(state, port, signingKeys, redisUrl), stdio: ['ignore', 'pipe', 'pipe'] }));
  const gw: Gateway = { state, proc, pid: proc.pid!, url: `http://127.0.0.1:${port}`, out: new Output(proc.stdout), err: new Output(proc.stderr) };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (!isRunning(proc)) throw new Error(`gateway ${state} exited before listening:\n${gw.err.tail()}\n${gw.out.tail()}`);
    try {
      const res = await fetch(`${gw.url}/readyz`);
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`gateway ${state} not ready on ${gw.url}:\n${gw.err.tail()}\n${gw.out.tail()}`);
    await sleep(50);
  }
  return gw;
}

interface Pair {
  accessToken: string;
  refreshToken: string;
}

async function post(url: string, body: string): Promise<{ status: number; pair?: Pair }> {
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const json = await res.json() as { message?: Partial<Pair> };
  const m = json.message;
  return res.status === 200 && typeof m?.refreshToken === 'string' && typeof m.accessToken === 'string'
    ? { status: res.status, pair: m as Pair }
    : { status: res.status };
}

async function signIn(gw: Gateway): Promise<Pair> {
  const r = await post(`${gw.url}/api/signin`, SIGNIN_BODY);
  if (r.pair === undefined) throw new Error(`sign-in on ${gw.state} answered ${r.status}`);
  return r.pair;
}

async function refresh(gw: Gateway, token: string): Promise<Pair> {
  const r = await post(`${gw.url}/api/refresh`, JSON.stringify({ refreshToken: token }));
  if (r.pair === undefined) throw new Error(`refresh on ${gw.state} answered ${r.status}`);
  return r.pair;
}

/** Signs in `n` times (8 at a time) and writes the refresh tokens, one a line. */
async function prepareChains(gw: Gateway, n: number, file: string): Promise<void> {
  const tokens: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < n) {
      next++;
      tokens.push((await signIn(gw)).refreshToken);
    }
  }));
  writeFileSync(file, `${tokens.join('\n')}\n`);
}

// ---------------------------------------------------------------------------------------------
// Load (wrk)

interface WrkSummary {
  requests: number;
  duration_us: number;
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
  /** refresh only (-1 for sign-in): answers 200 whose successor token was read. */
  ok: number;
  bad: number;
  starved: number;
}

async function runWrk(gw: Gateway, op: Op, seconds: number, tokensFile: string): Promise<WrkSummary> {
  const script = join(ROOT, 'bench', 'wrk', `${op}.lua`);
  const tail = op === 'signin' ? [SIGNIN_BODY] : [tokensFile, '1'];
  const [cmd, args] = pinned(CLIENT_CORE, 'wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--timeout', '5s', '-s', script, `${gw.url}/api/${op}`, '--', ...tail]);
  const proc = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  const out = new Output(proc.stdout);
  const err = new Output(proc.stderr);
  const killer = setTimeout(() => proc.kill('SIGKILL'), (seconds + 15) * 1000);
  const code = await new Promise<number | null>((done) => proc.once('exit', (c) => done(c)));
  clearTimeout(killer);
  const line = out.lines.find((l) => l.startsWith('BENCHJSON '));
  if (code !== 0 || line === undefined) throw new Error(`wrk failed (exit ${code}):\n${err.tail()}\n${out.tail()}`);
  return JSON.parse(line.slice('BENCHJSON '.length)) as WrkSummary;
}

interface Run {
  state: StateName;
  op: Op;
  round: number;
  ok: number;
  errors: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  gatewayCpuUsPerOp: number;
  /** Context switches of the gateway's threads (main thread and libuv's pool), per operation. */
  gatewaySwitchesPerOp: number;
  /** wrk and this script, per operation. */
  clientCpuUsPerOp: number;
  /** Cores' worth of CPU used by other processes on the machine during the run. */
  foreignCores: number;
  /** Cores' worth of time stolen by the hypervisor during the run. */
  stolenCores: number;
  /** Share of one core the gateway (all its threads) used: near 1 when it is the bottleneck. */
  gatewayCoreUse: number;
  /** Share of one core used by wrk, redis-server and this script together (core 0 when pinned). */
  clientCoreUse: number;
  /** 1, or more when earlier tries were disturbed by other processes and discarded. */
  attempts?: number;
  redisCpuUsPerOp?: number;
  /** Every command Redis ran, those inside scripts included, by name. */
  redisCalls?: Map<string, number>;
  /** Commands sent by the gateway (scripts count once, as EVALSHA), per operation. */
  roundTripsPerOp?: number;
  /** All commands Redis executed, inside scripts included, per operation. */
  commandsPerOp?: number;
}

interface Context {
  redis: RedisServer;
  tmp: string;
  /** Redis commands per second while every gateway idles (subscriber, health checks, …). */
  backgroundPerSec: number;
  /** Command names the gateway sends itself (from the MONITOR probe); the rest run inside scripts. */
  topLevel: Set<string>;
}

async function measure(ctx: Context, gw: Gateway, op: Op, seconds: number, round: number): Promise<Run> {
  const tokens = join(ctx.tmp, `tokens-${gw.pid}-${op}.txt`);
  if (op === 'refresh') await prepareChains(gw, CHAINS, tokens);
  await waitForQuiet(`${gw.state} ${OP_NAME[op]}`);
  const usesRedis = gw.state !== 'memory';
  const callsBefore = usesRedis ? await commandCalls(ctx.redis.admin) : undefined;
  const redisCpuBefore = processCpuSeconds(ctx.redis.proc.pid!);
  const gwCpuBefore = processCpuSeconds(gw.pid);
  const switchesBefore = contextSwitches(gw.pid);
  const loadBefore = sampleLoad();
  const w = await runWrk(gw, op, seconds, tokens);
  const loadAfter = sampleLoad();
  const gwCpuAfter = processCpuSeconds(gw.pid);
  const switchesAfter = contextSwitches(gw.pid);
  // Let requests that were in flight when wrk stopped reach Redis, so the count includes them.
  await sleep(200);
  const redisCpuAfter = processCpuSeconds(ctx.redis.proc.pid!);
  const callsAfter = usesRedis ? await commandCalls(ctx.redis.admin) : undefined;
  if (!isRunning(gw.proc)) throw new Error(`gateway ${gw.state} died during ${op}:\n${gw.err.tail()}\n${gw.out.tail()}`);

  const socketErrors = w.connect_errors + w.read_errors + w.write_errors + w.timeouts;
  const ok = op === 'refresh' ? w.ok : w.requests - w.status_errors;
  const errors = (op === 'refresh' ? w.bad : w.status_errors) + socketErrors;
  const elapsed = w.duration_us / 1e6;
  const perOp = (cpuSeconds: number) => (cpuSeconds * 1e6) / Math.max(ok, 1);
  const run: Run = {
    state: gw.state, op, round, ok, errors,
    opsPerSec: ok / elapsed,
    p50Ms: w.p50_us / 1000, p99Ms: w.p99_us / 1000, maxMs: w.max_us / 1000,
    gatewayCpuUsPerOp: perOp(gwCpuAfter - gwCpuBefore),
    gatewaySwitchesPerOp: (switchesAfter - switchesBefore) / Math.max(ok, 1),
    clientCpuUsPerOp: perOp(loadAfter.self - loadBefore.self),
    foreignCores: foreignCores(loadBefore, loadAfter),
    stolenCores: stolenCores(loadBefore, loadAfter),
    gatewayCoreUse: (gwCpuAfter - gwCpuBefore) / elapsed,
    clientCoreUse: (loadAfter.self - loadBefore.self + redisCpuAfter - redisCpuBefore) / elapsed,
  };
  if (callsBefore !== undefined && callsAfter !== undefined) {
    const calls = diffCalls(callsBefore, callsAfter);
    const background = ctx.backgroundPerSec * (elapsed + 0.2);
    let top = 0;
    for (const [cmd, n] of calls) if (ctx.topLevel.has(cmd)) top += n;
    run.redisCalls = calls;
    run.roundTripsPerOp = (top - background) / Math.max(ok, 1);
    run.commandsPerOp = (sumCalls(calls) - background) / Math.max(ok, 1);
    run.redisCpuUsPerOp = perOp(redisCpuAfter - redisCpuBefore);
  }
  if (w.starved > 0) log(`  note: ${gw.state} ${op}: ${w.starved} request(s) found no live token`);
  return run;
}

/** Runs still disturbed by other processes are repeated, at most twice, within the quiet-wait budget. */
async function measureQuietly(ctx: Context, gw: Gateway, op: Op, round: number): Promise<Run> {
  for (let attempt = 1; ; attempt++) {
    const run = await measure(ctx, gw, op, SECONDS, round);
    run.attempts = attempt;
    if (run.foreignCores < QUIET_CORES || attempt === 3 || quietBudgetMs <= 0) return run;
    log(`  ${gw.state} ${OP_NAME[op]}: other processes used ${run.foreignCores.toFixed(2)} cores during the run (${fmt(run.opsPerSec)} ops/s): repeating it`);
    quietBudgetMs -= SECONDS * 1000;
  }
}

// ---------------------------------------------------------------------------------------------
// Round trips: an exact count over sequential calls

interface Tally {
  /** Commands as the gateway sent them: one per round trip (it sends no pipelines or MULTI). */
  sent: Map<string, number>;
  /** Commands run by Lua scripts inside Redis: no round trip of their own. */
  inScripts: Map<string, number>;
}

interface Probe {
  state: StateName;
  signin: { ok: number; tally: Tally };
  refresh: { ok: number; tally: Tally };
}

/** Every command Redis runs while `work` runs, from MONITOR, which tells a script's commands (source "lua") apart. */
async function monitorWhile(admin: Redis, work: () => Promise<void>): Promise<Tally> {
  const monitor = await admin.monitor();
  const tally: Tally = { sent: new Map(), inScripts: new Map() };
  const marker = `bench-auth-marker-${process.pid}`;
  let sawMarker: () => void = () => {};
  const markerSeen = new Promise<void>((done) => { sawMarker = done; });
  monitor.on('monitor', (_time: string, args: unknown[], source: string) => {
    const name = String(args[0]).toLowerCase();
    if (name === 'echo' && args[1] === marker) return sawMarker();
    const into = source === 'lua' ? tally.inScripts : tally.sent;
    into.set(name, (into.get(name) ?? 0) + 1);
  });
  try {
    await work();
    // Redis feeds MONITOR in execution order: once our marker shows, every earlier command has.
    await admin.echo(marker);
    await Promise.race([markerSeen, sleep(5000).then(() => { throw new Error('MONITOR did not show the marker within 5 s'); })]);
  } finally {
    monitor.disconnect();
  }
  return tally;
}

async function probeRoundTrips(ctx: Context, gw: Gateway): Promise<Probe> {
  const admin = ctx.redis.admin;
  const signin = await monitorWhile(admin, async () => {
    for (let i = 0; i < PROBE_OPS; i++) await signIn(gw);
  });
  const chains = 10;
  const heads: string[] = [];
  for (let i = 0; i < chains; i++) heads.push((await signIn(gw)).refreshToken);
  const refreshTally = await monitorWhile(admin, async () => {
    for (let step = 0; step < PROBE_OPS / chains; step++) {
      for (let c = 0; c < chains; c++) heads[c] = (await refresh(gw, heads[c]!)).refreshToken;
    }
  });
  return { state: gw.state, signin: { ok: PROBE_OPS, tally: signin }, refresh: { ok: PROBE_OPS, tally: refreshTally } };
}

// ---------------------------------------------------------------------------------------------
// Profile (--profile): a separate gateway per state under --cpu-prof, after the measured rounds

interface ProfileResult {
  state: StateName;
  op: Op;
  summary: ProfileSummary;
}

async function profileState(ctx: Context, state: StateName, runtime: Runtime, signingKeys: string): Promise<ProfileResult[]> {
  const dir = join(ctx.tmp, `prof-${state.replace('+', '-')}`);
  mkdirSync(dir, { recursive: true });
  const gw = await startGateway(state, runtime, signingKeys, ctx.redis.url, ['--cpu-prof', '--cpu-prof-dir', dir]);
  const windows: [Op, number, number][] = [];
  try {
    for (const op of OPS) if (WARMUP > 0) await measure(ctx, gw, op, WARMUP, -1);
    for (const op of OPS) {
      const tokens = join(ctx.tmp, `tokens-${gw.pid}-${op}.txt`);
      if (op === 'refresh') await prepareChains(gw, CHAINS, tokens);
      await waitForQuiet(`profiling ${state} ${OP_NAME[op]}`);
      const from = Number(process.hrtime.bigint() / 1000n);
      await runWrk(gw, op, SECONDS, tokens);
      windows.push([op, from, Number(process.hrtime.bigint() / 1000n)]);
    }
  } finally {
    await stopChild(gw.proc, 15_000);
  }
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`no .cpuprofile written in ${dir}`);
  const raw = readFileSync(join(dir, file), 'utf8');
  mkdirSync(RESULTS, { recursive: true });
  const kept = join(RESULTS, `auth-${state.replace('+', '-')}.cpuprofile`);
  writeFileSync(kept, raw);
  const profile = JSON.parse(raw) as CpuProfile;
  return windows.map(([op, from, to]) => {
    let summary = summarizeProfile(profile, [from, to], 10);
    if (summary.busyMs === 0) {
      log(`  note: no samples of ${state} ${op} in its time window; summarizing the whole profile`);
      summary = summarizeProfile(profile, undefined, 10);
    }
    return { state, op, summary };
  });
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

interface Row {
  state: StateName;
  op: Op;
  opsPerSec: number;
  opsRange: [number, number];
  p50Ms: number;
  p99Ms: number;
  gatewayCpuUsPerOp: number;
  gatewaySwitchesPerOp: number;
  clientCpuUsPerOp: number;
  roundTripsPerOp?: number;
  commandsPerOp?: number;
  redisCpuUsPerOp?: number;
  foreignCores: number;
  gatewayCoreUse: number;
  clientCoreUse: number;
  errors: number;
  ok: number;
}

function summarize(runs: Run[]): Row[] {
  const rows: Row[] = [];
  for (const op of OPS) for (const state of STATES) {
    const rs = runs.filter((r) => r.state === state && r.op === op);
    const ops = rs.map((r) => r.opsPerSec);
    rows.push({
      state, op,
      opsPerSec: median(ops),
      opsRange: [Math.min(...ops), Math.max(...ops)],
      p50Ms: median(rs.map((r) => r.p50Ms)),
      p99Ms: median(rs.map((r) => r.p99Ms)),
      gatewayCpuUsPerOp: median(rs.map((r) => r.gatewayCpuUsPerOp)),
      gatewaySwitchesPerOp: median(rs.map((r) => r.gatewaySwitchesPerOp)),
      clientCpuUsPerOp: median(rs.map((r) => r.clientCpuUsPerOp)),
      ...(state === 'memory' ? {} : {
        roundTripsPerOp: median(rs.map((r) => r.roundTripsPerOp ?? NaN)),
        commandsPerOp: median(rs.map((r) => r.commandsPerOp ?? NaN)),
        redisCpuUsPerOp: median(rs.map((r) => r.redisCpuUsPerOp ?? NaN)),
      }),
      foreignCores: median(rs.map((r) => r.foreignCores)),
      gatewayCoreUse: median(rs.map((r) => r.gatewayCoreUse)),
      clientCoreUse: median(rs.map((r) => r.clientCoreUse)),
      errors: rs.reduce((a, r) => a + r.errors, 0),
      ok: rs.reduce((a, r) => a + r.ok, 0),
    });
  }
  return rows;
}

/** Median over rounds of (state ops/s ÷ memory ops/s in the same round), and its range. */
function pairedRatio(runs: Run[], state: StateName, op: Op): { median: number; min: number; max: number } {
  const ratios: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const a = runs.find((r) => r.state === state && r.op === op && r.round === round);
    const m = runs.find((r) => r.state === 'memory' && r.op === op && r.round === round);
    if (a !== undefined && m !== undefined && m.opsPerSec > 0) ratios.push(a.opsPerSec / m.opsPerSec);
  }
  return { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
}

const fmt = (n: number | undefined, digits = 0) => (n === undefined || !Number.isFinite(n) ? '—' : n.toFixed(digits));
const OP_NAME: Record<Op, string> = { signin: 'sign-in', refresh: 'refresh' };

function resultsTable(rows: Row[], runs: Run[]): string {
  const lines = [
    '| operation | state | ops/s (median) | range over rounds | vs memory | p50 ms | p99 ms | Redis round trips/op | Redis commands/op (in scripts too) | gateway CPU µs/op | gateway context switches/op | redis-server CPU µs/op | wrk CPU µs/op | gateway core use | client core use | other load (cores) | errors |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const ratio = r.state === 'memory' ? '1' : `${fmt(pairedRatio(runs, r.state, r.op).median, 2)}×`;
    lines.push(`| ${OP_NAME[r.op]} | ${r.state} | ${fmt(r.opsPerSec)} | ${fmt(r.opsRange[0])}–${fmt(r.opsRange[1])} | ${ratio} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.roundTripsPerOp, 2)} | ${fmt(r.commandsPerOp, 2)} | ${fmt(r.gatewayCpuUsPerOp)} | ${fmt(r.gatewaySwitchesPerOp, 1)} | ${fmt(r.redisCpuUsPerOp)} | ${fmt(r.clientCpuUsPerOp)} | ${fmt(100 * r.gatewayCoreUse)} % | ${fmt(100 * r.clientCoreUse)} % | ${fmt(r.foreignCores, 2)} | ${r.errors} of ${r.ok + r.errors} |`);
  }
  return lines.join('\n');
}

function probeTable(probes: Probe[]): string {
  const cell = ({ ok, tally }: { ok: number; tally: Tally }) =>
    `**${fmt(sumCalls(tally.sent) / ok, 2)}** (${describeCalls(tally.sent, ok)}) | ${fmt(sumCalls(tally.inScripts) / ok, 2)} (${describeCalls(tally.inScripts, ok)})`;
  const lines = [
    '| state | round trips per sign-in | + commands inside its script | round trips per refresh | + commands inside its script |',
    '|---|---|---|---|---|',
  ];
  for (const p of probes) lines.push(`| ${p.state} | ${cell(p.signin)} | ${cell(p.refresh)} |`);
  return lines.join('\n');
}

function roundsTable(runs: Run[]): string {
  const lines = [
    `| operation | state | ${Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}`).join(' | ')} |`,
    `|---|---|${'---:|'.repeat(ROUNDS)}`,
  ];
  for (const op of OPS) for (const state of STATES) {
    const cells = Array.from({ length: ROUNDS }, (_, round) => fmt(runs.find((r) => r.state === state && r.op === op && r.round === round)?.opsPerSec));
    lines.push(`| ${OP_NAME[op]} | ${state} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

// ---------------------------------------------------------------------------------------------
// README

function writeReadme(generated: string): void {
  const block = `${BEGIN}\n${generated.trim()}\n${END}`;
  let text = existsSync(README) ? readFileSync(README, 'utf8') : '# Benchmarks\n';
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (begin >= 0 && end > begin) {
    text = `${text.slice(0, begin)}${block}${text.slice(end + END.length)}`;
  } else if (text.includes(SECTION)) {
    // The section exists without markers: put the results at its end.
    const start = text.indexOf(SECTION) + SECTION.length;
    const next = text.slice(start).search(/\n## /);
    const at = next < 0 ? text.length : start + next;
    text = `${text.slice(0, at).trimEnd()}\n\n${block}\n${text.slice(at)}`;
  } else {
    text = `${text.trimEnd()}\n\n${SECTION}\n\n${block}\n`;
  }
  writeFileSync(README, text);
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const started = new Date();
  const watchdog = setTimeout(() => {
    log(`bench:auth: over its time budget (${Math.round(BUDGET_MS / 1000)} s): stopping`);
    void stopAll().finally(() => process.exit(1));
  }, BUDGET_MS);
  watchdog.unref();

  const nodeMajor = Number(process.versions.node.split('.')[0]);
  if (nodeMajor < 22) throw new Error(`Node ${process.version}: the gateway needs 22+ (run through npm run bench:auth, which uses node_modules/.bin/node)`);
  for (const tool of ['wrk', 'redis-server']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) throw new Error(`${tool} is not installed`);
  }
  checkDemoCredentials();
  quietBudgetMs = QUIET_WAIT * 1000;
  if (PIN) spawnSync('taskset', ['-a', '-p', '-c', CLIENT_CORE, String(process.pid)], { stdio: 'ignore' });
  else log('note: not pinning processes to cores (needs taskset and 2+ cores)');

  const tmp = mkdtempSync(join(tmpdir(), 'bench-auth-'));
  scratch = tmp;
  try {
    // What is measured: src/ as it is when the run starts (others may be committing meanwhile).
    const head = firstLine('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD']);
    const dirty = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).stdout.trim() !== '';
    const sourceVersion = `commit ${head}${dirty ? ' with uncommitted changes in src/' : ''}`;
    const runtime = prepareRuntime();
    const { privateKey } = generateKeyPairSync('ed25519');
    const signingKeys = JSON.stringify([{ kid: 'bench-1', alg: 'EdDSA', pem: privateKey.export({ type: 'pkcs8', format: 'pem' }) }]);

    const redis = await startRedis(join(tmp));
    if (STATES.includes('redis+keys')) {
      const r = spawnSync(process.execPath, runtime.cli('import-keys'), { cwd: ROOT, env: { ...cleanEnv(), REDIS_URL: redis.url }, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`keys:import failed: ${r.stderr}`);
    }
    const gateways = new Map<StateName, Gateway>();
    for (const state of STATES) gateways.set(state, await startGateway(state, runtime, signingKeys, redis.url));
    for (const gw of gateways.values()) await refresh(gw, (await signIn(gw)).refreshToken);

    // Background: what reaches Redis while the gateways idle.
    const idleBefore = await commandCalls(redis.admin);
    await sleep(2000);
    const idle = diffCalls(idleBefore, await commandCalls(redis.admin));
    const ctx: Context = { redis, tmp, backgroundPerSec: sumCalls(idle) / 2, topLevel: new Set() };

    const env = {
      date: started.toISOString(),
      commit: sourceVersion,
      cpu: `${nproc} × ${cpus()[0]?.model ?? 'unknown'}`,
      node: process.version,
      redis: redis.version,
      wrk: firstLine('wrk', ['--version']).replace(/ Copyright.*/, ''),
      runtime: runtime.note,
      pinning: PIN ? `gateways on core ${GATEWAY_CORE} (\`taskset -c ${GATEWAY_CORE}\`, all their threads); wrk, redis-server and this script on core ${CLIENT_CORE}` : 'none (needs taskset and 2+ cores)',
    };
    log(`bench:auth: ${env.cpu}; node ${env.node}; redis ${env.redis}; ${env.wrk}; runtime ${runtime.mode}`);
    log(`bench:auth: ${STATES.join(', ')}; ${ROUNDS} rounds of ${SECONDS} s per operation and state, ${CONNECTIONS} connections; pinning: ${env.pinning}`);
    log(`bench:auth: idle Redis background: ${describeCalls(idle, 2)} per second`);

    const probes: Probe[] = [];
    for (const state of STATES) if (state !== 'memory') probes.push(await probeRoundTrips(ctx, gateways.get(state)!));
    for (const p of probes) for (const t of [p.signin.tally, p.refresh.tally]) for (const cmd of t.sent.keys()) ctx.topLevel.add(cmd);
    const ambiguous = probes.flatMap((p) => [p.signin.tally, p.refresh.tally]).flatMap((t) => [...t.inScripts.keys()]).filter((c) => ctx.topLevel.has(c));
    if (ambiguous.length > 0) log(`  note: ${[...new Set(ambiguous)].join(', ')} run both from the gateway and inside scripts: the per-run round-trip counts overstate; the probe's are exact`);
    for (const p of probes) {
      log(`round trips (exact, MONITOR): ${p.state}: sign-in ${fmt(sumCalls(p.signin.tally.sent) / p.signin.ok, 2)} (${describeCalls(p.signin.tally.sent, p.signin.ok)}), refresh ${fmt(sumCalls(p.refresh.tally.sent) / p.refresh.ok, 2)} (${describeCalls(p.refresh.tally.sent, p.refresh.ok)})`);
    }

    if (WARMUP > 0) {
      log(`warm-up: ${WARMUP} s per operation and state`);
      for (const state of STATES) for (const op of OPS) await measure(ctx, gateways.get(state)!, op, WARMUP, -1);
    }
    const runs: Run[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? STATES : [...STATES].reverse();
      for (const op of OPS) for (const state of order) {
        const run = await measureQuietly(ctx, gateways.get(state)!, op, round);
        runs.push(run);
        log(`round ${round + 1}/${ROUNDS} ${OP_NAME[op].padEnd(7)} ${state.padEnd(10)} ${fmt(run.opsPerSec).padStart(6)} ops/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
          + `  gw ${fmt(run.gatewayCpuUsPerOp)} µs/op ${fmt(run.gatewaySwitchesPerOp, 1)} cs/op${run.roundTripsPerOp === undefined ? '' : `  redis ${fmt(run.roundTripsPerOp, 2)} rt/op`}  wrk ${fmt(run.clientCpuUsPerOp)} µs/op  core use gw ${fmt(100 * run.gatewayCoreUse)} % client ${fmt(100 * run.clientCoreUse)} %  other load ${fmt(run.foreignCores, 2)} cores  steal ${fmt(run.stolenCores, 2)}${run.errors > 0 ? `  ERRORS ${run.errors}` : ''}`);
      }
    }
    const problems = [...gateways.values()].map((g) => ({ state: g.state, count: g.out.problems + g.err.problems, tail: g.out.tail(5) }));
    for (const gw of gateways.values()) await stopChild(gw.proc);

    const profiles: ProfileResult[] = [];
    if (opt.profile) {
      for (const state of ['memory', 'redis'] as const) {
        log(`profile: ${state} (--cpu-prof, ${SECONDS} s per operation after warm-up)`);
        profiles.push(...await profileState(ctx, state, runtime, signingKeys));
      }
    }

    const rows = summarize(runs);
    const ratioLines = OPS.flatMap((op) => STATES.filter((st) => st !== 'memory').map((state) => {
      const r = pairedRatio(runs, state, op);
      return `- ${OP_NAME[op]}, ${state} / memory: **${fmt(r.median, 2)}×** (per-round ratios ${fmt(r.min, 2)}–${fmt(r.max, 2)})`;
    }));
    const noisy = runs.filter((r) => r.foreignCores >= QUIET_CORES).length;
    const args = process.argv.slice(2);
    const generated = [
      `Run of ${env.date.slice(0, 10)} (${env.date}), \`npm run bench:auth${args.length > 0 ? ` -- ${args.join(' ')}` : ''}\`.`,
      '',
      `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, Redis ${env.redis}, ${env.wrk}`,
      `- gateway: src/ at ${env.commit}; ${env.runtime}; LOG_LEVEL=warn, NODE_ENV=production, one Ed25519 signing key`,
      `- pinning: ${env.pinning}`,
      `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop; ${ROUNDS} rounds × ${SECONDS} s per operation and state after a ${WARMUP} s warm-up, states interleaved (order reversed every other round); refresh runs start from ${CHAINS} fresh sign-ins`,
      `- idle Redis background: ${describeCalls(idle, 2)} per second (subtracted)`,
      `- time stolen by the hypervisor during the kept runs: median ${fmt(median(runs.map((r) => r.stolenCores)), 2)}, at most ${fmt(Math.max(...runs.map((r) => r.stolenCores)), 2)} cores`,
      `- other load on the machine (it is shared): before each run the script waited until other processes used less than ${QUIET_CORES} cores, and repeated a run they disturbed (at most twice, ${QUIET_WAIT} s of waiting and repeats in all); ${runs.filter((r) => (r.attempts ?? 1) > 1).length} run(s) were repeated, ${noisy} of the ${runs.length} kept still saw ${QUIET_CORES}+ cores of other load (median per row in the table)`,
      '',
      resultsTable(rows, runs),
      '',
      'Throughput ratios (median of the per-round ratios; a round runs the states back to back):',
      '',
      ...ratioLines,
      '',
      `Redis round trips, exact: MONITOR over ${PROBE_OPS} sequential calls of each operation (a command the gateway sends is one round trip; commands a Lua script runs inside Redis are listed apart):`,
      '',
      probeTable(probes),
      '',
      'ops/s per round:',
      '',
      roundsTable(runs),
      '',
      problems.some((p) => p.count > 0)
        ? `Gateway warnings/errors logged during the runs: ${problems.map((p) => `${p.state} ${p.count}`).join(', ')}.`
        : 'No gateway logged a warning or an error during the runs.',
      ...(profiles.length > 0
        ? ['', `CPU profiles (\`--profile\`: one more gateway per state under \`node --cpu-prof\`, sampled over a ${SECONDS} s run of each operation after the warm-up; shares of the main thread's samples, idle excluded):`, '',
          ...profiles.flatMap((p) => [formatProfileSummary(`${p.state}, ${OP_NAME[p.op]}`, p.summary), ''])]
        : []),
    ].join('\n');

    process.stdout.write(`\n${resultsTable(rows, runs)}\n\n${ratioLines.join('\n')}\n\nRedis round trips (exact, MONITOR, ${PROBE_OPS} sequential calls):\n${probeTable(probes)}\n`);
    for (const p of problems) if (p.count > 0) process.stdout.write(`\n${p.state}: ${p.count} warning/error line(s), last:\n${p.tail}\n`);
    for (const p of profiles) process.stdout.write(`\n${formatProfileSummary(`${p.state}, ${OP_NAME[p.op]}`, p.summary)}\n`);

    mkdirSync(RESULTS, { recursive: true });
    const json = join(RESULTS, `auth-${started.toISOString().replace(/[:.]/g, '-')}.json`);
    const tallyJson = (t: Tally) => ({ sent: Object.fromEntries(t.sent), inScripts: Object.fromEntries(t.inScripts) });
    writeFileSync(json, JSON.stringify({
      env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, states: STATES },
      idleBackgroundPerSec: ctx.backgroundPerSec,
      rows, runs: runs.map((r) => ({ ...r, redisCalls: r.redisCalls && Object.fromEntries(r.redisCalls) })),
      probes: probes.map((p) => ({ state: p.state, signin: { ok: p.signin.ok, ...tallyJson(p.signin.tally) }, refresh: { ok: p.refresh.ok, ...tallyJson(p.refresh.tally) } })),
      profiles,
    }, null, 2));
    log(`\nraw figures: ${json}`);
    if (!opt['no-readme']) {
      writeReadme(generated);
      log(`results written to ${README}`);
    }
    redis.admin.disconnect();
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The demo key's digest must still be SHA-256 of SHA-256("sk_demo_alice_secret"). */
function checkDemoCredentials(): void {
  const data = JSON.parse(readFileSync(join(ROOT, 'config', 'demo-data.json'), 'utf8')) as { accounts: { apiKeys: { apiKey: string; secretDigest: string }[] }[] };
  const key = data.accounts.flatMap((a) => a.apiKeys).find((k) => k.apiKey === API_KEY);
  const digest = `sha256:${createHash('sha256').update(Buffer.from(API_SECRET_HASH, 'hex')).digest('hex')}`;
  if (key?.secretDigest !== digest) throw new Error(`config/demo-data.json no longer holds ${API_KEY} with the demo secret`);
}

main().catch(async (err: unknown) => {
  log(`bench:auth failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  await stopAll();
  process.exit(1);
});
