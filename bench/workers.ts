/**
 * Workers: whether two gateway workers (WORKERS=2, node:cluster, state in Redis) serve about
 * twice one worker's load where the machine allows. Results: a table on stdout,
 * bench/reports/workers.md (method and findings: "Workers: one vs two" in bench/README.md),
 * and bench/results/workers-<time>.json.
 *
 *   npm run bench:workers [-- --rounds 5 --seconds 5 --warmup 2 --connections 64 --tokens 5000
 *                             --rate-limits --quiet-wait 120 --runtime dist|tsx --no-report]
 *
 * The load generator needs a core too, and this machine may have only two, so three
 * configurations of the same gateway (src/ built as for bench:proxy, REDIS_URL and one Ed25519
 * key, which WORKERS above 1 requires; rate limits off unless --rate-limits) run in turn:
 * - `1 worker, own core`: WORKERS=1 on core 1, wrk, the backend and redis-server on core 0, as
 *   bench:proxy measures: what one worker serves with a core to itself;
 * - `1 worker, all cores` and `2 workers, all cores`: the gateway, wrk, the backend and
 *   redis-server all free to run on every core, as on a small host serving its own clients.
 * Besides throughput it reports CPU per request of each part (the gateway's primary and
 * workers summed), and requests per gateway CPU-second: if two workers do as much per
 * CPU-second as one, they serve twice one's load wherever two cores are free for them. What
 * they would serve on the cores left over by the client side is computed from that, and the
 * measured two-worker throughput set against it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { REPORTS, RESULTS, runEnv, startGateway, type Gateway, type Runtime } from './lib/gateway.js';
import { ALL_CORES, childPids, CLIENT_CORE, nproc, PIN, processCpuSeconds, Quiet, repin, sampleLoad, SERVER_CORE, stolenCores } from './lib/machine.js';
import { isRunning } from './lib/processes.js';
import { startRedis, type RedisServer } from './lib/redis.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { packageVersion, startNodeServer, type Server } from './lib/servers.js';
import { otherLoadLine, pairedRatio, perRound, ratioLine, roundsTable as roundsTableOf, spread, stolenLine, type Ratio } from './lib/summary.js';
import { makeSigningKey, mintToken, TokenSupply, type SigningKey } from './lib/tokens.js';
import { bearerRun, runWrk, socketErrors } from './lib/wrk.js';

const NAME = 'bench:workers';
const REPORT: Report = { file: join(REPORTS, 'workers.md'), title: 'Workers: one vs two', script: `npm run ${NAME}` };
const PATH = '/bench/items/42';
const ACCOUNTS = 100;
/** --rate-limits: the default's two windows, out of reach (as bench:limits): one counter call to Redis per request, never a 429. */
const RULES = JSON.stringify([{ perAccount: [{ limit: 1_000_000_000, seconds: 1 }, { limit: 1_000_000_000, seconds: 60 }] }]);

