/**
 * Proxy throughput: the gateway's authenticated, proxied route under load, next to the backend
 * alone, the two floors of its stack, Koa written well and Fastify, each with one token reused,
 * with 5,000 distinct tokens reused (the realistic case) and with more distinct tokens than any
 * cache holds, cycled (the cache-miss path). Results: a table on stdout, bench/reports/proxy.md
 * (method and findings: "Proxy: gateway vs floors, Koa and Fastify" in bench/README.md), and
 * bench/results/proxy-<time>.json.
 *
 *   npm run bench [-- --rounds 5 --seconds 5 --warmup 2 --connections 64 --modes one,many,new
 *                     --many-tokens 5000 --new-tokens 100000 --koa-cache 50000 --variants
 *                     --quiet-wait 120 --runtime dist|tsx --profile --no-report]
 *
 * What runs (everything on 127.0.0.1, every process started here is stopped here):
 * - `direct`: bench/servers/backend.ts, node:http answering ~100 bytes of JSON;
 * - `bare Node proxy`: bench/servers/bare.ts, node:http's server, `http.request` over a
 *   keep-alive agent and `pipe`, no auth and no log: issue 32's CPU floor (runs in no mode, as
 *   `direct`);
 * - `floor HS256` and `floor Ed25519`: bench/servers/floor.ts, a bare http-proxy-3 server that
 *   verifies the bearer token with jose (HS256 with a shared secret, or EdDSA as the gateway
 *   signs) and proxies over a keep-alive agent: what this stack costs at the least;
 * - `koa`: bench/servers/koa.ts, Koa + fast-jwt (synchronous, its LRU cache on at the gateway's
 *   bound) + http-proxy-3;
 * - `fastify`: bench/servers/fastify.ts, fastify + @fastify/jwt + @fastify/http-proxy;
 *   `fastify HS256` the same verifying HS256 tokens (issue 32's throughput peer);
 * - `gateway`: the product, built from src/, with one route `/bench` to the backend (a bearer
 *   token required, the default), its default Ed25519 tokens, RATE_LIMITS=off (the peers count
 *   nothing) and LOG_LEVEL=info, its production default, the log written to a file. With
 *   --variants also `gateway (log warn)` and `gateway (settings token)` (API settings tokens),
 *   in `many` mode only.
 * The proxies share one backend instance; `direct` gets its own instance of the same server,
 * on the core the servers under test use. With two or more cores the server under test is
 * pinned to core 1, and wrk, the proxies' backend and this script to core 0.
 *
 * Each server gets tokens of its own algorithm with the same claims (the HS256 floor HS256
 * tokens, the others EdDSA ones, all minted once the servers run). In `new` mode each run goes
 * on in the cyclic sequence where the server's last run stopped, so a token comes back only
 * after --new-tokens others: an LRU cache smaller than that never holds it. Rounds run every
 * (server, mode) once, the order rotated by one each round; figures are medians over rounds,
 * ratios medians of the per-round ratios.
 */
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { formatProfileSummary, isRecordKeeping, stackShare, type ProfileSummary } from './cpuprofile.js';
import { boundedInt, parseRunOptions, usage } from './lib/cli.js';
import { REPORTS, RESULTS, runEnv, startGateway, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, nproc, PIN, Quiet, SERVER_CORE } from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { profileClockUs, readProfile, summarizeWindow } from './lib/profile.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { gatewayServer, packageVersion, startNodeServer as startBenchServer, type Server } from './lib/servers.js';
import {
  loadReportText, loadRow, otherLoadLine, pairedRatio, perRound, ratioLine, roundsTable as roundsTableOf, stolenLine,
  type LoadRow, type Ratio,
} from './lib/summary.js';
import { makeHmacSecret, makeSigningKey, mintToken, TokenSupply, type SigningKey } from './lib/tokens.js';
import { bearerRun, measureLoad, type LoadFigures } from './lib/wrk.js';
import { describeSettings } from '../src/config/schema.js';
import { mintSettingsToken, settingsTokenDigest, settingsTokenStart } from '../src/domain/settings-token.js';

const NAME = 'bench';
const REPORT: Report = { file: join(REPORTS, 'proxy.md'), title: 'Proxy: gateway vs floors, Koa and Fastify', script: `npm run ${NAME}` };
/** What every client asks every server for: under the gateway's route prefix, as it reaches the backend. */
const PATH = '/bench/items/42';
/** Accounts the tokens' subjects are spread over. */
const ACCOUNTS = 100;

type Target = 'direct' | 'bare' | 'floor-hs' | 'floor-ed' | 'koa' | 'fastify' | 'fastify-hs' | 'gateway' | 'gateway-warn' | 'gateway-st';
const LABEL: Record<Target, string> = {
  direct: 'direct', bare: 'bare Node proxy', 'floor-hs': 'floor HS256', 'floor-ed': 'floor Ed25519', koa: 'koa', fastify: 'fastify', 'fastify-hs': 'fastify HS256',
  gateway: 'gateway', 'gateway-warn': 'gateway (log warn)', 'gateway-st': 'gateway (settings token)',
};
type Mode = 'one' | 'many' | 'new';
const MODES: readonly Mode[] = ['one', 'many', 'new'];
/** `direct` and `bare` take no token: they run once a round, in no mode. */
type CaseMode = Mode | '-';

