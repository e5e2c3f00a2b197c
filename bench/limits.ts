/**
 * What rate limits cost on an authenticated, proxied route: the gateway with limits off, with
 * limits on and counted in process memory, and with limits on and counted in Redis, next to the
 * backend alone and the floor of bench/proxy.ts (http-proxy-3 + jose), in one run. Results: a
 * table on stdout, bench/reports/limits.md (method and findings: "Limits: what counting costs a
 * proxied call" in bench/README.md), and bench/results/limits-<time>.json.
 *
 *   node --import tsx bench/limits.ts [--rounds 5 --seconds 5 --warmup 2 --connections 64
 *                                      --tokens 20000 --quiet-wait 120 --runtime dist|tsx
 *                                      --profile --no-off-redis --no-report]
 *
 * What runs (everything on 127.0.0.1, every process started here is stopped here, also on
 * error and Ctrl-C):
 * - `direct`: bench/servers/backend.ts alone (a second instance, on the server core);
 * - `floor`: bench/servers/floor.ts, node:http + http-proxy-3 + jose, no limits;
 * - `off`: the gateway, one route `/bench` to the backend (bearer token required),
 *   RATE_LIMITS=off, no Redis;
 * - `memory`: the same with RATE_LIMITS=enforce, counters in process memory;
 * - `off-redis`: RATE_LIMITS=off with REDIS_URL (its state in Redis: what Redis costs the
 *   gateway besides the counters; `--no-off-redis` leaves it out);
 * - `redis`: RATE_LIMITS=enforce with REDIS_URL: counters in Redis (one script call a request).
 * The limits-on gateways count every call against the route's per-account quota, set through
 * RATE_LIMIT_RULES to the default's two windows (1 s and 60 s) with a quota of 10^9 each, so
 * nothing is ever refused and every request pays the full count; any answer other than 2xx
 * fails the run. The gateway's own /metrics (decisions by limit and outcome) and Redis's
 * INFO commandstats show, per run, that every request was counted once and none refused.
 *
 * Load as in bench/proxy.ts: wrk, one thread, keep-alive connections, closed loop, every
 * request with the next of --tokens distinct access tokens (100 accounts, so 100 subjects per
 * limit). With two or more cores the server under test is pinned to core 1, and wrk, the
 * proxies' backend, redis-server and this script to core 0. Rounds run every server once, the
 * order rotated by one each round; figures are medians over rounds, ratios medians of the
 * per-round ratios. The resident memory of every server is read before the load and after
 * the last round.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { formatProfileSummary, summarizeProfile, type CpuProfile, type ProfileSummary } from './cpuprofile.js';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { REPORTS, RESULTS, runEnv, startGateway, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, nproc, PIN, processCpuSeconds, Quiet, SERVER_CORE } from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { profileClockUs, readProfile, summarizeWindow } from './lib/profile.js';
import { startRedis, type RedisServer } from './lib/redis.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { gatewayServer, packageVersion, startNodeServer as startBenchServer, type Server } from './lib/servers.js';
import {
  loadReportLines, loadReportText, loadRow, medians, otherLoadLine, pairedRatio, perRound, ratioLine, roundsTable as roundsTableOf, stolenLine,
  type LoadReport, type LoadRow, type Ratio,
} from './lib/summary.js';
import { makeSigningKey, TokenSupply, type SigningKey } from './lib/tokens.js';
import { bearerRun, measureLoad, type LoadFigures } from './lib/wrk.js';

const NAME = 'bench:limits';
const REPORT: Report = { file: join(REPORTS, 'limits.md'), title: 'Limits: what counting costs a proxied call', script: `npm run ${NAME}` };
/** What every client asks every server for: under the gateway's route prefix, as it reaches the backend. */
const PATH = '/bench/items/42';
const PREFIX = '/bench';
/** The route's name is its prefix (no `name` set), so its quota is the limit `/bench-account`. */
const ACCOUNT_LIMIT = `${PREFIX}-account`;
const ACCOUNTS = 100;
/** The quota: the default's two windows (a burst and a sustained one), far out of reach. */
const QUOTA = [{ limit: 1_000_000_000, seconds: 1 }, { limit: 1_000_000_000, seconds: 60 }];
const RULES = JSON.stringify([{ perAccount: QUOTA }]);

