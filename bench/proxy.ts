/**
 * Proxy throughput: the gateway's authenticated, proxied route under load, next to the same
 * load on the backend alone, on the floor of the gateway's stack, and on a Fastify peer.
 * Results: a table on stdout, bench/reports/proxy.md (method and findings: "Proxy: gateway vs
 * floor vs Fastify" in bench/README.md), and bench/results/proxy-<time>.json.
 *
 *   npm run bench [-- --rounds 5 --seconds 5 --warmup 2 --connections 64 --tokens 20000
 *                     --quiet-wait 120 --runtime dist|tsx --profile --no-warn-variant --no-report]
 *
 * What runs (everything on 127.0.0.1, every process started here is stopped here):
 * - `direct`: bench/servers/backend.ts, node:http answering ~100 bytes of JSON;
 * - `floor`: bench/servers/floor.ts, a bare http-proxy-3 server that verifies the bearer token
 *   with jose as the gateway does and proxies over a keep-alive agent: what this stack costs
 *   at the least;
 * - `fastify`: bench/servers/fastify.ts, fastify + @fastify/jwt + @fastify/http-proxy;
 * - `gateway`: the product, built from src/, with one route `/bench` to the backend (a bearer
 *   token required, the default) and LOG_LEVEL=info, its production default, the log going
 *   to /dev/null; `gateway (log warn)` is the same with LOG_LEVEL=warn (what the access log costs);
 * - `gateway (settings token)`: the same gateway, called with API settings tokens (`gwst_…`,
 *   --settings-tokens of them, one per account, written into its data file) instead of JWT
 *   access tokens: the product's aim is that they cost no more than a JWT.
 * The proxies share one backend instance; `direct` gets its own instance of the same server,
 * on the core the servers under test use. With two or more cores the server under test is
 * pinned to core 1, and wrk, the proxies' backend and this script to core 0.
 *
 * Every request carries a different valid token (--tokens distinct ones, made once the servers
 * run by jose's SignJWT exactly as the gateway signs, cycled by bench/wrk/bearer.lua), so no
 * cache of verified tokens can flatter a server. Rounds run every server once, the order
 * rotated by one each round; figures are medians over rounds, ratios medians of the per-round
 * ratios.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatProfileSummary, type ProfileSummary } from './cpuprofile.js';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { REPORTS, RESULTS, runEnv, startGateway, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, nproc, PIN, Quiet, SERVER_CORE } from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { profileClockUs, readProfile, summarizeWindow } from './lib/profile.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { gatewayServer, packageVersion, startNodeServer as startBenchServer, type Server } from './lib/servers.js';
import {
  loadReportLines, loadReportText, loadRow, otherLoadLine, pairedRatio, perRound, ratioLine, roundsTable as roundsTableOf, stolenLine,
  type LoadReport, type LoadRow, type Ratio,
} from './lib/summary.js';
import { makeSigningKey, mintToken, TokenSupply, type SigningKey } from './lib/tokens.js';
import { bearerRun, measureLoad, type LoadFigures } from './lib/wrk.js';
import { mintSettingsToken, settingsTokenDigest, settingsTokenStart } from '../src/domain/settings-token.js';

const NAME = 'bench';
const REPORT: Report = { file: join(REPORTS, 'proxy.md'), title: 'Proxy: gateway vs floor vs Fastify', script: `npm run ${NAME}` };
/** What every client asks every server for: under the gateway's route prefix, as it reaches the backend. */
const PATH = '/bench/items/42';

type Target = 'direct' | 'floor' | 'fastify' | 'gateway' | 'gateway-warn' | 'gateway-st';
const LABEL: Record<Target, string> = {
  direct: 'direct', floor: 'floor', fastify: 'fastify', gateway: 'gateway', 'gateway-warn': 'gateway (log warn)', 'gateway-st': 'gateway (settings token)',
};

