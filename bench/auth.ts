/**
 * Sign-in and refresh throughput, memory state vs Redis state, side by side in one run, and the
 * Redis round trips each operation costs. Results: a table on stdout, bench/reports/auth.md
 * (method and findings: "Sign-in and refresh: memory vs Redis" in bench/README.md), and
 * bench/results/auth-<time>.json.
 *
 *   npm run bench:auth [-- --rounds 10 --seconds 3 --warmup 2 --connections 32 --quiet-wait 120
 *                          --runtime dist|tsx --profile --no-keys-variant --no-limits-variant
 *                          --no-floor --no-report]
 *
 * What runs (everything on 127.0.0.1, every process started here is stopped here, also on
 * error and Ctrl-C):
 * - one redis-server on a free port (`--save '' --appendonly no`);
 * - four gateways, each on a free port with LOG_LEVEL=warn: `memory` (no Redis), `redis`
 *   (REDIS_URL, API keys from the data file: the default) and `redis+keys` (also
 *   KEY_SOURCE=redis, the keys imported with the product's own keys:import), and `redis+limits`
 *   (as `redis` with rate limits on: every sign-in and refresh limit counted in Redis, their
 *   limits out of reach: issue 32's target 7 asks for both); the floor beside them;
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
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { formatProfileSummary, type ProfileSummary } from './cpuprofile.js';
import { parseRunOptions } from './lib/cli.js';
import { cleanEnv, REPORTS, RESULTS, ROOT, startGateway, type Gateway as AnyGateway, type Runtime } from './lib/gateway.js';
import {
  CLIENT_CORE, contextSwitches, cpuModel, foreignCores, nproc, PIN, processCpuSeconds,
  Quiet, QUIET_CORES, sampleLoad, SERVER_CORE, stolenCores, wrkVersion,
} from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { profileClockUs, readProfile, summarizeWindow } from './lib/profile.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { startRedis, type RedisServer } from './lib/redis.js';
import { startNodeServer } from './lib/servers.js';
import { runBench, type BenchRun } from './lib/run.js';
import { disturbed, medians, pairedRatio as pairedRatioOf, range, roundsTable as roundsTableOf, stolenLine, sums, type Spread } from './lib/summary.js';
import { makeSigningKey } from './lib/tokens.js';
import { runWrk, socketErrors, type WrkSummary } from './lib/wrk.js';

const NAME = 'bench:auth';
const REPORT: Report = { file: join(REPORTS, 'auth.md'), title: 'Sign-in and refresh: memory vs Redis', script: `npm run ${NAME}` };

const API_KEY = 'ak_demo_alice';
const API_SECRET_HASH = createHash('sha256').update('sk_demo_alice_secret').digest('hex');
const SIGNIN_BODY = JSON.stringify({ apiKey: API_KEY, apiSecret: API_SECRET_HASH });

type StateName = 'memory' | 'redis' | 'redis+keys' | 'redis+limits' | 'floor';
/** The states whose gateway keeps its state in Redis (probed for round trips, Redis figures in the table). */
const inRedis = (state: StateName) => state === 'redis' || state === 'redis+keys' || state === 'redis+limits';
type Op = 'signin' | 'refresh';
const OPS: Op[] = ['signin', 'refresh'];

// ---------------------------------------------------------------------------------------------
// Options