// ---------------------------------------------------------------------------------------------
// Options

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 5, connections: 64 }, {
  modes: { type: 'string', default: MODES.join(',') },
  'many-tokens': { type: 'string', default: '5000' },
  'new-tokens': { type: 'string', default: '100000' },
  'koa-cache': { type: 'string', default: '50000' },
  variants: { type: 'boolean', default: false },
  'settings-tokens': { type: 'string', default: '100' },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
const MODES_RUN = (opt.extra.modes as string).split(',').map((m) => m.trim()) as Mode[];
if (MODES_RUN.length === 0 || MODES_RUN.some((m) => !MODES.includes(m)) || new Set(MODES_RUN).size !== MODES_RUN.length) usage(NAME, '--modes is a comma-separated list of one, many, new');
const MANY_TOKENS = boundedInt(NAME, 'many-tokens', opt.extra['many-tokens'] as string, 2, 100_000);
const NEW_TOKENS = boundedInt(NAME, 'new-tokens', opt.extra['new-tokens'] as string, 1000, 1_000_000);
const KOA_CACHE = boundedInt(NAME, 'koa-cache', opt.extra['koa-cache'] as string, 0, 1_000_000);
const VARIANTS = opt.extra.variants === true && MODES_RUN.includes('many');
const SETTINGS_TOKENS = boundedInt(NAME, 'settings-tokens', opt.extra['settings-tokens'] as string, 1, 10_000);
/**
 * The gateway's default bound on its cache of verified tokens, from its schema (50,000 where
 * the source has no such setting yet, as planned for issue 17).
 */
const GATEWAY_CACHE_ENTRIES = (() => {
  const row = describeSettings().find((r) => r.path === 'tokens.verifiedCacheMaxEntries');
  return typeof row?.default === 'number' ? row.default : 50_000;
})();
if (MODES_RUN.includes('new') && NEW_TOKENS <= Math.max(GATEWAY_CACHE_ENTRIES, KOA_CACHE)) {
  usage(NAME, `--new-tokens must exceed every cache (the gateway's ${GATEWAY_CACHE_ENTRIES} entries, koa's --koa-cache ${KOA_CACHE}) for \`new\` to miss`);
}
const COUNT: Record<Mode, number> = { one: 1, many: MANY_TOKENS, new: NEW_TOKENS };

const SERVERS: Target[] = ['direct', 'bare', 'floor-hs', 'floor-ed', 'koa', 'fastify', 'fastify-hs', 'gateway', ...(VARIANTS ? ['gateway-warn' as const, 'gateway-st' as const] : [])];

interface Case { target: Target; mode: CaseMode }
const CASES: Case[] = [
  { target: 'direct', mode: '-' },
  { target: 'bare', mode: '-' },
  ...MODES_RUN.flatMap((mode) => (['floor-hs', 'floor-ed', 'koa', 'fastify', 'fastify-hs', 'gateway'] as const).map((target) => ({ target, mode }))),
  ...(VARIANTS ? [{ target: 'gateway-warn' as const, mode: 'many' as const }, { target: 'gateway-st' as const, mode: 'many' as const }] : []),
];
const caseId = (c: Case) => `${c.target} ${c.mode}`;
const CASE_OF = new Map(CASES.map((c) => [caseId(c), c]));
const caseLabel = (c: Case) => (c.mode === '-' ? LABEL[c.target] : `${LABEL[c.target]} [${c.mode}]`);

/** Hard bound on the whole run, whatever happens. */
const BUDGET_MS = (180 + QUIET_WAIT + CASES.length * (WARMUP + 3 + ROUNDS * (SECONDS + 3)) + (opt.profile ? MODES_RUN.length * (WARMUP + SECONDS + 10) + 60 : 0)) * 2 * 1000;

const quiet = new Quiet(QUIET_WAIT);

// ---------------------------------------------------------------------------------------------
// Servers

/** One of bench/servers/*.ts (label: a target's, or "backend"), ready when it answers PATH. */
function startNodeServer(label: string, file: string, core: string, env: Record<string, string>): Promise<Server> {
  // The proxies answer 401 to a request without a token as soon as they listen.
  return startBenchServer(label, file, core, env, { readyPath: PATH, readyStatus: file === 'backend.ts' || file === 'bare.ts' ? 200 : 401 });
}

function gatewaySettings(keys: SigningKey, backendUrl: string, level: 'info' | 'warn', dataFile: string): Record<string, string> {
  return {
    LOG_LEVEL: level,
    // The peers count nothing; what the limits cost is bench:limits' subject.
    RATE_LIMITS: 'off',
    SIGNING_KEYS: keys.signingKeys,
    ROUTES: JSON.stringify([{ prefix: '/bench', targets: [backendUrl] }]),
    GATEWAY_DATA_FILE: dataFile,
  };
}

/**
 * The demo data plus `count` accounts with one API settings token each (as the owner API
 * stores them: digest and start), for every gateway alike; the tokens go to `<dir>/settings-tokens.txt`.
 */
function writeSettingsTokens(dir: string, count: number): { dataFile: string; tokensFile: string } {
  const data = JSON.parse(readFileSync(new URL('../config/demo-data.json', import.meta.url), 'utf8')) as { accounts: unknown[] };
  const createdAt = new Date().toISOString();
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const token = mintSettingsToken();
    tokens.push(token);
    data.accounts.push({
      id: `bench_st_${i}`, apiKeys: [],
      settingsTokens: [{ id: `stk_bench_${i}`, name: 'bench', digest: settingsTokenDigest(token), start: settingsTokenStart(token), scopes: [], createdAt }],
    });
  }
  const dataFile = join(dir, 'data.json');
  const tokensFile = join(dir, 'settings-tokens.txt');
  writeFileSync(dataFile, JSON.stringify(data));
  writeFileSync(tokensFile, `${tokens.join('\n')}\n`);
  return { dataFile, tokensFile };
}