type Config = 'w1-own' | 'w1-all' | 'w2-all';
const CONFIGS: Config[] = ['w1-own', 'w1-all', 'w2-all'];
const LABEL: Record<Config, string> = { 'w1-own': '1 worker, own core', 'w1-all': '1 worker, all cores', 'w2-all': '2 workers, all cores' };
const WORKERS: Record<Config, number> = { 'w1-own': 1, 'w1-all': 1, 'w2-all': 2 };
/** Where the gateway runs, and where the client side (wrk, backend, redis-server) does. */
const CORES: Record<Config, { gateway: string; client: string }> = {
  'w1-own': { gateway: SERVER_CORE, client: CLIENT_CORE },
  'w1-all': { gateway: ALL_CORES, client: ALL_CORES },
  'w2-all': { gateway: ALL_CORES, client: ALL_CORES },
};

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 5, connections: 64 }, {
  tokens: { type: 'string', default: '5000' },
  'rate-limits': { type: 'boolean', default: false },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
const TOKENS = boundedInt(NAME, 'tokens', opt.extra.tokens as string, 1, 100_000);
const RATE_LIMITS = opt.extra['rate-limits'] === true;
const BUDGET_MS = (180 + QUIET_WAIT + CONFIGS.length * (WARMUP + 3 + ROUNDS * (SECONDS + 3))) * 2 * 1000;
const quiet = new Quiet(QUIET_WAIT);

// ---------------------------------------------------------------------------------------------
// Servers

interface Cluster {
  config: Config;
  gw: Gateway;
  /** The workers' pids (none apart from the primary with WORKERS=1). */
  workers: number[];
}

async function startCluster(config: Config, runtime: Runtime, keys: SigningKey, backendUrl: string, redis: RedisServer): Promise<Cluster> {
  const n = WORKERS[config];
  const gw = await startGateway({
    name: config, runtime, core: CORES[config].gateway, stdout: 'ignore',
    settings: {
      LOG_LEVEL: 'info',
      WORKERS: String(n),
      REDIS_URL: redis.url,
      SIGNING_KEYS: keys.signingKeys,
      ROUTES: JSON.stringify([{ prefix: '/bench', targets: [backendUrl] }]),
      ...(RATE_LIMITS ? { RATE_LIMITS: 'enforce', RATE_LIMIT_RULES: RULES } : { RATE_LIMITS: 'off' }),
    },
  });
  // /readyz answers as soon as one worker listens: wait for the others.
  const deadline = Date.now() + 20_000;
  let workers = n > 1 ? childPids(gw.pid) : [];
  while (workers.length < (n > 1 ? n : 0)) {
    if (!isRunning(gw.proc) || Date.now() > deadline) throw new Error(`${LABEL[config]}: ${workers.length} of ${n} workers after 20 s:\n${gw.err.tail()}`);
    await sleep(100);
    workers = childPids(gw.pid);
  }
  if (n > 1) await sleep(1000);
  return { config, gw, workers };
}

/** 200 with the backend's answer for a valid token; 401 without one and for a token of another key. */
async function sanityCheck(c: Cluster, token: string, foreign: string): Promise<void> {
  const get = async (authorization?: string) => {
    const res = await fetch(`${c.gw.url}${PATH}`, { headers: authorization === undefined ? {} : { authorization } });
    return { status: res.status, body: await res.text() };
  };
  const ok = await get(`Bearer ${token}`);
  let from: unknown;
  try { from = (JSON.parse(ok.body) as { from?: unknown }).from; } catch { /* checked below */ }
  if (ok.status !== 200 || from !== 'bench-backend') throw new Error(`${LABEL[c.config]}: a valid token answered ${ok.status}: ${ok.body.slice(0, 300)}`);
  for (const [what, authorization] of [['without a token', undefined], ['with a token of another key', `Bearer ${foreign}`]] as const) {
    const r = await get(authorization);
    if (r.status !== 401) throw new Error(`${LABEL[c.config]}: ${what} answered ${r.status}, not 401: ${r.body.slice(0, 300)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Load

interface Run {
  config: Config;
  round: number;
  requests: number;
  non2xx: number;
  socketErrors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Cores' worth of CPU over the run: the gateway (primary and workers), each worker, wrk and this script, the backend, redis-server, the whole machine. */
  gatewayCores: number;
  workerCores: number[];
  clientCores: number;
  backendCores: number;
  redisCores: number;
  machineCores: number;
  /** The same per request, µs. */
  gatewayUsPerReq: number;
  clientSideUsPerReq: number;
  /** Requests per CPU-second of the gateway. */
  perGatewayCpuSecond: number;
  foreignCores: number;
  stolenCores: number;
  attempts?: number;
}

interface Context {
  clusters: Map<Config, Cluster>;
  backend: Server;
  redis: RedisServer;
  tokens: TokenSupply;
}

async function measure(ctx: Context, config: Config, seconds: number, round: number): Promise<Run> {
  const c = ctx.clusters.get(config)!;
  const { client } = CORES[config];
  repin(ctx.backend.pid, client);
  repin(ctx.redis.proc.pid!, client);
  const file = await ctx.tokens.fileFor(seconds);
  await quiet.wait(LABEL[config]);
  const cpu = () => ({
    primary: processCpuSeconds(c.gw.pid),
    workers: c.workers.map((pid) => processCpuSeconds(pid)),
    backend: processCpuSeconds(ctx.backend.pid),
    redis: processCpuSeconds(ctx.redis.proc.pid!),
  });
  const a = cpu();
  const loadA = sampleLoad();
  const w = await runWrk({ ...bearerRun(c.gw.url, PATH, file, CONNECTIONS, seconds), core: client });
  const loadB = sampleLoad();
  const b = cpu();
  if (!isRunning(c.gw.proc) || c.workers.some((pid) => processCpuSeconds(pid) === 0)) throw new Error(`${LABEL[config]}: the gateway or a worker died during the run:\n${c.gw.err.tail()}`);
  const elapsed = w.duration_us / 1e6;
  const workers = b.workers.map((x, i) => x - a.workers[i]!);
  const gateway = b.primary - a.primary + workers.reduce((s, x) => s + x, 0);
  const self = loadB.self - loadA.self;
  const backend = b.backend - a.backend;
  const redis = b.redis - a.redis;
  const machine = loadB.machine - loadA.machine;
  // sampleLoad counts the tracked processes (the primaries, backend, redis-server), not the workers.
  const foreign = Math.max(0, (machine - self - (loadB.children - loadA.children) - workers.reduce((s, x) => s + x, 0)) / elapsed);
  const requests = Math.max(w.requests, 1);
  return {
    config, round,
    requests: w.requests, non2xx: w.bad, socketErrors: socketErrors(w),
    rps: w.ok / elapsed, p50Ms: w.p50_us / 1000, p99Ms: w.p99_us / 1000,
    gatewayCores: gateway / elapsed, workerCores: workers.map((x) => x / elapsed),
    clientCores: self / elapsed, backendCores: backend / elapsed, redisCores: redis / elapsed, machineCores: machine / elapsed,
    gatewayUsPerReq: (gateway * 1e6) / requests,
    clientSideUsPerReq: ((self + backend + redis) * 1e6) / requests,
    perGatewayCpuSecond: gateway > 0 ? w.requests / gateway : 0,
    foreignCores: foreign, stolenCores: stolenCores(loadA, loadB),
  };
}

function runLine(r: Run): string {
  return `${LABEL[r.config].padEnd(21)} ${fmt(r.rps).padStart(6)} req/s  p50 ${fmt(r.p50Ms, 2)} ms  p99 ${fmt(r.p99Ms, 2)} ms`
    + `  gateway ${fmt(r.gatewayUsPerReq)} µs/req on ${fmt(r.gatewayCores, 2)} cores${r.workerCores.length > 0 ? ` (workers ${r.workerCores.map((x) => fmt(x, 2)).join(' + ')})` : ''}`
    + `  ${fmt(r.perGatewayCpuSecond)} req per gateway CPU-s  client side ${fmt(r.clientSideUsPerReq)} µs/req (wrk ${fmt(r.clientCores, 2)}, backend ${fmt(r.backendCores, 2)}, redis ${fmt(r.redisCores, 2)} cores)`
    + `  machine ${fmt(r.machineCores, 2)} cores  other load ${fmt(r.foreignCores, 2)}${r.non2xx + r.socketErrors > 0 ? `  ERRORS: ${r.non2xx} non-2xx, ${r.socketErrors} socket` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// Report

/**
 * What two workers would serve on the cores the rest leaves them, at one worker's pace: (cores
 * − what the client side, redis-server and other processes used in the two-worker run) × one
 * worker's requests per gateway CPU-second with a core to itself, in the same round.
 */
function ideal(two: Run, one: Run): number {
  const left = Math.min(nproc, 2) - (two.clientCores + two.backendCores + two.redisCores + two.foreignCores);
  return Math.max(0, left) * one.perGatewayCpuSecond;
}

function ratios(runs: Run[]): Ratio[] {
  const paired = (a: Config, b: Config, metric: (r: Run) => number) => pairedRatio(runs, ROUNDS, { config: a }, { config: b }, metric);
  const efficiency = spread(perRound(runs, ROUNDS, { config: 'w2-all' }, { config: 'w1-own' }, (two, one) => {
    const x = ideal(two, one);
    return x > 0 ? two.rps / x : undefined;
  }));
  const perCpu = paired('w2-all', 'w1-own', (r) => r.perGatewayCpuSecond);
  return [
    { name: '2 workers / 1 worker (all cores), throughput', ...paired('w2-all', 'w1-all', (r) => r.rps) },
    { name: '2 workers (all cores) / 1 worker (own core), throughput', ...paired('w2-all', 'w1-own', (r) => r.rps) },
    { name: '2 workers (all cores) / 1 worker (own core), requests per gateway CPU-second', ...perCpu, target: { text: '≥ 0.9× (a second worker does as much per CPU-second: twice the load on twice the cores)', met: perCpu.median >= 0.9 } },
    { name: '2 workers / what two workers at one worker\'s pace would serve on the cores the client side left them', ...efficiency, target: { text: '≥ 0.9×', met: efficiency.median >= 0.9 } },
    { name: '2 workers / 1 worker (all cores), gateway CPU per request', ...paired('w2-all', 'w1-all', (r) => r.gatewayUsPerReq) },
    { name: '2 workers / 1 worker (all cores), p99 latency', ...paired('w2-all', 'w1-all', (r) => r.p99Ms) },
  ];
}

function resultsTable(runs: Run[]): string {
  const m = (rs: Run[], f: (r: Run) => number, digits = 0) => fmt(median(rs.map(f)), digits);
  const lines = [
    '| configuration | req/s (median) | range over rounds | p50 ms | p99 ms | gateway CPU µs/req | gateway cores | per worker | req per gateway CPU-s | client side µs/req (wrk + backend + redis) | wrk cores | backend cores | redis cores | machine cores busy | other load | non-2xx / socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const config of CONFIGS) {
    const rs = runs.filter((r) => r.config === config);
    const rps = rs.map((r) => r.rps);
    const perWorker = WORKERS[config] > 1 ? Array.from({ length: WORKERS[config] }, (_, i) => m(rs, (r) => r.workerCores[i] ?? NaN, 2)).join(' + ') : '—';
    lines.push(`| ${LABEL[config]} | ${m(rs, (r) => r.rps)} | ${fmt(Math.min(...rps))}–${fmt(Math.max(...rps))} | ${m(rs, (r) => r.p50Ms, 2)} | ${m(rs, (r) => r.p99Ms, 2)} | ${m(rs, (r) => r.gatewayUsPerReq)} | ${m(rs, (r) => r.gatewayCores, 2)} | ${perWorker} | ${m(rs, (r) => r.perGatewayCpuSecond)} | ${m(rs, (r) => r.clientSideUsPerReq)} | ${m(rs, (r) => r.clientCores, 2)} | ${m(rs, (r) => r.backendCores, 2)} | ${m(rs, (r) => r.redisCores, 2)} | ${m(rs, (r) => r.machineCores, 2)} | ${m(rs, (r) => r.foreignCores, 2)} | ${rs.reduce((s, r) => s + r.non2xx, 0)} / ${rs.reduce((s, r) => s + r.socketErrors, 0)} of ${rs.reduce((s, r) => s + r.requests, 0)} |`);
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Main

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  if (nproc < 2 || !PIN) throw new Error(`${NAME} needs 2+ cores and taskset (this machine: ${nproc} core(s)${PIN ? '' : ', no taskset'})`);
  const keys = makeSigningKey();
  const foreign = mintToken(makeSigningKey().privateKey, 0, ACCOUNTS);
  const redis = await startRedis(tmp);
  const backend = await startNodeServer('backend', 'backend.ts', CLIENT_CORE, {}, { readyPath: PATH, readyStatus: 200 });
  const clusters = new Map<Config, Cluster>();
  for (const config of CONFIGS) clusters.set(config, await startCluster(config, runtime, keys, backend.url, redis));
  // Minted once the gateways run: they refuse access tokens issued before they started.
  const tokens = await TokenSupply.mint(NAME, keys.privateKey, tmp, TOKENS, ACCOUNTS);
  const token = readFileSync(tokens.file, 'utf8').split('\n')[0]!;
  for (const c of clusters.values()) await sanityCheck(c, token, foreign);
  const ctx: Context = { clusters, backend, redis, tokens };

  const env = { ...runEnv(started, source, runtime), redis: redis.version, ioredis: packageVersion('ioredis') };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; redis ${env.redis}; runtime ${runtime.mode}; gateway src/ at ${source}`);
  log(`${NAME}: ${CONFIGS.map((c) => LABEL[c]).join(', ')}; ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections; rate limits ${RATE_LIMITS ? 'on (Redis)' : 'off'}`);

  const runs = await rotatedRounds({
    targets: CONFIGS, rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, quiet, label: (c) => LABEL[c], line: runLine,
    measure: (config, seconds, round) => measure(ctx, config, seconds, round),
  });

  const ratioList = ratios(runs);
  const table = resultsTable(runs);
  const rounds = roundsTableOf(runs, ROUNDS, ['configuration'], CONFIGS.map((config) => ({ labels: [LABEL[config]], match: { config } })), (r) => r.rps);
  const errors = runs.reduce((s, r) => s + r.non2xx + r.socketErrors, 0);
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}, redis-server ${env.redis}`,
    `- gateway: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, LOG_LEVEL=info (stdout to /dev/null), one Ed25519 signing key, \`REDIS_URL\` to a redis-server of the run (\`--save '' --appendonly no\`), \`ROUTES=[{"prefix":"/bench","targets":["http://127.0.0.1:<backend>"]}]\`, ${RATE_LIMITS ? `\`RATE_LIMITS=enforce\`, \`RATE_LIMIT_RULES=${RULES}\` (one counter call to Redis per request, never a 429)` : '`RATE_LIMITS=off`'}, \`WORKERS\` 1 or 2, every other setting at its default`,
    `- configurations: \`${LABEL['w1-own']}\`: the gateway on core ${SERVER_CORE}, wrk, the backend and redis-server on core ${CLIENT_CORE}; \`${LABEL['w1-all']}\` and \`${LABEL['w2-all']}\`: everything free to run on cores ${ALL_CORES} (\`taskset -c ${ALL_CORES}\`; the backend and redis-server moved with \`taskset -p\` before each run); this script on core ${CLIENT_CORE}`,
    `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, \`GET ${PATH}\`, ${TOKENS} distinct EdDSA tokens (${ACCOUNTS} accounts) each reused in turn; ${ROUNDS} rounds × ${SECONDS} s per configuration after a ${WARMUP} s warm-up, the order rotated each round`,
    stolenLine(runs),
    otherLoadLine(runs, QUIET_WAIT, 'run'),
    '',
    table,
    '',
    'Ratios (median of the per-round ratios, range over rounds):',
    '',
    ...ratioList.map(ratioLine),
    '',
    'req/s per round:',
    '',
    rounds,
  ].join('\n');
  process.stdout.write(`\n${table}\n\n${ratioList.map(ratioLine).join('\n')}\n\nreq/s per round:\n${rounds}\n`);
  writeRawFigures(RESULTS, 'workers', started, { env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, tokens: TOKENS, rateLimits: RATE_LIMITS }, ratios: ratioList, runs });
  updateReport(NAME, REPORT, generated, {
    noReport: opt.noReport,
    failure: errors > 0 ? `${errors} request(s) were not answered 2xx` : undefined,
  });
}

runBench({ name: NAME, slug: 'workers', budgetMs: BUDGET_MS, tools: ['wrk', 'redis-server'], runtime: opt.runtime }, main);