type Target = 'direct' | 'floor' | 'off' | 'memory' | 'off-redis' | 'redis';
const LABEL: Record<Target, string> = {
  direct: 'direct',
  floor: 'floor',
  off: 'limits off',
  memory: 'limits on, memory',
  'off-redis': 'limits off, Redis state',
  redis: 'limits on, Redis',
};
const GATEWAYS: Target[] = ['off', 'memory', 'off-redis', 'redis'];
const isGateway = (t: Target) => GATEWAYS.includes(t);
const limitsOn = (t: Target) => t === 'memory' || t === 'redis';
const usesRedis = (t: Target) => t === 'off-redis' || t === 'redis';

// ---------------------------------------------------------------------------------------------
// Options

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 5, connections: 64 }, {
  tokens: { type: 'string', default: '20000' },
  'no-off-redis': { type: 'boolean', default: false },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
const TOKENS = boundedInt(NAME, 'tokens', opt.extra.tokens as string, 100, 200_000);
/**
 * The warm-up: --warmup seconds, and at least two passes over the tokens at a cold gateway's
 * pace here (8,000 a second): every token verified once and cached before a round counts. A
 * shorter one left round 1 at half the later rounds' throughput, the more so for the slower
 * gateways (fewer passes over the tokens: more of their requests paid a verification), which
 * skewed the per-round ratios against limits on.
 */
const WARMUP_S = Math.max(WARMUP, Math.ceil((2 * TOKENS) / 8000));
const TARGETS: Target[] = ['direct', 'floor', 'off', 'memory', ...(opt.extra['no-off-redis'] === true ? [] : ['off-redis' as const]), 'redis'];
const PROFILED: Target[] = ['off', 'memory', 'redis'];
/** Hard bound on the whole run, whatever happens. */
const BUDGET_MS = (120 + QUIET_WAIT + TARGETS.length * (WARMUP_S + 3 + ROUNDS * (SECONDS + 4)) + (opt.profile ? PROFILED.length * (WARMUP_S + SECONDS + 25) : 0)) * 2 * 1000;

const quiet = new Quiet(QUIET_WAIT);

// ---------------------------------------------------------------------------------------------
// Tokens (as bench/proxy.ts makes them)


// ---------------------------------------------------------------------------------------------
// Servers

function gatewaySettings(target: Target, keys: SigningKey, backendUrl: string, redisUrl: string): Record<string, string> {
  return {
    // warn: no access-log line per request (bench:proxy measures that), and a log that should stay empty.
    LOG_LEVEL: 'warn',
    SIGNING_KEYS: keys.signingKeys,
    ROUTES: JSON.stringify([{ prefix: PREFIX, targets: [backendUrl] }]),
    RATE_LIMITS: limitsOn(target) ? 'enforce' : 'off',
    ...(limitsOn(target) ? { RATE_LIMIT_RULES: RULES } : {}),
    ...(usesRedis(target) ? { REDIS_URL: redisUrl } : {}),
  };
}

async function startTarget(target: Target, runtime: Runtime, keys: SigningKey, backendUrl: string, redisUrl: string, nodeFlags: string[] = []): Promise<Server> {
  switch (target) {
    case 'direct': return startBenchServer(LABEL[target], 'backend.ts', SERVER_CORE, {}, { readyPath: PATH, readyStatus: 200 });
    case 'floor': return startBenchServer(LABEL[target], 'floor.ts', SERVER_CORE, { BACKEND: backendUrl, PUBLIC_KEY: keys.publicPem }, { readyPath: PATH, readyStatus: 401 });
    default:
      return gatewayServer(LABEL[target], await startGateway({ name: target, runtime, settings: gatewaySettings(target, keys, backendUrl, redisUrl), nodeFlags }));
  }
}

/**
 * 200 with the backend's answer for a valid token, 401 without one; a limits-on gateway sends
 * the RateLimit fields of the quota (so it counted, and enforces: a dry run sends none), a
 * limits-off one none.
 */
async function sanityCheck(target: Target, server: Server, tokens: TokenSupply): Promise<void> {
  const token = readFileSync(tokens.file, 'utf8').slice(0, 4096).split('\n')[0]!;
  const what = server.label;
  const ok = await fetch(`${server.url}${PATH}`, { headers: { authorization: `Bearer ${token}` } });
  const body = await ok.text();
  if (ok.status !== 200) throw new Error(`${what}: GET ${PATH} with a valid token answered ${ok.status}: ${body.slice(0, 300)}`);
  let reached: { from?: unknown; path?: unknown } = {};
  try { reached = JSON.parse(body) as typeof reached; } catch { /* checked below */ }
  if (reached.from !== 'bench-backend' || reached.path !== PATH) throw new Error(`${what}: the answer is not the backend's for ${PATH}: ${body.slice(0, 300)}`);
  if (target === 'direct') return;
  const without = await fetch(`${server.url}${PATH}`);
  await without.arrayBuffer();
  if (without.status !== 401) throw new Error(`${what}: GET ${PATH} without a token answered ${without.status}, not 401`);
  if (!isGateway(target)) return;
  const policy = ok.headers.get('ratelimit-policy');
  if (limitsOn(target)) {
    const want = QUOTA.map((w) => `"${ACCOUNT_LIMIT}-${w.seconds}s";q=${w.limit};w=${w.seconds}`).join(', ');
    if (policy !== want) throw new Error(`${what}: RateLimit-Policy is ${JSON.stringify(policy)}, expected ${JSON.stringify(want)} (are the limits on and the rule applied?)`);
  } else if (policy !== null || ok.headers.get('ratelimit') !== null) {
    throw new Error(`${what}: RATE_LIMITS=off but the answer carries RateLimit fields: ${policy}`);
  }
}

// ---------------------------------------------------------------------------------------------
// What was counted: the gateway's decisions (/metrics), Redis's commands (INFO commandstats)

/** gateway_rate_limit_decisions_total of the route's account limit, by outcome. */
async function decisions(server: Server): Promise<Record<string, number>> {
  const res = await fetch(`${server.url}/metrics`);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${server.label}: GET /metrics answered ${res.status}`);
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^gateway_rate_limit_decisions_total\{([^}]*)\} (\d+)$/gm)) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (labels.limit === ACCOUNT_LIMIT && labels.outcome !== undefined) out[labels.outcome] = Number(m[2]);
  }
  return out;
}

/** Redis's command counts by name, the INFO calls (this script's) left out. */
async function redisCalls(admin: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info') calls.set(m[1]!, Number(m[2]));
  }
  return calls;
}

function callsDelta(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, n] of after) if (n - (before.get(name) ?? 0) > 0) out[name] = n - (before.get(name) ?? 0);
  return out;
}

/** RSS and its peak (VmHWM) of a process, MB; NaN once it is gone. */
function memoryMb(pid: number): { rssMb: number; peakMb: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
  } catch {
    return { rssMb: NaN, peakMb: NaN };
  }
}

// ---------------------------------------------------------------------------------------------
// Load

interface Run extends LoadFigures {
  target: Target;
  round: number;
  /** The proxies' backend, per request (idle for `direct`). */
  backendCpuUsPerReq: number;
  /** Decisions of the account limit during the run, by outcome (limits-on gateways). */
  decided?: Record<string, number>;
  /** Admitted decisions per answered request: 1, give or take the requests in flight when wrk stopped. */
  countedPerReq?: number;
  /** Redis commands during the run, by name, and their total per request (gateways with Redis). */
  redisCalls?: Record<string, number>;
  redisCallsPerReq?: number;
  /** EVALSHA calls per request: the counters' round trips (one script call a hit). */
  evalshaPerReq?: number;
  /** redis-server's CPU per request (gateways with Redis). */
  redisCpuUsPerReq?: number;
  /** The server's resident memory right after the run, MB. */
  rssMb: number;
}

interface Context {
  backend: Server;
  redis: RedisServer;
  tokens: TokenSupply;
}

async function measure(ctx: Context, target: Target, server: Server, seconds: number, round: number): Promise<Run> {
  const tokensFile = await ctx.tokens.fileFor(seconds);
  await quiet.wait(server.label);
  const decidedBefore = limitsOn(target) ? await decisions(server) : undefined;
  const callsBefore = usesRedis(target) ? await redisCalls(ctx.redis.admin) : undefined;
  const redisCpuBefore = processCpuSeconds(ctx.redis.proc.pid!);
  const figures = await measureLoad(bearerRun(server.url, PATH, tokensFile, CONNECTIONS, seconds), { server: server.pid, backend: ctx.backend.pid });
  const redisCpu = processCpuSeconds(ctx.redis.proc.pid!) - redisCpuBefore;
  if (!isRunning(server.proc)) throw new Error(`${server.label} died during the run:\n${server.err.tail()}\n${server.out.tail()}`);
  if (!isRunning(ctx.backend.proc)) throw new Error(`the backend died during the run:\n${ctx.backend.err.tail()}`);
  if (!isRunning(ctx.redis.proc)) throw new Error('redis-server died during the run');
  const run: Run = { target, round, ...figures, rssMb: memoryMb(server.pid).rssMb };
  const requests = Math.max(figures.requests, 1);
  if (decidedBefore !== undefined) {
    const after = await decisions(server);
    run.decided = Object.fromEntries(Object.entries(after).map(([k, n]) => [k, n - (decidedBefore[k] ?? 0)]));
    run.countedPerReq = (run.decided.admitted ?? 0) / requests;
  }
  if (callsBefore !== undefined) {
    run.redisCalls = callsDelta(callsBefore, await redisCalls(ctx.redis.admin));
    run.redisCallsPerReq = Object.values(run.redisCalls).reduce((a, n) => a + n, 0) / requests;
    run.evalshaPerReq = (run.redisCalls.evalsha ?? 0) / requests;
    run.redisCpuUsPerReq = (redisCpu * 1e6) / requests;
  }
  return run;
}

function runLine(run: Run): string {
  return `${LABEL[run.target].padEnd(23)} ${fmt(run.rps).padStart(6)} req/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
    + `  server ${fmt(run.serverCpuUsPerReq)} µs/req (core ${fmt(100 * run.serverCoreUse)} %)  backend ${fmt(run.backendCpuUsPerReq)} µs/req  wrk ${fmt(run.clientCpuUsPerReq)} µs/req`
    + `  client core ${fmt(100 * run.clientCoreUse)} %  other load ${fmt(run.foreignCores, 2)}  steal ${fmt(run.stolenCores, 2)}`
    + `${run.countedPerReq === undefined ? '' : `  counted ${fmt(run.countedPerReq, 3)}/req, refused ${run.decided?.refused ?? 0}`}`
    + `${run.redisCallsPerReq === undefined ? '' : `  Redis ${fmt(run.redisCallsPerReq, 3)} cmd/req (${Object.entries(run.redisCalls ?? {}).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}), ${fmt(run.redisCpuUsPerReq)} µs/req`}`
    + `${run.non2xx + run.socketErrors > 0 ? `  ERRORS: ${run.non2xx} non-2xx, ${run.socketErrors} socket` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// Profile (--profile): one more gateway per profiled target under --cpu-prof, after the rounds

/** Where in the gateway's code and packages the limits spend their time. */
interface LimitsShare {
  /** Samples with a frame of the limits' own code on the stack (limits/, state/rate-counters/): synchronous work only. */
  limitsInclusive: number;
  /** Self time by package the limits use (also used elsewhere: ioredis by Redis state, lru-cache by caches). */
  packages: Record<string, number>;
}

interface ProfileResult {
  target: Target;
  summary: ProfileSummary;
  share: LimitsShare;
}

const LIMITS_CODE = /\/(src|dist)\/(limits\/|state\/rate-counters\/)/;
const LIMITS_PACKAGES = ['pkg ioredis', 'pkg cockatiel', 'pkg lru-cache', 'pkg prom-client', 'pkg redis-parser', 'pkg denque'];

function limitsShare(profile: CpuProfile, window: [number, number]): LimitsShare {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let busy = 0;
  let limits = 0;
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < window[0] || t > window[1]) continue;
    const weight = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
    const node = byId.get(profile.samples[i]!);
    if (node === undefined || node.callFrame.functionName === '(idle)') continue;
    busy += weight;
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      if (LIMITS_CODE.test(byId.get(id)!.callFrame.url)) {
        limits += weight;
        break;
      }
    }
  }
  const areas = summarizeProfile(profile, window, 1000).selfByArea;
  return {
    limitsInclusive: busy === 0 ? 0 : (100 * limits) / busy,
    packages: Object.fromEntries(LIMITS_PACKAGES.map((p) => [p.slice(4), areas.find((a) => a.name === p)?.percent ?? 0])),
  };
}

async function profileTargets(ctx: Context, tmp: string, runtime: Runtime, keys: SigningKey): Promise<ProfileResult[]> {
  const results: ProfileResult[] = [];
  for (const target of PROFILED) {
    const dir = join(tmp, `prof-${target}`);
    mkdirSync(dir, { recursive: true });
    const gw = await startTarget(target, runtime, keys, ctx.backend.url, ctx.redis.url, ['--cpu-prof', '--cpu-prof-dir', dir]);
    let window: [number, number];
    try {
      // A new gateway: on memory state it refuses the tokens minted before it started.
      await ctx.tokens.renew();
      if (WARMUP_S > 0) await measure(ctx, target, gw, WARMUP_S, -1);
      const from = profileClockUs();
      const run = await measure(ctx, target, gw, SECONDS, -1);
      window = [from, profileClockUs()];
      log(`profile run: ${runLine(run)}`);
    } finally {
      // Writing the profile at exit takes a while for a busy process.
      await stopChild(gw.proc, 15_000);
    }
    const profile = readProfile(dir, join(RESULTS, `limits-${target}.cpuprofile`));
    results.push({ target, summary: summarizeWindow(profile, window, LABEL[target]), share: limitsShare(profile, window) });
  }
  return results;
}

function profileShareTable(profiles: ProfileResult[]): string {
  const lines = [
    `| gateway | limits' own code on the stack (inclusive) | ${LIMITS_PACKAGES.map((p) => `${p.slice(4)} (self)`).join(' | ')} |`,
    `|---|---:|${'---:|'.repeat(LIMITS_PACKAGES.length)}`,
  ];
  for (const p of profiles) {
    lines.push(`| ${LABEL[p.target]} | ${fmt(p.share.limitsInclusive, 1)} % | ${LIMITS_PACKAGES.map((k) => `${fmt(p.share.packages[k.slice(4)], 1)} %`).join(' | ')} |`);
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

type Row = { target: Target } & LoadRow & {
  countedPerReq: number;
  refused: number;
  redisCallsPerReq: number;
  evalshaPerReq: number;
  redisCpuUsPerReq: number;
  /** Resident memory before the load and after the last round, and the peak, MB. */
  rssBeforeMb: number;
  rssAfterMb: number;
  peakMb: number;
};

function summarize(runs: Run[], memory: Map<Target, { before: number; after: number; peak: number }>): Row[] {
  return TARGETS.map((target) => {
    const own = runs.filter((r) => r.target === target);
    const m = memory.get(target)!;
    return {
      target,
      ...loadRow(own, { backend: true }),
      ...medians(own, ['countedPerReq', 'redisCallsPerReq', 'evalshaPerReq', 'redisCpuUsPerReq']),
      refused: own.reduce((a, r) => a + (r.decided?.refused ?? 0), 0),
      rssBeforeMb: m.before, rssAfterMb: m.after, peakMb: m.peak,
    };
  });
}

function ratios(runs: Run[]): Ratio[] {
  const paired = (a: Target, b: Target, metric: (r: Run) => number) => pairedRatio(runs, ROUNDS, { target: a }, { target: b }, metric);
  const rps = (r: Run) => r.rps;
  const p50 = (r: Run) => r.p50Ms;
  const p99 = (r: Run) => r.p99Ms;
  const cpu = (r: Run) => r.serverCpuUsPerReq;
  const list: Ratio[] = [];
  const against = (a: Target, b: Target) => {
    list.push({ name: `${LABEL[a]} / ${LABEL[b]}, throughput`, ...paired(a, b, rps) });
    list.push({ name: `${LABEL[a]} / ${LABEL[b]}, p50 latency`, ...paired(a, b, p50) });
    list.push({ name: `${LABEL[a]} / ${LABEL[b]}, p99 latency`, ...paired(a, b, p99) });
    list.push({ name: `${LABEL[a]} / ${LABEL[b]}, CPU per request`, ...paired(a, b, cpu) });
  };
  against('memory', 'off');
  if (TARGETS.includes('off-redis')) {
    // Issue 32's target 3: limits on against Redis, ≥ 0.8× the same run with limits off (and
    // the same Redis state, so that only the counting differs).
    const target = paired('redis', 'off-redis', rps);
    list.push({ name: `${LABEL.redis} / ${LABEL['off-redis']}, throughput (issue 32)`, ...target, target: { text: '≥ 0.8×', met: target.median >= 0.8 } });
    against('redis', 'off-redis');
  }
  list.push({ name: `${LABEL.redis} / ${LABEL.off}, throughput`, ...paired('redis', 'off', rps) });
  list.push({ name: `${LABEL.redis} / ${LABEL.off}, CPU per request`, ...paired('redis', 'off', cpu) });
  list.push({ name: `${LABEL.redis} / ${LABEL.memory}, throughput`, ...paired('redis', 'memory', rps) });
  for (const t of GATEWAYS.filter((g) => TARGETS.includes(g))) list.push({ name: `${LABEL[t]} / floor, throughput`, ...paired(t, 'floor', rps) });
  list.push({ name: 'floor / direct, throughput', ...paired('floor', 'direct', rps) });
  for (const t of ['off', 'memory', 'redis'] as const) list.push({ name: `${LABEL[t]} / direct, throughput`, ...paired(t, 'direct', rps) });
  return list;
}

/** Median over rounds of a's CPU per request minus b's: what a adds, µs. */
function addedCpu(runs: Run[], a: Target, b: Target): number {
  return median(perRound(runs, ROUNDS, { target: a }, { target: b }, (x, y) => x.serverCpuUsPerReq - y.serverCpuUsPerReq));
}

function addedCpuPairs(): [Target, Target][] {
  return [['memory', 'off'], ...(TARGETS.includes('off-redis') ? [['redis', 'off-redis'], ['off-redis', 'off']] as [Target, Target][] : []), ['redis', 'off']];
}

function addedCpuLines(runs: Run[]): string[] {
  return addedCpuPairs().map(([a, b]) => `- ${LABEL[a]} − ${LABEL[b]}, CPU per request: **${fmt(addedCpu(runs, a, b))} µs** (median of the per-round differences)`);
}

function resultsTable(rows: Row[]): string {
  const lines = [
    '| server | req/s (median) | range over rounds | p50 ms | p99 ms | server CPU µs/req | server core use | backend CPU µs/req | wrk CPU µs/req | client core use | counted / req | refused | EVALSHA / req | Redis commands / req (in scripts too) | redis-server CPU µs/req | RSS MB before → after (peak) | other load (cores) | non-2xx / socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const backend = r.target === 'direct' ? '—' : fmt(r.backendCpuUsPerReq);
    const counted = limitsOn(r.target) ? fmt(r.countedPerReq, 3) : '—';
    const refused = limitsOn(r.target) ? String(r.refused) : '—';
    const redis = usesRedis(r.target) ? [fmt(r.evalshaPerReq, 3), fmt(r.redisCallsPerReq, 3), fmt(r.redisCpuUsPerReq)] : ['—', '—', '—'];
    lines.push(`| ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.rpsRange[0])}–${fmt(r.rpsRange[1])} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.serverCpuUsPerReq)} | ${fmt(100 * r.serverCoreUse)} % | ${backend} | ${fmt(r.clientCpuUsPerReq)} | ${fmt(100 * r.clientCoreUse)} % | ${counted} | ${refused} | ${redis[0]} | ${redis[1]} | ${redis[2]} | ${fmt(r.rssBeforeMb)} → ${fmt(r.rssAfterMb)} (${fmt(r.peakMb)}) | ${fmt(r.foreignCores, 2)} | ${r.non2xx} / ${r.socketErrors} of ${r.requests} |`);
  }
  return lines.join('\n');
}

function roundsTable(runs: Run[], metric: (r: Run) => number = (r) => r.rps): string {
  return roundsTableOf(runs, ROUNDS, ['server'], TARGETS.map((target) => ({ labels: [LABEL[target]], match: { target } })), metric);
}

/** What the Redis commands of the runs were, per request, summed over the rounds. */
function redisMix(runs: Run[], target: Target): string {
  const own = runs.filter((r) => r.target === target);
  const requests = own.reduce((a, r) => a + r.requests, 0);
  const total = new Map<string, number>();
  for (const r of own) for (const [k, n] of Object.entries(r.redisCalls ?? {})) total.set(k, (total.get(k) ?? 0) + n);
  return [...total].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k.toUpperCase()} ${fmt(n / Math.max(requests, 1), 3)}`).join(', ') || 'none';
}

/** Counting problems: a limits-on run that refused, or did not count about one decision per answered request. */
function countingProblems(runs: Run[]): string[] {
  const out: string[] = [];
  for (const r of runs) {
    if (!limitsOn(r.target) || r.round < 0) continue;
    const admitted = r.decided?.admitted ?? 0;
    if ((r.decided?.refused ?? 0) > 0) out.push(`${LABEL[r.target]} round ${r.round + 1}: ${r.decided!.refused} refused`);
    // wrk does not count the requests in flight when it stops; the gateway may have counted them.
    if (admitted < r.requests || admitted > r.requests + CONNECTIONS) out.push(`${LABEL[r.target]} round ${r.round + 1}: ${admitted} admitted for ${r.requests} answered`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Main

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const keys = makeSigningKey();
  const redis = await startRedis(tmp);
  const backend = await startBenchServer('backend', 'backend.ts', CLIENT_CORE, {}, { readyPath: PATH, readyStatus: 200 });
  const servers = new Map<Target, Server>();
  for (const target of TARGETS) servers.set(target, await startTarget(target, runtime, keys, backend.url, redis.url));
  // Minted once the gateways run: on a new Redis the first one starts the epoch, and a gateway
  // refuses access tokens issued before it (src/state/revocation/store.ts).
  const tokens = await TokenSupply.mint(NAME, keys.privateKey, tmp, TOKENS, ACCOUNTS);
  const ctx: Context = { backend, redis, tokens };
  for (const [target, server] of servers) await sanityCheck(target, server, ctx.tokens);
  const memory = new Map<Target, { before: number; after: number; peak: number }>();
  for (const [target, server] of servers) memory.set(target, { before: memoryMb(server.pid).rssMb, after: NaN, peak: NaN });

  const env = {
    ...runEnv(started, source, runtime),
    redis: redis.version,
    packages: Object.fromEntries(['http-proxy-3', 'jose', 'fast-jwt', 'ioredis', 'lru-cache', 'cockatiel', 'prom-client'].map((p) => [p, packageVersion(p)])),
    pinning: PIN
      ? `server under test on core ${SERVER_CORE} (\`taskset -c ${SERVER_CORE}\`, all its threads); wrk, the proxies' backend, redis-server and this script on core ${CLIENT_CORE}`
      : 'none (needs taskset and 2+ cores)',
    rules: RULES,
  };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; Redis ${redis.version}; runtime ${runtime.mode}; gateway src/ at ${source}`);
  log(`${NAME}: ${TARGETS.map((t) => LABEL[t]).join(', ')}; ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections; pinning: ${env.pinning}`);
  log(`${NAME}: sanity checks passed (200 through every server with a valid token, 401 without; RateLimit-Policy of the quota from the limits-on gateways, none from the others)`);

  const runs = await rotatedRounds({
    targets: TARGETS, rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP_S, quiet, label: (t) => LABEL[t], line: runLine,
    measure: (target, seconds, round) => measure(ctx, target, servers.get(target)!, seconds, round),
  });
  for (const [target, server] of servers) {
    const m = memoryMb(server.pid);
    memory.set(target, { ...memory.get(target)!, after: m.rssMb, peak: m.peakMb });
  }
  const gatewayLogs = GATEWAYS.filter((t) => servers.has(t)).map((t) => ({ label: LABEL[t], lines: servers.get(t)!.out.lines.length, tail: servers.get(t)!.out.tail(5) })).filter((s) => s.lines > 0);
  const stderrLines = [...servers.values(), ctx.backend].map((s) => ({ label: s.label, lines: s.err.lines.length, tail: s.err.tail(5) })).filter((s) => s.lines > 0);
  for (const server of servers.values()) await stopChild(server.proc);

  let profiles: ProfileResult[] = [];
  if (opt.profile) {
    log(`profile: ${PROFILED.map((t) => LABEL[t]).join(', ')}, each a gateway under --cpu-prof, ${SECONDS} s after a ${WARMUP_S} s warm-up`);
    profiles = await profileTargets(ctx, tmp, runtime, keys);
  }
  ctx.redis.admin.disconnect();

  const rows = summarize(runs, memory);
  const ratioList = ratios(runs);
  const errors = rows.reduce((a, r) => a + r.non2xx + r.socketErrors, 0);
  const counting = countingProblems(runs);
  const cpuLines = addedCpuLines(runs);
  const report: LoadReport = { table: resultsTable(rows), ratios: [...ratioList.map(ratioLine), ...cpuLines], rounds: roundsTable(runs) };
  const redisTargets = TARGETS.filter(usesRedis);
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}, Redis ${redis.version}`,
    `- gateways: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, LOG_LEVEL=warn, one Ed25519 signing key, \`ROUTES=[{"prefix":"${PREFIX}","targets":["http://127.0.0.1:<backend>"]}]\` (bearer token required, every other route setting at its default); limits off: \`RATE_LIMITS=off\`; limits on: \`RATE_LIMITS=enforce\`, \`RATE_LIMIT_RULES=${RULES}\` (the default's two windows, out of reach: one counter call per request, never a 429); Redis: \`REDIS_URL\` to a redis-server of the run (\`--save '' --appendonly no\`)`,
    `- floor: bench/servers/floor.ts, http-proxy-3 ${env.packages['http-proxy-3']} + jose ${env.packages.jose} on node:http; backend and floor under plain \`node\``,
    `- pinning: ${env.pinning}; \`direct\` is a second instance of the backend, on core ${SERVER_CORE}`,
    `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, \`GET ${PATH}\`, each request with the next of ${TOKENS} distinct tokens of ${ACCOUNTS} accounts; ${ROUNDS} rounds × ${SECONDS} s per server after a ${WARMUP_S} s warm-up (two passes over the tokens at 8,000 a second, or --warmup if longer), the order rotated by one server each round`,
    `- counted: \`counted / req\` is the gateway's \`gateway_rate_limit_decisions_total{limit="${ACCOUNT_LIMIT}",outcome="admitted"}\` over the run per answered request (1 plus the requests in flight when wrk stopped); Redis commands from INFO commandstats, those a script runs inside Redis included (per request: ${redisTargets.map((t) => `${LABEL[t]}: ${redisMix(runs, t)}`).join('; ')})`,
    stolenLine(runs),
    otherLoadLine(runs, QUIET_WAIT, 'run'),
    '',
    ...loadReportLines(report),
    '',
    'Resident memory (RSS, MB) right after each round\'s run:',
    '',
    roundsTable(runs, (r) => r.rssMb),
    '',
    gatewayLogs.length === 0 ? 'No gateway logged anything (LOG_LEVEL=warn) during the runs.' : `Gateways logged at warn or above: ${gatewayLogs.map((s) => `${s.label} ${s.lines} line(s)`).join(', ')}.`,
    ...(stderrLines.length > 0 ? [`Lines on stderr: ${stderrLines.map((s) => `${s.label} ${s.lines}`).join(', ')}.`] : []),
    counting.length === 0 ? 'Every run of a limits-on gateway counted each answered request once and refused none.' : `Counting problems: ${counting.join('; ')}.`,
    ...(profiles.length > 0
      ? ['', `CPU profiles (\`--profile\`: one more gateway per variant under \`node --cpu-prof\`, sampled over a ${SECONDS} s run after the warm-up; shares of the main thread's samples, idle excluded). The limits' own code counts only its synchronous part (what runs after an await of Redis is under ioredis's socket handler):`, '',
        profileShareTable(profiles), '',
        ...profiles.flatMap((p) => [formatProfileSummary(`${LABEL[p.target]}, proxied GET with a bearer token`, p.summary), ''])]
      : []),
  ].join('\n');

  process.stdout.write(loadReportText(report));
  for (const s of gatewayLogs) process.stdout.write(`\n${s.label} logged ${s.lines} line(s), last:\n${s.tail}\n`);
  for (const s of stderrLines) process.stdout.write(`\n${s.label} wrote ${s.lines} line(s) on stderr, last:\n${s.tail}\n`);
  process.stdout.write(`\nRSS MB after each round:\n${roundsTable(runs, (r) => r.rssMb)}\n`);
  process.stdout.write(`\nRSS MB before → after (peak): ${rows.map((r) => `${LABEL[r.target]} ${fmt(r.rssBeforeMb)} → ${fmt(r.rssAfterMb)} (${fmt(r.peakMb)})`).join('; ')}\n`);
  process.stdout.write(counting.length === 0 ? '\ncounting: every limits-on run counted each answered request once, none refused\n' : `\nCOUNTING PROBLEMS: ${counting.join('; ')}\n`);
  if (profiles.length > 0) process.stdout.write(`\n${profileShareTable(profiles)}\n`);
  for (const p of profiles) process.stdout.write(`\n${formatProfileSummary(`${LABEL[p.target]}, proxied GET with a bearer token`, p.summary)}\n`);

  writeRawFigures(RESULTS, 'limits', started, {
    env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP_S, connections: CONNECTIONS, tokens: TOKENS, accounts: ACCOUNTS, path: PATH, targets: TARGETS },
    rows, ratios: ratioList, addedCpuUsPerReq: Object.fromEntries(addedCpuPairs().map(([a, b]) => [`${a} - ${b}`, addedCpu(runs, a, b)])), counting, runs, profiles,
  });
  const failures = [
    ...(errors > 0 ? [`${errors} request(s) were not answered 2xx (${rows.filter((r) => r.non2xx + r.socketErrors > 0).map((r) => `${LABEL[r.target]}: ${r.non2xx} non-2xx, ${r.socketErrors} socket errors`).join('; ')})`] : []),
    ...(counting.length > 0 ? [`counting: ${counting.join('; ')}`] : []),
  ];
  updateReport(NAME, REPORT, generated, { noReport: opt.noReport, failure: failures.length > 0 ? failures.join('; ') : undefined });
}

runBench({ name: NAME, slug: 'limits', budgetMs: BUDGET_MS, tools: ['wrk', 'redis-server'], runtime: opt.runtime }, main);