interface Keys { ed: SigningKey; hs: ReturnType<typeof makeHmacSecret> }

async function startTarget(target: Target, runtime: Runtime, keys: Keys, backendUrl: string, dataFile: string, nodeFlags: string[] = []): Promise<Server> {
  const edEnv = { BACKEND: backendUrl, PUBLIC_KEY: keys.ed.publicPem };
  switch (target) {
    case 'direct': return startNodeServer(LABEL[target], 'backend.ts', SERVER_CORE, {});
    case 'bare': return startNodeServer(LABEL[target], 'bare.ts', SERVER_CORE, { BACKEND: backendUrl });
    case 'fastify-hs': return startNodeServer(LABEL[target], 'fastify.ts', SERVER_CORE, { BACKEND: backendUrl, HS256_SECRET: keys.hs.base64url });
    case 'floor-hs': return startNodeServer(LABEL[target], 'floor.ts', SERVER_CORE, { BACKEND: backendUrl, HS256_SECRET: keys.hs.base64url });
    case 'floor-ed': return startNodeServer(LABEL[target], 'floor.ts', SERVER_CORE, edEnv);
    case 'koa': return startNodeServer(LABEL[target], 'koa.ts', SERVER_CORE, { ...edEnv, CACHE: String(KOA_CACHE) });
    case 'fastify': return startNodeServer(LABEL[target], 'fastify.ts', SERVER_CORE, edEnv);
    case 'gateway':
    case 'gateway-st':
    case 'gateway-warn': {
      const level = target === 'gateway-warn' ? 'warn' : 'info';
      // Under info the log is one JSON line per request, written to a file as issue 32 measures
      // it (a file costs the writer more than /dev/null), and not read here, so that reading it
      // does not load the client core. Under warn it should stay empty, so it is kept and checked.
      const stdout = level === 'info' ? openSync(join(dirname(dataFile), `${target}${nodeFlags.length > 0 ? '-profiled' : ''}.log`), 'w') : 'pipe';
      const gw = await startGateway({ name: target, runtime, settings: gatewaySettings(keys.ed, backendUrl, level, dataFile), nodeFlags, stdout });
      if (typeof stdout === 'number') closeSync(stdout);
      return gatewayServer(LABEL[target], gw);
    }
  }
}

/**
 * 200 with the backend's answer for a valid token; 401 without one, for a token of another
 * key (of the server's own algorithm) and for the token mistyped. The gateway must also show
 * that its limits are off (no RateLimit-Policy field), as the peers count nothing.
 */