const opt = parseRunOptions(NAME, { rounds: 10, seconds: 3, connections: 32 }, {
  'no-keys-variant': { type: 'boolean', default: false },
  'no-floor': { type: 'boolean', default: false },
  'no-limits-variant': { type: 'boolean', default: false },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
/**
 * `floor` is no gateway: bench/servers/signin-floor.ts, the least a token service on Node does
 * per sign-in and refresh (issue 32's target 7), run beside the gateways in the same rounds.
 */
const STATES: StateName[] = [
  ...(opt.extra['no-keys-variant'] === true ? ['memory', 'redis'] as const : ['memory', 'redis', 'redis+keys'] as const),
  ...(opt.extra['no-limits-variant'] === true ? [] : ['redis+limits'] as const),
  ...(opt.extra['no-floor'] === true ? [] : ['floor'] as const),
];
/** Chains per refresh run: more than connections, see bench/wrk/refresh.lua. */
const CHAINS = 2 * CONNECTIONS + 1;
const PROBE_OPS = 200;
/** Hard bound on the whole run, whatever happens. */
const BUDGET_MS = (60 + QUIET_WAIT + STATES.length * OPS.length * (WARMUP + ROUNDS * (SECONDS + 2) + (opt.profile ? WARMUP + SECONDS + 5 : 0))) * 2 * 1000;

/** Waiting for other load to pass, within --quiet-wait seconds over the whole run. */
const quiet = new Quiet(QUIET_WAIT);

// ---------------------------------------------------------------------------------------------
// Redis

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
type Gateway = AnyGateway<StateName>;

/**
 * `redis+limits`: every sign-in and refresh limit keeps its default windows, each limit raised
 * out of reach of a closed loop from one address (what the limits exist to stop: 30 sign-ins a
 * minute per address by default), so each call pays the counting and none is refused.
 */
const OUT_OF_REACH = 1_000_000_000;
function limitsConfig(dir: string): string {
  const windows = (...seconds: number[]) => seconds.map((s) => ({ limit: OUT_OF_REACH, seconds: s }));
  const file = join(dir, 'limits-config.json');
  writeFileSync(file, JSON.stringify({
    limits: {
      mode: 'enforce',
      signIn: { perAddress: windows(60, 3600), failuresPerKeyAndAddress: windows(60, 900, 86_400), failuresPerAddress: windows(600, 86_400), failuresPerKey: windows(3600) },
      refresh: { perFamily: windows(60), perAddress: windows(60) },
    },
  }));
  return file;
}

function gatewaySettings(state: StateName, signingKeys: string, redisUrl: string, tmp: string): Record<string, string> {
  return {
    LOG_LEVEL: 'warn',
    // As bench:proxy runs its peers: a closed loop of sign-ins from one address is what the
    // sign-in limits exist to stop (30 a minute per address by default).
    ...(state === 'redis+limits' ? { GATEWAY_CONFIG: limitsConfig(tmp) } : { RATE_LIMITS: 'off' }),
    SIGNING_KEYS: signingKeys,
    ...(state === 'memory' ? {} : { REDIS_URL: redisUrl }),
    ...(state === 'redis+keys' ? { KEY_SOURCE: 'redis' } : {}),
  };
}

async function startStateGateway(state: StateName, runtime: Runtime, signingKeys: string, redisUrl: string, tmp: string, nodeFlags: string[] = []): Promise<Gateway> {
  if (state === 'floor') {
    const floor = await startNodeServer('floor', 'signin-floor.ts', SERVER_CORE, { API_KEY, SECRET_DIGEST: demoDigest() }, { nodeFlags, readyPath: '/healthz', readyStatus: 200 });
    return { name: 'floor', proc: floor.proc, pid: floor.pid, url: floor.url, out: floor.out, err: floor.err };
  }
  return startGateway({ name: state, runtime, settings: gatewaySettings(state, signingKeys, redisUrl, tmp), nodeFlags });
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
  if (r.pair === undefined) throw new Error(`sign-in on ${gw.name} answered ${r.status}`);
  return r.pair;
}

async function refresh(gw: Gateway, token: string): Promise<Pair> {
  const r = await post(`${gw.url}/api/refresh`, JSON.stringify({ refreshToken: token }));
  if (r.pair === undefined) throw new Error(`refresh on ${gw.name} answered ${r.status}`);
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

function runOp(gw: Gateway, op: Op, seconds: number, tokensFile: string): Promise<WrkSummary> {
  return runWrk({
    script: join(ROOT, 'bench', 'wrk', `${op}.lua`),
    url: `${gw.url}/api/${op}`,
    connections: CONNECTIONS,
    seconds,
    args: op === 'signin' ? [SIGNIN_BODY] : [tokensFile, '1'],
  });
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
  await quiet.wait(`${gw.name} ${OP_NAME[op]}`);
  const usesRedis = gw.name !== 'memory';
  const callsBefore = usesRedis ? await commandCalls(ctx.redis.admin) : undefined;
  const redisCpuBefore = processCpuSeconds(ctx.redis.proc.pid!);
  const gwCpuBefore = processCpuSeconds(gw.pid);
  const switchesBefore = contextSwitches(gw.pid);
  const loadBefore = sampleLoad();
  const w = await runOp(gw, op, seconds, tokens);
  const loadAfter = sampleLoad();
  const gwCpuAfter = processCpuSeconds(gw.pid);
  const switchesAfter = contextSwitches(gw.pid);
  // Let requests that were in flight when wrk stopped reach Redis, so the count includes them.
  await sleep(200);
  const redisCpuAfter = processCpuSeconds(ctx.redis.proc.pid!);
  const callsAfter = usesRedis ? await commandCalls(ctx.redis.admin) : undefined;
  if (!isRunning(gw.proc)) throw new Error(`gateway ${gw.name} died during ${op}:\n${gw.err.tail()}\n${gw.out.tail()}`);

  const ok = op === 'refresh' ? w.ok : w.requests - w.status_errors;
  const errors = (op === 'refresh' ? w.bad : w.status_errors) + socketErrors(w);
  const elapsed = w.duration_us / 1e6;
  const perOp = (cpuSeconds: number) => (cpuSeconds * 1e6) / Math.max(ok, 1);
  const run: Run = {
    state: gw.name, op, round, ok, errors,
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
  if (w.starved > 0) log(`  note: ${gw.name} ${op}: ${w.starved} request(s) found no live token`);
  return run;
}

/** Runs still disturbed by other processes are repeated, at most twice, within the quiet-wait budget. */
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
  return { state: gw.name, signin: { ok: PROBE_OPS, tally: signin }, refresh: { ok: PROBE_OPS, tally: refreshTally } };
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
  const gw = await startStateGateway(state, runtime, signingKeys, ctx.redis.url, ctx.tmp, ['--cpu-prof', '--cpu-prof-dir', dir]);
  const windows: [Op, number, number][] = [];
  try {
    for (const op of OPS) if (WARMUP > 0) await measure(ctx, gw, op, WARMUP, -1);
    for (const op of OPS) {
      const tokens = join(ctx.tmp, `tokens-${gw.pid}-${op}.txt`);
      if (op === 'refresh') await prepareChains(gw, CHAINS, tokens);
      await quiet.wait(`profiling ${state} ${OP_NAME[op]}`);
      const from = profileClockUs();
      await runOp(gw, op, SECONDS, tokens);
      windows.push([op, from, profileClockUs()]);
    }
  } finally {
    await stopChild(gw.proc, 15_000);
  }
  const profile = readProfile(dir, join(RESULTS, `auth-${state.replace('+', '-')}.cpuprofile`));
  return windows.map(([op, from, to]) => ({ state, op, summary: summarizeWindow(profile, [from, to], `${state} ${op}`) }));
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

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
      opsRange: range(ops),
      ...medians(rs, ['p50Ms', 'p99Ms', 'gatewayCpuUsPerOp', 'gatewaySwitchesPerOp', 'clientCpuUsPerOp']),
      ...(inRedis(state) ? medians(rs, ['roundTripsPerOp', 'commandsPerOp', 'redisCpuUsPerOp']) : {}),
      ...medians(rs, ['foreignCores', 'gatewayCoreUse', 'clientCoreUse']),
      ...sums(rs, ['errors', 'ok']),
    });
  }
  return rows;
}