// ---------------------------------------------------------------------------------------------
// Options

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 5, connections: 64 }, {
  tokens: { type: 'string', default: '20000' },
  'no-warn-variant': { type: 'boolean', default: false },
  'settings-tokens': { type: 'string', default: '100' },
  'no-settings-variant': { type: 'boolean', default: false },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
const TOKENS = boundedInt(NAME, 'tokens', opt.extra.tokens as string, 100, 200_000);
const SETTINGS_TOKENS = boundedInt(NAME, 'settings-tokens', opt.extra['settings-tokens'] as string, 1, 10_000);
const TARGETS: Target[] = [
  'direct', 'floor', 'fastify', 'gateway',
  ...(opt.extra['no-warn-variant'] === true ? [] : ['gateway-warn' as const]),
  ...(opt.extra['no-settings-variant'] === true ? [] : ['gateway-st' as const]),
];
/** Hard bound on the whole run, whatever happens. */
const BUDGET_MS = (120 + QUIET_WAIT + TARGETS.length * (WARMUP + 3 + ROUNDS * (SECONDS + 3)) + (opt.profile ? WARMUP + SECONDS + 30 : 0)) * 2 * 1000;

const quiet = new Quiet(QUIET_WAIT);

// ---------------------------------------------------------------------------------------------
// Servers

/** One of bench/servers/*.ts (label: a target's, or "backend"), ready when it answers PATH. */
function startNodeServer(label: string, file: string, core: string, env: Record<string, string>): Promise<Server> {
  // The proxies answer 401 to a request without a token as soon as they listen.
  return startBenchServer(label, file, core, env, { readyPath: PATH, readyStatus: file === 'backend.ts' ? 200 : 401 });
}

function gatewaySettings(keys: SigningKey, backendUrl: string, level: 'info' | 'warn', dataFile: string): Record<string, string> {
  return {
    LOG_LEVEL: level,
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

async function startTarget(target: Target, runtime: Runtime, keys: SigningKey, backendUrl: string, dataFile: string, nodeFlags: string[] = []): Promise<Server> {
  const proxyEnv = { BACKEND: backendUrl, PUBLIC_KEY: keys.publicPem };
  switch (target) {
    case 'direct': return startNodeServer(LABEL[target], 'backend.ts', SERVER_CORE, {});
    case 'floor': return startNodeServer(LABEL[target], 'floor.ts', SERVER_CORE, proxyEnv);
    case 'fastify': return startNodeServer(LABEL[target], 'fastify.ts', SERVER_CORE, proxyEnv);
    case 'gateway':
    case 'gateway-st':
    case 'gateway-warn': {
      const level = target === 'gateway-warn' ? 'warn' : 'info';
      // Under info the log is one JSON line per request: to /dev/null, so that reading it here
      // does not load the client core. Under warn it should stay empty, so it is kept and checked.
      const gw = await startGateway({ name: target, runtime, settings: gatewaySettings(keys, backendUrl, level, dataFile), nodeFlags, stdout: level === 'info' ? 'ignore' : 'pipe' });
      return gatewayServer(LABEL[target], gw);
    }
  }
}

/** 200 with the backend's answer for a valid token; 401 without one, and for a token of another key. */
async function sanityCheck(target: Target, server: Server, tokensFile: string, foreignToken: string): Promise<void> {
  const token = readFileSync(tokensFile, 'utf8').slice(0, 4096).split('\n')[0]!;
  const get = async (authorization?: string) => {
    const res = await fetch(`${server.url}${PATH}`, { headers: authorization === undefined ? {} : { authorization } });
    return { status: res.status, body: await res.text() };
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
  if (target === 'direct') return;
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
  round: number;
  /** The proxies' backend, per request (idle for `direct`). */
  backendCpuUsPerReq: number;
}

interface Context {
  backend: Server;
  tokens: TokenSupply;
  /** API settings tokens, for `gateway-st` (they do not expire). */
  settingsTokensFile: string;
  dataFile: string;
}

async function measure(ctx: Context, target: Target, server: Server, seconds: number, round: number): Promise<Run> {
  const tokensFile = target === 'gateway-st' ? ctx.settingsTokensFile : await ctx.tokens.fileFor(seconds);
  await quiet.wait(server.label);
  const figures = await measureLoad(bearerRun(server.url, PATH, tokensFile, CONNECTIONS, seconds), { server: server.pid, backend: ctx.backend.pid });
  if (!isRunning(server.proc)) throw new Error(`${server.label} died during the run:\n${server.err.tail()}`);
  if (!isRunning(ctx.backend.proc)) throw new Error(`the backend died during the run:\n${ctx.backend.err.tail()}`);
  return { target, round, ...figures };
}

function runLine(run: Run): string {
  return `${LABEL[run.target].padEnd(18)} ${fmt(run.rps).padStart(6)} req/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
    + `  server ${fmt(run.serverCpuUsPerReq)} µs/req (core ${fmt(100 * run.serverCoreUse)} %)  backend ${fmt(run.backendCpuUsPerReq)} µs/req  wrk ${fmt(run.clientCpuUsPerReq)} µs/req`
    + `  client core ${fmt(100 * run.clientCoreUse)} %  other load ${fmt(run.foreignCores, 2)}  steal ${fmt(run.stolenCores, 2)}`
    + `${run.non2xx + run.socketErrors > 0 ? `  ERRORS: ${run.non2xx} non-2xx, ${run.socketErrors} socket` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// Profile (--profile): one more gateway under --cpu-prof, after the measured rounds

async function profileGateway(ctx: Context, tmp: string, runtime: Runtime, keys: SigningKey): Promise<ProfileSummary> {
  const dir = join(tmp, 'prof-gateway');
  mkdirSync(dir, { recursive: true });
  const gw = await startTarget('gateway', runtime, keys, ctx.backend.url, ctx.dataFile, ['--cpu-prof', '--cpu-prof-dir', dir]);
  let window: [number, number];
  try {
    // A new gateway: it refuses the tokens minted before it started.
    await ctx.tokens.renew();
    if (WARMUP > 0) await measure(ctx, 'gateway', gw, WARMUP, -1);
    const from = profileClockUs();
    const run = await measure(ctx, 'gateway', gw, SECONDS, -1);
    window = [from, profileClockUs()];
    log(`profile run: ${runLine(run)}`);
  } finally {
    // Writing the profile at exit takes a while for a busy process.
    await stopChild(gw.proc, 15_000);
  }
  const profile = readProfile(dir, join(RESULTS, 'proxy-gateway.cpuprofile'));
  return summarizeWindow(profile, window, 'the gateway');
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

type Row = { target: Target } & LoadRow;

function summarize(runs: Run[]): Row[] {
  return TARGETS.map((target) => ({ target, ...loadRow(runs.filter((r) => r.target === target), { backend: true }) }));
}

function ratios(runs: Run[]): Ratio[] {
  const paired = (a: Target, b: Target, metric: (r: Run) => number) => pairedRatio(runs, ROUNDS, { target: a }, { target: b }, metric);
  const rps = (r: Run) => r.rps;
  const p99 = (r: Run) => r.p99Ms;
  const cpu = (r: Run) => r.serverCpuUsPerReq;
  const list: Ratio[] = [];
  const throughput = paired('gateway', 'floor', rps);
  list.push({ name: 'gateway / floor, throughput', ...throughput, target: { text: '≥ 1.0×', met: throughput.median >= 1 } });
  const tail = paired('gateway', 'floor', p99);
  list.push({ name: 'gateway / floor, p99 latency', ...tail, target: { text: '≤ 1.2×', met: tail.median <= 1.2 } });
  list.push({ name: 'gateway / floor, CPU per request', ...paired('gateway', 'floor', cpu) });
  const peer = paired('gateway', 'fastify', rps);
  list.push({ name: 'gateway / fastify, throughput', ...peer, target: { text: '> 1× (stretch)', met: peer.median > 1 } });
  list.push({ name: 'gateway / fastify, p99 latency', ...paired('gateway', 'fastify', p99) });
  list.push({ name: 'floor / direct, throughput', ...paired('floor', 'direct', rps) });
  if (TARGETS.includes('gateway-warn')) {
    list.push({ name: 'gateway (log warn) / floor, throughput', ...paired('gateway-warn', 'floor', rps) });
    list.push({ name: 'gateway / gateway (log warn), throughput', ...paired('gateway', 'gateway-warn', rps) });
  }
  if (TARGETS.includes('gateway-st')) {
    const st = paired('gateway-st', 'gateway', rps);
    list.push({ name: 'gateway (settings token) / gateway (JWT), throughput', ...st, target: { text: '≥ 1.0× (no slower)', met: st.median >= 1 } });
    list.push({ name: 'gateway (settings token) / gateway (JWT), p99 latency', ...paired('gateway-st', 'gateway', p99) });
    list.push({ name: 'gateway (settings token) / gateway (JWT), CPU per request', ...paired('gateway-st', 'gateway', cpu) });
  }
  return list;
}

/** Median over rounds of the gateway's CPU per request minus the floor's: what the product adds, in µs. */
function addedCpu(runs: Run[]): number {
  return median(perRound(runs, ROUNDS, { target: 'gateway' }, { target: 'floor' }, (g, f) => g.serverCpuUsPerReq - f.serverCpuUsPerReq));
}

function resultsTable(rows: Row[]): string {
  const lines = [
    '| server | req/s (median) | range over rounds | p50 ms | p99 ms | server CPU µs/req | server core use | backend CPU µs/req | wrk CPU µs/req | client core use | other load (cores) | non-2xx / socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const backend = r.target === 'direct' ? '—' : fmt(r.backendCpuUsPerReq);
    lines.push(`| ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.rpsRange[0])}–${fmt(r.rpsRange[1])} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.serverCpuUsPerReq)} | ${fmt(100 * r.serverCoreUse)} % | ${backend} | ${fmt(r.clientCpuUsPerReq)} | ${fmt(100 * r.clientCoreUse)} % | ${fmt(r.foreignCores, 2)} | ${r.non2xx} / ${r.socketErrors} of ${r.requests} |`);
  }
  return lines.join('\n');
}

function roundsTable(runs: Run[]): string {
  return roundsTableOf(runs, ROUNDS, ['server'], TARGETS.map((target) => ({ labels: [LABEL[target]], match: { target } })), (r) => r.rps);
}

// ---------------------------------------------------------------------------------------------
// Main

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const keys = makeSigningKey();
  const foreignToken = await mintToken(makeSigningKey().privateKey, 0, 100);
  const backend = await startNodeServer('backend', 'backend.ts', CLIENT_CORE, {});
  const { dataFile, tokensFile: settingsTokensFile } = writeSettingsTokens(tmp, SETTINGS_TOKENS);
  const servers = new Map<Target, Server>();
  for (const target of TARGETS) servers.set(target, await startTarget(target, runtime, keys, backend.url, dataFile));
  // Minted once the gateways run: a gateway refuses access tokens issued before it started
  // (src/stores/revocation.memory.ts).
  const tokens = await TokenSupply.mint(NAME, keys.privateKey, tmp, TOKENS, 100);
  const ctx: Context = { backend, tokens, settingsTokensFile, dataFile };
  for (const [target, server] of servers) await sanityCheck(target, server, target === 'gateway-st' ? settingsTokensFile : tokens.file, foreignToken);

  const env = {
    ...runEnv(started, source, runtime),
    packages: Object.fromEntries(['http-proxy-3', 'jose', 'fastify', '@fastify/http-proxy', '@fastify/reply-from', '@fastify/jwt', 'fast-jwt', 'undici'].map((p) => [p, packageVersion(p, ['@fastify/jwt'])])),
    pinning: PIN
      ? `server under test on core ${SERVER_CORE} (\`taskset -c ${SERVER_CORE}\`, all its threads); wrk, the proxies' backend and this script on core ${CLIENT_CORE}`
      : 'none (needs taskset and 2+ cores)',
  };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; runtime ${runtime.mode}; gateway src/ at ${source}`);
  log(`${NAME}: ${TARGETS.map((t) => LABEL[t]).join(', ')}; ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections; pinning: ${env.pinning}`);
  log(`${NAME}: sanity checks passed (200 through every server with a valid token; 401 without one and with another key's)`);

  const runs = await rotatedRounds({
    targets: TARGETS, rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, quiet, label: (t) => LABEL[t], line: runLine,
    measure: (target, seconds, round) => measure(ctx, target, servers.get(target)!, seconds, round),
  });
  const warnLines = servers.get('gateway-warn')?.out.lines.length ?? 0;
  const stderrLines = [...servers.values(), ctx.backend].map((s) => ({ label: s.label, lines: s.err.lines.length, tail: s.err.tail(5) })).filter((s) => s.lines > 0);
  for (const server of servers.values()) await stopChild(server.proc);

  let profile: ProfileSummary | undefined;
  if (opt.profile) {
    log(`profile: the gateway (LOG_LEVEL=info) under --cpu-prof, ${SECONDS} s after a ${WARMUP} s warm-up`);
    profile = await profileGateway(ctx, tmp, runtime, keys);
  }

  const rows = summarize(runs);
  const ratioList = ratios(runs);
  const errors = rows.reduce((a, r) => a + r.non2xx + r.socketErrors, 0);
  const report: LoadReport = { table: resultsTable(rows), ratios: ratioList.map(ratioLine), rounds: roundsTable(runs) };
  const generated = [
    runHeading(env.date, 'bench'),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}`,
    `- gateway: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, one Ed25519 signing key, \`ROUTES=[{"prefix":"/bench","targets":["http://127.0.0.1:<backend>"]}]\` (bearer token required, every other route setting at its default); \`gateway\`: LOG_LEVEL=info (the default; one access-log line per request, stdout to /dev/null); \`gateway (log warn)\`: LOG_LEVEL=warn${TARGETS.includes('gateway-st') ? `; \`gateway (settings token)\`: the \`gateway\` settings, called with ${SETTINGS_TOKENS} API settings tokens (one per account, in the data file every gateway reads) cycled by bench/wrk/bearer.lua instead of JWTs` : ''}`,
    `- peers: floor = http-proxy-3 ${env.packages['http-proxy-3']} + jose ${env.packages.jose} on node:http, keep-alive agent; fastify = fastify ${env.packages.fastify} + @fastify/http-proxy ${env.packages['@fastify/http-proxy']} (@fastify/reply-from ${env.packages['@fastify/reply-from']}, undici ${env.packages.undici}) + @fastify/jwt ${env.packages['@fastify/jwt']} (fast-jwt ${env.packages['fast-jwt']}), no logger; all under plain \`node\`, NODE_ENV=production`,
    `- pinning: ${env.pinning}; \`direct\` is a second instance of the backend, on core ${SERVER_CORE} like the other servers under test`,
    `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, \`GET ${PATH}\`, each request with the next of ${TOKENS} distinct tokens (minted once the gateways run, as the gateway signs them); ${ROUNDS} rounds × ${SECONDS} s per server after a ${WARMUP} s warm-up, the order rotated by one server each round`,
    stolenLine(runs),
    otherLoadLine(runs, QUIET_WAIT, 'run'),
    '',
    ...loadReportLines({ ...report, ratios: [...report.ratios, `- gateway − floor, CPU per request: **${fmt(addedCpu(runs))} µs** (median of the per-round differences)`] }),
    '',
    TARGETS.includes('gateway-warn')
      ? (warnLines === 0 ? 'The gateway under LOG_LEVEL=warn logged nothing during the runs.' : `The gateway under LOG_LEVEL=warn logged ${warnLines} line(s) during the runs.`)
      : '',
    ...(stderrLines.length > 0 ? [`Lines on stderr: ${stderrLines.map((s) => `${s.label} ${s.lines}`).join(', ')}.`] : []),
    ...(profile !== undefined
      ? ['', `CPU profile (\`--profile\`: one more gateway, LOG_LEVEL=info, under \`node --cpu-prof\`, sampled over a ${SECONDS} s run after the warm-up; shares of the main thread's samples, idle excluded):`, '', formatProfileSummary('gateway, proxied GET with a bearer token', profile)]
      : []),
  ].join('\n');

  process.stdout.write(loadReportText({ ...report, ratios: [...report.ratios, `- gateway − floor, CPU per request: ${fmt(addedCpu(runs))} µs`] }));
  if (warnLines > 0) process.stdout.write(`\ngateway (log warn) logged ${warnLines} line(s), last:\n${servers.get('gateway-warn')!.out.tail(5)}\n`);
  for (const s of stderrLines) process.stdout.write(`\n${s.label} wrote ${s.lines} line(s) on stderr, last:\n${s.tail}\n`);
  if (profile !== undefined) process.stdout.write(`\n${formatProfileSummary('gateway, proxied GET with a bearer token', profile)}\n`);

  writeRawFigures(RESULTS, 'proxy', started, {
    env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, tokens: TOKENS, settingsTokens: SETTINGS_TOKENS, path: PATH, targets: TARGETS },
    rows, ratios: ratioList, addedCpuUsPerReq: addedCpu(runs), runs, profile,
  });
  updateReport(NAME, REPORT, generated, {
    noReport: opt.noReport,
    failure: errors > 0
      ? `${errors} request(s) were not answered 2xx (${rows.filter((r) => r.non2xx + r.socketErrors > 0).map((r) => `${LABEL[r.target]}: ${r.non2xx} non-2xx, ${r.socketErrors} socket errors`).join('; ')})`
      : undefined,
  });
}

runBench({ name: NAME, slug: 'proxy', budgetMs: BUDGET_MS, tools: ['wrk'], runtime: opt.runtime }, main);