async function sanityCheck(target: Target, server: Server, token: string, foreignToken: string): Promise<void> {
  const get = async (authorization?: string) => {
    const res = await fetch(`${server.url}${PATH}`, { headers: authorization === undefined ? {} : { authorization } });
    return { status: res.status, body: await res.text(), headers: res.headers };
  };
  const what = server.label;
  const ok = await get(`Bearer ${token}`);
  if (ok.status !== 200) {
    const hint = target.startsWith('gateway') && ok.status === 404 ? ' (no proxied route: is the proxy in this build of src/?)' : '';
    throw new Error(`${what}: GET ${PATH} with a valid token answered ${ok.status}${hint}: ${ok.body.slice(0, 300)}`);
  }
  let reached: { from?: unknown; path?: unknown } = {};
  try { reached = JSON.parse(ok.body) as typeof reached; } catch { /* checked below */ }
  if (reached.from !== 'bench-backend' || reached.path !== PATH) throw new Error(`${what}: the answer is not the backend's for ${PATH}: ${ok.body.slice(0, 300)}`);
  if (target === 'direct' || target === 'bare') return;
  if (target.startsWith('gateway') && ok.headers.has('ratelimit-policy')) throw new Error(`${what}: sent RateLimit-Policy: rate limits are not off`);
  const typo = `${token.slice(0, 10)}${token[10] === 'a' ? 'b' : 'a'}${token.slice(11)}`;
  for (const [label, authorization] of [['without a token', undefined], ['with a token of another key', `Bearer ${foreignToken}`], ['with the token mistyped', `Bearer ${typo}`]] as const) {
    const r = await get(authorization);
    if (r.status !== 401) throw new Error(`${what}: GET ${PATH} ${label} answered ${r.status}, not 401: ${r.body.slice(0, 300)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Load

interface Run extends LoadFigures {
  target: Target;
  mode: CaseMode;
  round: number;
  /** The proxies' backend, per request (idle for `direct`). */
  backendCpuUsPerReq: number;
  /** Where in its token file the run began. */
  start: number;
}

interface Context {
  backend: Server;
  /** Per mode: EdDSA tokens (every server but the HS256 floor) and HS256 ones. */
  ed: Record<Mode, TokenSupply>;
  hs: Record<Mode, TokenSupply>;
  /** API settings tokens, for `gateway-st` (they do not expire). */
  settingsTokensFile: string;
  dataFile: string;
  /** Per server and token file: how many tokens its runs have sent so far, so that the next run goes on from there. */
  sent: Map<string, number>;
}

function supplyOf(ctx: Context, target: Target, mode: Mode): TokenSupply {
  return (target === 'floor-hs' || target === 'fastify-hs' ? ctx.hs : ctx.ed)[mode];
}

async function measure(ctx: Context, c: Case, server: Server, seconds: number, round: number): Promise<Run> {
  let file: string;
  let count: number;
  if (c.target === 'gateway-st') {
    file = ctx.settingsTokensFile;
    count = SETTINGS_TOKENS;
  } else {
    const supply = supplyOf(ctx, c.target, c.mode === '-' ? 'many' : c.mode);
    file = await supply.fileFor(seconds);
    count = supply.count;
  }
  const key = `${server.pid} ${file}`;
  const start = (ctx.sent.get(key) ?? 0) % count;
  await quiet.wait(server.label);
  const figures = await measureLoad(bearerRun(server.url, PATH, file, CONNECTIONS, seconds, start), { server: server.pid, backend: ctx.backend.pid });
  ctx.sent.set(key, start + Math.max(figures.sent, figures.requests));
  if (!isRunning(server.proc)) throw new Error(`${server.label} died during the run:\n${server.err.tail()}`);
  if (!isRunning(ctx.backend.proc)) throw new Error(`the backend died during the run:\n${ctx.backend.err.tail()}`);
  return { target: c.target, mode: c.mode, round, start, ...figures };
}

function runLine(run: Run): string {
  return `${caseLabel(run).padEnd(26)} ${fmt(run.rps).padStart(6)} req/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
    + `  server ${fmt(run.serverCpuUsPerReq)} µs/req (core ${fmt(100 * run.serverCoreUse)} %)  backend ${fmt(run.backendCpuUsPerReq)} µs/req  wrk ${fmt(run.clientCpuUsPerReq)} µs/req`
    + `  client core ${fmt(100 * run.clientCoreUse)} %  other load ${fmt(run.foreignCores, 2)}  steal ${fmt(run.stolenCores, 2)}`
    + `${run.non2xx + run.socketErrors > 0 ? `  ERRORS: ${run.non2xx} non-2xx, ${run.socketErrors} socket` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// Profile (--profile): one more gateway under --cpu-prof, after the measured rounds, a window per mode

interface Profiled { summary: ProfileSummary; /** Issue 32's target 2: the record keeping's share of the samples, %. */ recordKeeping: number }

async function profileGateway(ctx: Context, tmp: string, runtime: Runtime, keys: Keys): Promise<Map<Mode, Profiled>> {
  const dir = join(tmp, 'prof-gateway');
  mkdirSync(dir, { recursive: true });
  const gw = await startTarget('gateway', runtime, keys, ctx.backend.url, ctx.dataFile, ['--cpu-prof', '--cpu-prof-dir', dir]);
  const windows = new Map<Mode, [number, number]>();
  try {
    // A new gateway: it refuses the tokens minted before it started.
    for (const mode of MODES_RUN) await ctx.ed[mode].renew();
    for (const mode of MODES_RUN) {
      if (WARMUP > 0) await measure(ctx, { target: 'gateway', mode }, gw, WARMUP, -1);
      const from = profileClockUs();
      const run = await measure(ctx, { target: 'gateway', mode }, gw, SECONDS, -1);
      windows.set(mode, [from, profileClockUs()]);
      log(`profile run: ${runLine(run)}`);
    }
  } finally {
    // Writing the profile at exit takes a while for a busy process.
    await stopChild(gw.proc, 15_000);
  }
  const profile = readProfile(dir, join(RESULTS, 'proxy-gateway.cpuprofile'));
  return new Map([...windows].map(([mode, window]) => [mode, { summary: summarizeWindow(profile, window, `the gateway, ${mode}`), recordKeeping: stackShare(profile, window, isRecordKeeping) }]));
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

type Row = Case & LoadRow;

function summarize(runs: Run[]): Row[] {
  return CASES.map((c) => ({ ...c, ...loadRow(runs.filter((r) => r.target === c.target && r.mode === c.mode), { backend: true }) }));
}

const rps = (r: Run) => r.rps;
const p50 = (r: Run) => r.p50Ms;
const p99 = (r: Run) => r.p99Ms;
const cpu = (r: Run) => r.serverCpuUsPerReq;
const METRICS = { throughput: rps, p50: p50, p99: p99, cpu: cpu } as const;
type Metric = keyof typeof METRICS;

/** `a`'s metric over `b`'s, per round; `direct` (no mode) is paired with `b`'s mode. */
function paired(runs: Run[], a: Case, b: Case, metric: Metric) {
  return pairedRatio(runs, ROUNDS, { target: a.target, mode: a.mode }, { target: b.target, mode: b.mode }, METRICS[metric]);
}

interface RatioCell { target: Target; mode: Mode; against: Target; metric: Metric; median: number; min: number; max: number }

/** Every server's four figures over the HS256 floor's, per mode (the miss path also over the Ed25519 floor's). */
function ratioCells(runs: Run[]): RatioCell[] {
  const cells: RatioCell[] = [];
  for (const mode of MODES_RUN) {
    const against: Target[] = mode === 'new' ? ['floor-hs', 'floor-ed'] : ['floor-hs'];
    for (const floor of against) {
      for (const c of CASES.filter((x) => (x.mode === mode || x.mode === '-') && x.target !== floor)) {
        for (const metric of Object.keys(METRICS) as Metric[]) {
          cells.push({ target: c.target, mode, against: floor, metric, ...paired(runs, c, { target: floor, mode }, metric) });
        }
      }
    }
  }
  return cells;
}

/** The issue's targets, each as a ratio line marked met or not met. */
function targets(runs: Run[]): Ratio[] {
  const list: Ratio[] = [];
  const gw = (mode: Mode): Case => ({ target: 'gateway', mode });
  // Issue 32's target 1: CPU per request against the bare Node proxy, throughput against
  // Fastify with @fastify/jwt verifying HS256 on every request.
  for (const mode of MODES_RUN.filter((m) => m !== 'new')) {
    const b = paired(runs, gw(mode), { target: 'bare', mode: '-' }, 'cpu');
    list.push({ name: `[${mode}] gateway / bare Node proxy, CPU per request (issue 32)`, ...b, target: { text: '≤ 1.3×', met: b.median <= 1.3 } });
    const f = paired(runs, gw(mode), { target: 'fastify-hs', mode }, 'throughput');
    list.push({ name: `[${mode}] gateway / fastify HS256, throughput (issue 32)`, ...f, target: { text: '≥ 1.25×', met: f.median >= 1.25 } });
  }
  for (const mode of MODES_RUN.filter((m) => m !== 'new')) {
    const hs: Case = { target: 'floor-hs', mode };
    const t = paired(runs, gw(mode), hs, 'throughput');
    list.push({ name: `[${mode}] gateway / floor HS256, throughput`, ...t, target: { text: '≥ 1.25×', met: t.median >= 1.25 } });
    const l = paired(runs, gw(mode), hs, 'p99');
    list.push({ name: `[${mode}] gateway / floor HS256, p99 latency`, ...l, target: { text: '≤ 1.2×', met: l.median <= 1.2 } });
    const c = paired(runs, gw(mode), hs, 'cpu');
    list.push({ name: `[${mode}] gateway / floor HS256, CPU per request`, ...c, target: { text: '≤ 0.8×', met: c.median <= 0.8 } });
    const f = paired(runs, gw(mode), { target: 'fastify', mode }, 'throughput');
    list.push({ name: `[${mode}] gateway / fastify, throughput`, ...f, target: { text: '> 1× (stretch)', met: f.median > 1 } });
  }
  if (MODES_RUN.includes('new')) {
    const m = paired(runs, gw('new'), { target: 'floor-ed', mode: 'new' }, 'throughput');
    list.push({ name: '[new] gateway / floor Ed25519, throughput', ...m, target: { text: '≥ 0.9×', met: m.median >= 0.9 } });
    list.push({ name: '[new] gateway / floor HS256, throughput (no target)', ...paired(runs, gw('new'), { target: 'floor-hs', mode: 'new' }, 'throughput') });
  }
  if (VARIANTS) {
    const st = paired(runs, { target: 'gateway-st', mode: 'many' }, gw('many'), 'throughput');
    list.push({ name: '[many] gateway (settings token) / gateway (JWT), throughput', ...st, target: { text: '≥ 1.0× (no slower)', met: st.median >= 1 } });
    list.push({ name: '[many] gateway / gateway (log warn), throughput', ...paired(runs, gw('many'), { target: 'gateway-warn', mode: 'many' }, 'throughput') });
  }
  return list;
}

/** Median over rounds of the gateway's CPU per request minus `floor`'s in `mode`, µs. */
function addedCpu(runs: Run[], mode: Mode, floor: Target): number {
  return median(perRound(runs, ROUNDS, { target: 'gateway', mode }, { target: floor, mode }, (g, f) => g.serverCpuUsPerReq - f.serverCpuUsPerReq));
}

function resultsTable(rows: Row[]): string {
  const lines = [
    '| mode | server | req/s (median) | range over rounds | p50 ms | p99 ms | server CPU µs/req | server core use | backend CPU µs/req | wrk CPU µs/req | client core use | other load (cores) | non-2xx / socket errors |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const backend = r.target === 'direct' ? '—' : fmt(r.backendCpuUsPerReq);
    lines.push(`| ${r.mode} | ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.rpsRange[0])}–${fmt(r.rpsRange[1])} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.serverCpuUsPerReq)} | ${fmt(100 * r.serverCoreUse)} % | ${backend} | ${fmt(r.clientCpuUsPerReq)} | ${fmt(100 * r.clientCoreUse)} % | ${fmt(r.foreignCores, 2)} | ${r.non2xx} / ${r.socketErrors} of ${r.requests} |`);
  }
  return lines.join('\n');
}

/** Per mode and floor: a row per server, its four ratios (median of the per-round ratios, range). */
function ratiosTable(cells: RatioCell[]): string {
  const cell = (x: RatioCell | undefined) => (x === undefined ? '—' : `${fmt(x.median, 2)}× (${fmt(x.min, 2)}–${fmt(x.max, 2)})`);
  const lines = [
    '| mode | over | server | throughput | p50 | p99 | CPU per request |',
    '|---|---|---|---:|---:|---:|---:|',
  ];
  const groups = new Map<string, RatioCell[]>();
  for (const c of cells) {
    const k = `${c.mode}\u0000${c.against}\u0000${c.target}`;
    groups.set(k, [...(groups.get(k) ?? []), c]);
  }
  for (const group of groups.values()) {
    const [first] = group;
    const of = (metric: Metric) => group.find((c) => c.metric === metric);
    lines.push(`| ${first!.mode} | ${LABEL[first!.against]} | ${LABEL[first!.target]} | ${cell(of('throughput'))} | ${cell(of('p50'))} | ${cell(of('p99'))} | ${cell(of('cpu'))} |`);
  }
  return lines.join('\n');
}

function roundsTable(runs: Run[]): string {
  return roundsTableOf(runs, ROUNDS, ['mode', 'server'], CASES.map((c) => ({ labels: [c.mode, LABEL[c.target]], match: { target: c.target, mode: c.mode } })), (r) => r.rps);
}

// ---------------------------------------------------------------------------------------------
// Main

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const keys: Keys = { ed: makeSigningKey(), hs: makeHmacSecret() };
  const foreign = { ed: mintToken(makeSigningKey().privateKey, 0, ACCOUNTS), hs: mintToken(makeHmacSecret().key, 0, ACCOUNTS) };
  const backend = await startNodeServer('backend', 'backend.ts', CLIENT_CORE, {});
  const { dataFile, tokensFile: settingsTokensFile } = writeSettingsTokens(tmp, SETTINGS_TOKENS);
  const servers = new Map<Target, Server>();
  for (const target of SERVERS) servers.set(target, await startTarget(target, runtime, keys, backend.url, dataFile));
  // Minted once the gateways run: a gateway refuses access tokens issued before it started
  // (src/state/revocation/memory.ts). `direct` takes the `many` file and ignores it.
  const ed = {} as Record<Mode, TokenSupply>;
  const hs = {} as Record<Mode, TokenSupply>;
  for (const mode of new Set<Mode>([...MODES_RUN, 'many'])) {
    ed[mode] = await TokenSupply.mint(NAME, keys.ed.privateKey, tmp, COUNT[mode], ACCOUNTS, `ed-${mode}.txt`);
    hs[mode] = await TokenSupply.mint(NAME, keys.hs.key, tmp, COUNT[mode], ACCOUNTS, `hs-${mode}.txt`);
  }
  const ctx: Context = { backend, ed, hs, settingsTokensFile, dataFile, sent: new Map() };
  const firstLine = (file: string) => readFileSync(file, 'utf8').slice(0, 4096).split('\n')[0]!;
  for (const [target, server] of servers) {
    const token = firstLine(target === 'gateway-st' ? settingsTokensFile : supplyOf(ctx, target, 'many').file);
    await sanityCheck(target, server, token, target === 'floor-hs' || target === 'fastify-hs' ? foreign.hs : foreign.ed);
  }

  const env = {
    ...runEnv(started, source, runtime),
    packages: Object.fromEntries(['http-proxy-3', 'jose', 'koa', 'fastify', '@fastify/http-proxy', '@fastify/reply-from', '@fastify/jwt', 'fast-jwt', 'undici'].map((p) => [p, packageVersion(p, ['@fastify/jwt'])])),
    pinning: PIN
      ? `server under test on core ${SERVER_CORE} (\`taskset -c ${SERVER_CORE}\`, all its threads); wrk, the proxies' backend and this script on core ${CLIENT_CORE}`
      : 'none (needs taskset and 2+ cores)',
  };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; runtime ${runtime.mode}; gateway src/ at ${source}`);
  log(`${NAME}: ${SERVERS.map((t) => LABEL[t]).join(', ')}; modes ${MODES_RUN.join(', ')}; ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections; pinning: ${env.pinning}`);
  log(`${NAME}: sanity checks passed (200 through every server with a valid token; 401 without one, with another key's and mistyped)`);

  const runs = await rotatedRounds({
    targets: CASES.map(caseId), rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, quiet, label: (id) => caseLabel(CASE_OF.get(id)!), line: runLine,
    measure: (id, seconds, round) => {
      const c = CASE_OF.get(id)!;
      return measure(ctx, c, servers.get(c.target)!, seconds, round);
    },
  });
  const warnLines = servers.get('gateway-warn')?.out.lines.length ?? 0;
  const stderrLines = [...servers.values(), ctx.backend].map((s) => ({ label: s.label, lines: s.err.lines.length, tail: s.err.tail(5) })).filter((s) => s.lines > 0);
  for (const server of servers.values()) await stopChild(server.proc);

  let profiles: Map<Mode, Profiled> | undefined;
  if (opt.profile) {
    log(`profile: the gateway (LOG_LEVEL=info) under --cpu-prof, ${SECONDS} s per mode after a ${WARMUP} s warm-up`);
    profiles = await profileGateway(ctx, tmp, runtime, keys);
  }

  const rows = summarize(runs);
  const cells = ratioCells(runs);
  const targetList = targets(runs);
  const added = MODES_RUN.map((mode) => ({ mode, floorHs: addedCpu(runs, mode, 'floor-hs'), floorEd: addedCpu(runs, mode, 'floor-ed') }));
  const addedLines = added.map((a) => `- [${a.mode}] gateway − floor, CPU per request: ${fmt(a.floorHs)} µs over HS256, ${fmt(a.floorEd)} µs over Ed25519 (median of the per-round differences)`);
  const errors = rows.reduce((a, r) => a + r.non2xx + r.socketErrors, 0);
  const table = resultsTable(rows);
  const ratios = ratiosTable(cells);
  const rounds = roundsTable(runs);
  const modeText: Record<Mode, string> = {
    one: '`one`: one token reused by every request',
    many: `\`many\`: ${MANY_TOKENS} distinct tokens (of ${ACCOUNTS} accounts), each reused in turn (the realistic case)`,
    new: `\`new\`: ${NEW_TOKENS} distinct tokens cycled in order, each run going on where the server's last one stopped, so a token comes back only after ${NEW_TOKENS - 1} others: more than the gateway's cache holds by default (${GATEWAY_CACHE_ENTRIES} entries, or fewer if its byte bound comes first) and koa's (${KOA_CACHE}), so an LRU cache never has it (the miss path)`,
  };
  const profileText = (mode: Mode, p: Profiled) => formatProfileSummary(`gateway, proxied GET with a bearer token, mode ${mode}`, p.summary);
  // Target 2 from the profile (only with --profile): the one target a ratio cannot show.
  const recordKeepingLines = profiles === undefined ? [] : [...profiles].map(([mode, p]) => `- [${mode}] access log, request metrics and the exchange, share of the gateway's CPU samples with their code on the stack (issue 32, \`--profile\`): **${fmt(p.recordKeeping, 1)} %** — target ≤ 10 %: ${p.recordKeeping <= 10 ? 'met' : '**not met**'}`);
  const generated = [
    runHeading(env.date, 'bench'),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}`,
    `- gateway: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, one Ed25519 signing key (its default tokens), \`ROUTES=[{"prefix":"/bench","targets":["http://127.0.0.1:<backend>"]}]\` (bearer token required, every other route setting at its default), \`RATE_LIMITS=off\` (parity: the peers count nothing), LOG_LEVEL=info (the production default; one access-log line per request, stdout to a file, as issue 32 measures), every other setting at its default (its cache of verified tokens too)${VARIANTS ? `; \`gateway (log warn)\`: LOG_LEVEL=warn; \`gateway (settings token)\`: the \`gateway\` settings, called with ${SETTINGS_TOKENS} API settings tokens (one per account) cycled instead of JWTs` : ''}`,
    `- peers: bare Node proxy = bench/servers/bare.ts (node:http server, \`http.request\` over a keep-alive agent, \`pipe\` both ways; no auth, no log); fastify HS256 = the fastify peer below taking HS256 tokens (a 32-byte secret), issue 32's peer; floor HS256 / floor Ed25519 = http-proxy-3 ${env.packages['http-proxy-3']} + jose ${env.packages.jose} (\`jwtVerify\`, HS256 with a 32-byte secret / EdDSA, the gateway's verification options) on node:http, keep-alive agent, no cache; koa = koa ${env.packages.koa} + fast-jwt ${env.packages['fast-jwt']} (synchronous EdDSA, its LRU cache of verified tokens on, ${KOA_CACHE} entries${KOA_CACHE === 0 ? ': off' : ''}) + http-proxy-3, keep-alive agent, one middleware; fastify = fastify ${env.packages.fastify} + @fastify/http-proxy ${env.packages['@fastify/http-proxy']} (@fastify/reply-from ${env.packages['@fastify/reply-from']}, undici ${env.packages.undici}) + @fastify/jwt ${env.packages['@fastify/jwt']} (fast-jwt ${env.packages['fast-jwt']}, its default: no cache), no logger; all under plain \`node\`, NODE_ENV=production`,
    `- pinning: ${env.pinning}; \`direct\` is a second instance of the backend, on core ${SERVER_CORE} like the other servers under test`,
    `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, \`GET ${PATH}\`; tokens minted once the servers run, as the gateway signs them (HS256 ones with the same claims for the HS256 floor); ${ROUNDS} rounds × ${SECONDS} s per server and mode after a ${WARMUP} s warm-up, the order rotated by one each round`,
    ...MODES_RUN.map((m) => `- mode ${modeText[m]}`),
    stolenLine(runs),
    otherLoadLine(runs, QUIET_WAIT, 'run'),
    '',
    table,
    '',
    'Targets of the issue (median of the per-round ratios, range over rounds):',
    '',
    ...targetList.map(ratioLine),
    ...recordKeepingLines,
    '',
    'Every server against the floors, same mode (median of the per-round ratios, range over rounds; below 1 is less throughput, or less time or CPU):',
    '',
    ratios,
    '',
    ...addedLines,
    '',
    'req/s per round:',
    '',
    rounds,
    '',
    VARIANTS ? (warnLines === 0 ? 'The gateway under LOG_LEVEL=warn logged nothing during the runs.' : `The gateway under LOG_LEVEL=warn logged ${warnLines} line(s) during the runs.`) : '',
    ...(stderrLines.length > 0 ? [`Lines on stderr: ${stderrLines.map((s) => `${s.label} ${s.lines}`).join(', ')}.`] : []),
    ...(profiles !== undefined
      ? ['', `CPU profile (\`--profile\`: one more gateway, LOG_LEVEL=info, under \`node --cpu-prof\`, sampled over a ${SECONDS} s run per mode after its warm-up; shares of the main thread's samples, idle excluded):`, '', ...[...profiles].flatMap(([mode, p]) => [profileText(mode, p), ''])]
      : []),
  ].join('\n');

  process.stdout.write(loadReportText({ table, ratios: [...targetList.map(ratioLine), ...recordKeepingLines, '', ratios, '', ...addedLines], rounds }));
  if (warnLines > 0) process.stdout.write(`\ngateway (log warn) logged ${warnLines} line(s), last:\n${servers.get('gateway-warn')!.out.tail(5)}\n`);
  for (const s of stderrLines) process.stdout.write(`\n${s.label} wrote ${s.lines} line(s) on stderr, last:\n${s.tail}\n`);
  if (profiles !== undefined) for (const [mode, p] of profiles) process.stdout.write(`\n${profileText(mode, p)}\n`);

  writeRawFigures(RESULTS, 'proxy', started, {
    env,
    options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, modes: MODES_RUN, tokens: COUNT, koaCache: KOA_CACHE, variants: VARIANTS, settingsTokens: SETTINGS_TOKENS, path: PATH, cases: CASES },
    rows, targets: targetList, ratios: cells, addedCpuUsPerReq: added, runs, profiles: profiles === undefined ? undefined : Object.fromEntries(profiles),
  });
  updateReport(NAME, REPORT, generated, {
    noReport: opt.noReport,
    failure: errors > 0
      ? `${errors} request(s) were not answered 2xx (${rows.filter((r) => r.non2xx + r.socketErrors > 0).map((r) => `${caseLabel(r)}: ${r.non2xx} non-2xx, ${r.socketErrors} socket errors`).join('; ')})`
      : undefined,
  });
}

runBench({ name: NAME, slug: 'proxy', budgetMs: BUDGET_MS, tools: ['wrk'], runtime: opt.runtime }, main);