/** Median over rounds of (state ops/s ÷ `base` ops/s in the same round), and its range. */
function pairedRatio(runs: Run[], state: StateName, op: Op, base: StateName = 'memory'): Spread {
  return pairedRatioOf(runs, ROUNDS, { state, op }, { state: base, op }, (r) => r.opsPerSec);
}

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
  const lines = OPS.flatMap((op) => STATES.map((state) => ({ labels: [OP_NAME[op], state], match: { state, op } })));
  return roundsTableOf(runs, ROUNDS, ['operation', 'state'], lines, (r) => r.opsPerSec);
}

// ---------------------------------------------------------------------------------------------
// Main

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  checkDemoCredentials();
  const { signingKeys } = makeSigningKey();

  const redis = await startRedis(join(tmp));
  if (STATES.includes('redis+keys')) {
    const r = spawnSync(process.execPath, runtime.cli('import-keys'), { cwd: ROOT, env: { ...cleanEnv(), REDIS_URL: redis.url }, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`keys:import failed: ${r.stderr}`);
  }
  const gateways = new Map<StateName, Gateway>();
  for (const state of STATES) gateways.set(state, await startStateGateway(state, runtime, signingKeys, redis.url, tmp));
  for (const gw of gateways.values()) await refresh(gw, (await signIn(gw)).refreshToken);

  // Background: what reaches Redis while the gateways idle.
  const idleBefore = await commandCalls(redis.admin);
  await sleep(2000);
  const idle = diffCalls(idleBefore, await commandCalls(redis.admin));
  const ctx: Context = { redis, tmp, backgroundPerSec: sumCalls(idle) / 2, topLevel: new Set() };

  const env = {
    date: started.toISOString(),
    commit: source,
    cpu: cpuModel(),
    node: process.version,
    redis: redis.version,
    wrk: wrkVersion(),
    runtime: runtime.note,
    pinning: PIN ? `gateways on core ${SERVER_CORE} (\`taskset -c ${SERVER_CORE}\`, all their threads); wrk, redis-server and this script on core ${CLIENT_CORE}` : 'none (needs taskset and 2+ cores)',
  };
  log(`bench:auth: ${env.cpu}; node ${env.node}; redis ${env.redis}; ${env.wrk}; runtime ${runtime.mode}`);
  log(`bench:auth: ${STATES.join(', ')}; ${ROUNDS} rounds of ${SECONDS} s per operation and state, ${CONNECTIONS} connections; pinning: ${env.pinning}`);
  log(`bench:auth: idle Redis background: ${describeCalls(idle, 2)} per second`);

  const probes: Probe[] = [];
  for (const state of STATES) if (inRedis(state)) probes.push(await probeRoundTrips(ctx, gateways.get(state)!));
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
      const gw = gateways.get(state)!;
      const run = await quiet.repeatDisturbed(`${state} ${OP_NAME[op]}`, SECONDS, () => measure(ctx, gw, op, SECONDS, round), (r) => `${fmt(r.opsPerSec)} ops/s`);
      runs.push(run);
      log(`round ${round + 1}/${ROUNDS} ${OP_NAME[op].padEnd(7)} ${state.padEnd(10)} ${fmt(run.opsPerSec).padStart(6)} ops/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
        + `  gw ${fmt(run.gatewayCpuUsPerOp)} µs/op ${fmt(run.gatewaySwitchesPerOp, 1)} cs/op${run.roundTripsPerOp === undefined ? '' : `  redis ${fmt(run.roundTripsPerOp, 2)} rt/op`}  wrk ${fmt(run.clientCpuUsPerOp)} µs/op  core use gw ${fmt(100 * run.gatewayCoreUse)} % client ${fmt(100 * run.clientCoreUse)} %  other load ${fmt(run.foreignCores, 2)} cores  steal ${fmt(run.stolenCores, 2)}${run.errors > 0 ? `  ERRORS ${run.errors}` : ''}`);
    }
  }
  const problems = [...gateways.values()].map((g) => ({ state: g.name, count: g.out.problems + g.err.problems, tail: g.out.tail(5) }));
  for (const gw of gateways.values()) await stopChild(gw.proc);

  const profiles: ProfileResult[] = [];
  if (opt.profile) {
    for (const state of ['memory', 'redis'] as const) {
      log(`profile: ${state} (--cpu-prof, ${SECONDS} s per operation after warm-up)`);
      profiles.push(...await profileState(ctx, state, runtime, signingKeys));
    }
  }

  const rows = summarize(runs);
  const ratioLines = OPS.flatMap((op) => STATES.filter((st) => st !== 'memory' && st !== 'floor').map((state) => {
    const r = pairedRatio(runs, state, op);
    return `- ${OP_NAME[op]}, ${state} / memory: **${fmt(r.median, 2)}×** (per-round ratios ${fmt(r.min, 2)}–${fmt(r.max, 2)})`;
  }));
  // Issue 32's target 7: each gateway state against the floor, ≥ 0.9×.
  const floorLines = !STATES.includes('floor') ? [] : OPS.flatMap((op) => STATES.filter((st) => st !== 'floor').map((state) => {
    const r = pairedRatio(runs, state, op, 'floor');
    return `- ${OP_NAME[op]}, ${state} / floor: **${fmt(r.median, 2)}×** (per-round ratios ${fmt(r.min, 2)}–${fmt(r.max, 2)}) — target ≥ 0.9×: ${r.median >= 0.9 ? 'met' : '**not met**'}`;
  }));
  const { repeated, noisy } = disturbed(runs);
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, Redis ${env.redis}, ${env.wrk}`,
    `- gateway: src/ at ${env.commit}; ${env.runtime}; LOG_LEVEL=warn, NODE_ENV=production, one Ed25519 signing key`,
    `- pinning: ${env.pinning}`,
    `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop; ${ROUNDS} rounds × ${SECONDS} s per operation and state after a ${WARMUP} s warm-up, states interleaved (order reversed every other round); refresh runs start from ${CHAINS} fresh sign-ins`,
    `- idle Redis background: ${describeCalls(idle, 2)} per second (subtracted)`,
    stolenLine(runs),
    `- other load on the machine (it is shared): before each run the script waited until other processes used less than ${QUIET_CORES} cores, and repeated a run they disturbed (at most twice, ${QUIET_WAIT} s of waiting and repeats in all); ${repeated} run(s) were repeated, ${noisy} of the ${runs.length} kept still saw ${QUIET_CORES}+ cores of other load (median per row in the table)`,
    '',
    resultsTable(rows, runs),
    '',
    'Throughput ratios (median of the per-round ratios; a round runs the states back to back):',
    '',
    ...ratioLines,
    ...(floorLines.length === 0 ? [] : ['', `Against the sign-in floor (bench/servers/signin-floor.ts: node:http, node:crypto Ed25519 signing, refresh tokens in a Map; no limits, no audit, no log), rate limits off in every state${STATES.includes('redis+limits') ? ' but `redis+limits` (on, counted in Redis)' : ''}:`, '', ...floorLines]),
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

  process.stdout.write(`\n${resultsTable(rows, runs)}\n\n${[...ratioLines, ...floorLines].join('\n')}\n\nRedis round trips (exact, MONITOR, ${PROBE_OPS} sequential calls):\n${probeTable(probes)}\n`);
  for (const p of problems) if (p.count > 0) process.stdout.write(`\n${p.state}: ${p.count} warning/error line(s), last:\n${p.tail}\n`);
  for (const p of profiles) process.stdout.write(`\n${formatProfileSummary(`${p.state}, ${OP_NAME[p.op]}`, p.summary)}\n`);

  const tallyJson = (t: Tally) => ({ sent: Object.fromEntries(t.sent), inScripts: Object.fromEntries(t.inScripts) });
  writeRawFigures(RESULTS, 'auth', started, {
    env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, states: STATES },
    idleBackgroundPerSec: ctx.backgroundPerSec,
    rows, runs: runs.map((r) => ({ ...r, redisCalls: r.redisCalls && Object.fromEntries(r.redisCalls) })),
    probes: probes.map((p) => ({ state: p.state, signin: { ok: p.signin.ok, ...tallyJson(p.signin.tally) }, refresh: { ok: p.refresh.ok, ...tallyJson(p.refresh.tally) } })),
    profiles,
  });
  updateReport(NAME, REPORT, generated, { noReport: opt.noReport });
  redis.admin.disconnect();
}

/** The stored digest of the demo key's secret: SHA-256 of the client's SHA-256. */
function demoDigest(): string {
  return `sha256:${createHash('sha256').update(Buffer.from(API_SECRET_HASH, 'hex')).digest('hex')}`;
}

/** The demo key's digest must still be SHA-256 of SHA-256("sk_demo_alice_secret"). */
function checkDemoCredentials(): void {
  const data = JSON.parse(readFileSync(join(ROOT, 'config', 'demo-data.json'), 'utf8')) as { accounts: { apiKeys: { apiKey: string; secretDigest: string }[] }[] };
  const key = data.accounts.flatMap((a) => a.apiKeys).find((k) => k.apiKey === API_KEY);
  if (key?.secretDigest !== demoDigest()) throw new Error(`config/demo-data.json no longer holds ${API_KEY} with the demo secret`);
}

runBench({ name: NAME, slug: 'auth', budgetMs: BUDGET_MS, tools: ['wrk', 'redis-server'], runtime: opt.runtime }, main);