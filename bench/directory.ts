/**
 * The directory cache: warm-cache throughput of GET /api/roles and GET /api/sign next to a bare
 * Koa endpoint that runs the same bearer check and answers a constant body, and cold storms:
 * many callers at once asking for one key never asked before, counting the store calls each
 * storm costs (the aim: exactly one). Results: a table on stdout, bench/reports/directory.md
 * (method and findings: "Directory: warm cache and cold storms" in bench/README.md), and
 * bench/results/directory-<time>.json.
 *
 *   npm run bench:directory [-- --rounds 5 --seconds 3 --warmup 2 --connections 32 --storm 200
 *                               --storm-rounds 3 --delay-ms 50 --quiet-wait 120 --runtime dist|tsx
 *                               --profile --no-redis --no-report]
 *
 * What runs (everything on 127.0.0.1, every process started here is stopped here, also on
 * error and Ctrl-C):
 * - warm cache: the gateway (LOG_LEVEL=warn, the default embedded file store, one Ed25519
 *   signing key) and `koa`, bench/servers/koa-constant.ts: plain Koa running the gateway's own
 *   bearer check (its compiled modules, the same SIGNING_KEYS, so one token is valid on both)
 *   and answering the gateway's own body for each path, constant. One access token, from a
 *   sign-in with the demo key, on every request (bench/wrk/bearer.lua); wrk, closed loop.
 *   Rounds run both servers on each path, the order reversed every other round; figures are
 *   medians over rounds, ratios medians of the per-round ratios.
 * - cold storms: bench/servers/directory-upstream.ts, an HTTP upstream serving the demo data in
 *   the interface's representation after --delay-ms, counting the calls per path; per storm
 *   round a fresh gateway with directory.store=http in front of it (an empty cache), and for
 *   each of several keys (sign records, a missing record, pages of roles) --storm requests for
 *   that key sent at once over as many connections opened beforehand; the upstream's count
 *   before and after is what the storm cost. The same against directory.store=redis (a
 *   redis-server of its own, the demo data copied in by the product's directory import;
 *   `--no-redis` skips it), counted with MONITOR: Redis answers in well under a millisecond, so
 *   to keep the first read in flight while the callers arrive, Redis's clients are paused for
 *   --delay-ms (CLIENT PAUSE … ALL) just before each storm.
 * With two or more cores the gateways and `koa` are pinned to core 1, and wrk, the upstream,
 * redis-server and this script to core 0.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { dirname, join } from 'node:path';
import { formatProfileSummary, type ProfileSummary } from './cpuprofile.js';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { cleanEnv, REPORTS, RESULTS, ROOT, runEnv, startGateway, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, nproc, PIN, Quiet, SERVER_CORE } from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { profileClockUs, readProfile, summarizeWindow } from './lib/profile.js';
import { monitorWhile, startRedis, type RedisServer } from './lib/redis.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { runBench, type BenchRun } from './lib/run.js';
import { gatewayServer, packageVersion, startNodeServer, type Server } from './lib/servers.js';
import {
  loadReportLines, loadReportText, loadRow, otherLoadLine, pairedRatio, ratioLine, roundsTable as roundsTableOf, stolenLine,
  type LoadReport, type LoadRow, type Ratio,
} from './lib/summary.js';
import { makeSigningKey, type SigningKey } from './lib/tokens.js';
import { bearerRun, measureLoad, type LoadFigures } from './lib/wrk.js';

const NAME = 'bench:directory';
const REPORT: Report = { file: join(REPORTS, 'directory.md'), title: 'Directory: warm cache and cold storms', script: `npm run ${NAME}` };

const DATA_FILE = join(ROOT, 'config', 'demo-data.json');
const API_KEY = 'ak_demo_alice';
const API_SECRET_HASH = createHash('sha256').update('sk_demo_alice_secret').digest('hex');
const SIGNIN_BODY = JSON.stringify({ apiKey: API_KEY, apiSecret: API_SECRET_HASH });
/** The gateway refuses access tokens older than this (the default lifetime). */
const TOKEN_LIFETIME_S = 900;
/** The gateway's service credential at the upstream (directory.http.token). */
const UPSTREAM_TOKEN = 'bench-directory-upstream';
/** Directory commands in Redis: those naming a key of the directory's layout (src/state/redis/keys.ts). */
const DIRECTORY_KEY = /:(?:sign|roles|role):\{/;

type Target = 'gateway' | 'koa';
type Endpoint = 'roles' | 'sign';
type Store = 'http' | 'redis';
const TARGETS: Target[] = ['gateway', 'koa'];
const ENDPOINTS: Endpoint[] = ['roles', 'sign'];
const LABEL: Record<Target, string> = { gateway: 'gateway', koa: 'koa (constant)' };

// ---------------------------------------------------------------------------------------------
// Options

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 3, connections: 32 }, {
  storm: { type: 'string', default: '200' },
  'storm-rounds': { type: 'string', default: '' },
  'delay-ms': { type: 'string', default: '50' },
  'no-redis': { type: 'boolean', default: false },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
const STORM = boundedInt(NAME, 'storm', opt.extra.storm as string, 2, 1000);
const STORM_ROUNDS = opt.extra['storm-rounds'] === '' ? Math.min(ROUNDS, 3) : boundedInt(NAME, 'storm-rounds', opt.extra['storm-rounds'] as string, 1, 10);
const DELAY_MS = boundedInt(NAME, 'delay-ms', opt.extra['delay-ms'] as string, 0, 2000);
const WANT_REDIS = opt.extra['no-redis'] !== true;
/** Keys stormed per round and store (see stormKeys). */
const MAX_KEYS = 8;
/** Hard bound on the whole run, whatever happens. */
const BUDGET_MS = (120 + QUIET_WAIT + ENDPOINTS.length * TARGETS.length * (WARMUP + 3 + ROUNDS * (SECONDS + 3))
  + STORM_ROUNDS * 2 * (15 + MAX_KEYS * (5 + (2 * DELAY_MS) / 1000))
  + (opt.profile ? ENDPOINTS.length * (WARMUP + SECONDS) + 30 : 0)) * 2 * 1000;

const quiet = new Quiet(QUIET_WAIT);

// ---------------------------------------------------------------------------------------------
// The demo account

interface Demo {
  accountId: string;
  /** Its sign records' addresses, as the data file spells them. */
  addresses: string[];
  roles: number;
}

/** The account of the demo key, whose secret must still be the demo one (as bench/auth.ts checks). */
function readDemo(): Demo {
  const data = JSON.parse(readFileSync(DATA_FILE, 'utf8')) as {
    accounts: { id: string; apiKeys: { apiKey: string; secretDigest: string }[]; roles?: unknown[]; signRecords?: { address: string }[] }[];
  };
  const account = data.accounts.find((a) => a.apiKeys.some((k) => k.apiKey === API_KEY));
  const digest = `sha256:${createHash('sha256').update(Buffer.from(API_SECRET_HASH, 'hex')).digest('hex')}`;
  if (account === undefined || account.apiKeys.find((k) => k.apiKey === API_KEY)?.secretDigest !== digest) {
    throw new Error(`config/demo-data.json no longer holds ${API_KEY} with the demo secret`);
  }
  const addresses = (account.signRecords ?? []).map((s) => s.address);
  const roles = account.roles?.length ?? 0;
  if (addresses.length === 0 || roles < 2) throw new Error(`the demo account ${account.id} needs a sign record and two roles at least`);
  return { accountId: account.id, addresses, roles };
}

/** An address of 40 times `digit` that the demo account has no record for. */
function missingAddress(demo: Demo, digit: string): string {
  const address = `0x${digit.repeat(40)}`;
  if (demo.addresses.some((a) => a.toLowerCase() === address)) throw new Error(`the demo data holds ${address}; pick another missing address`);
  return address;
}

function warmPath(demo: Demo, endpoint: Endpoint): string {
  return endpoint === 'roles' ? '/api/roles?page=1&limit=10' : `/api/sign?address=${demo.addresses[0]}`;
}

interface StormKey {
  label: string;
  path: string;
  /** The status every caller must get. */
  status: 200 | 404;
}

/** One key each: every sign record, a missing one (a negative entry), pages of roles, a name search. */
function stormKeys(demo: Demo): StormKey[] {
  const short = (a: string) => `${a.slice(0, 6)}…${a.slice(-4)}`;
  const keys: StormKey[] = [
    ...demo.addresses.slice(0, 3).map((a) => ({ label: `sign ${short(a)}`, path: `/api/sign?address=${a}`, status: 200 as const })),
    { label: 'sign, no record', path: `/api/sign?address=${missingAddress(demo, '1')}`, status: 404 },
    { label: 'roles page 1, limit 10', path: '/api/roles?page=1&limit=10', status: 200 },
    { label: 'roles page 2, limit 10', path: '/api/roles?page=2&limit=10', status: 200 },
    { label: 'roles page 1, limit 5', path: '/api/roles?page=1&limit=5', status: 200 },
    { label: 'roles name "er", page 1, limit 10', path: '/api/roles?page=1&limit=10&name=er', status: 200 },
  ];
  return keys.slice(0, MAX_KEYS);
}

/** Asked of each storm gateway before its storms (keys no storm asks for): warms its code and its connection to the store. */
function primingPaths(demo: Demo): string[] {
  return ['/api/roles?page=1&limit=1', `/api/sign?address=${missingAddress(demo, '2')}`];
}

// ---------------------------------------------------------------------------------------------
// Servers

/** The gateway's compiled modules (or src/ under tsx), for koa-constant.ts to run the same code. */
function gatewayModules(runtime: Runtime): { dir: string; nodeFlags: string[] } {
  return runtime.mode === 'dist' ? { dir: dirname(runtime.entry[0]!), nodeFlags: [] } : { dir: join(ROOT, 'src'), nodeFlags: ['--import', 'tsx'] };
}

function gatewaySettings(keys: SigningKey, store: 'file' | Store, where: { upstream?: string; redis?: string }): Record<string, string> {
  return {
    LOG_LEVEL: 'warn',
    SIGNING_KEYS: keys.signingKeys,
    ...(store === 'http' ? {
      DIRECTORY_STORE: 'http',
      DIRECTORY_SIGN_URL: `${where.upstream}/accounts/{accountId}/sign/{address}`,
      DIRECTORY_ROLES_URL: `${where.upstream}/accounts/{accountId}/roles`,
      DIRECTORY_TOKEN: UPSTREAM_TOKEN,
    } : {}),
    ...(store === 'redis' ? { DIRECTORY_STORE: 'redis', REDIS_URL: where.redis! } : {}),
  };
}

async function startDirectoryGateway(name: string, runtime: Runtime, keys: SigningKey, store: 'file' | Store, where: { upstream?: string; redis?: string }, nodeFlags: string[] = []): Promise<Server> {
  // LOG_LEVEL=warn: its log (Server.out) should stay empty.
  return gatewayServer(name, await startGateway({ name, runtime, settings: gatewaySettings(keys, store, where), nodeFlags }));
}

async function signIn(url: string): Promise<string> {
  const res = await fetch(`${url}/api/signin`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: SIGNIN_BODY });
  const json = await res.json() as { message?: { accessToken?: unknown } };
  const token = json.message?.accessToken;
  if (res.status !== 200 || typeof token !== 'string') throw new Error(`sign-in at ${url} answered ${res.status}`);
  return token;
}

async function get(url: string, token?: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  return { status: res.status, body: await res.text() };
}

// ---------------------------------------------------------------------------------------------
// Warm cache: load (wrk)

interface Run extends LoadFigures {
  target: Target;
  endpoint: Endpoint;
  round: number;
}

interface WarmContext {
  demo: Demo;
  gateway: Server;
  tokensFile: string;
  /** When the token in the file was issued, ms. */
  tokenAt: number;
}

/**
 * Signs in at ctx.gateway and puts the token in the file. The token is valid on every server
 * started before now: a gateway, or koa on the gateway's modules, refuses access tokens issued
 * before it started (its resets would have died with an earlier process: src/state/revocation/memory.ts).
 */
async function renewToken(ctx: WarmContext): Promise<string> {
  ctx.tokenAt = Date.now();
  const token = await signIn(ctx.gateway.url);
  writeFileSync(ctx.tokensFile, `${token}\n`);
  return token;
}

/** A new access token when the one in use would not outlive the next run by a minute. */
async function ensureToken(ctx: WarmContext, seconds: number): Promise<void> {
  if (Date.now() - ctx.tokenAt <= (TOKEN_LIFETIME_S - seconds - 60) * 1000) return;
  log('  access token near the end of its lifetime: signing in again');
  await renewToken(ctx);
}

async function measure(ctx: WarmContext, target: Target, endpoint: Endpoint, server: Server, seconds: number, round: number): Promise<Run> {
  await ensureToken(ctx, seconds);
  await quiet.wait(`${server.label} ${endpoint}`);
  const path = warmPath(ctx.demo, endpoint);
  const figures = await measureLoad(bearerRun(server.url, path, ctx.tokensFile, CONNECTIONS, seconds), { server: server.pid });
  if (!isRunning(server.proc)) throw new Error(`${server.label} died during the run:\n${server.err.tail()}\n${server.out.tail()}`);
  return { target, endpoint, round, ...figures };
}

function runLine(run: Run): string {
  return `${run.endpoint.padEnd(5)} ${LABEL[run.target].padEnd(14)} ${fmt(run.rps).padStart(6)} req/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
    + `  server ${fmt(run.serverCpuUsPerReq)} µs/req (core ${fmt(100 * run.serverCoreUse)} %)  wrk ${fmt(run.clientCpuUsPerReq)} µs/req`
    + `  client core ${fmt(100 * run.clientCoreUse)} %  other load ${fmt(run.foreignCores, 2)}  steal ${fmt(run.stolenCores, 2)}`
    + `${run.non2xx + run.socketErrors > 0 ? `  ERRORS: ${run.non2xx} non-2xx, ${run.socketErrors} socket` : ''}`;
}

/**
 * Both servers answer 200 with a valid token and 401 without; koa's body is the gateway's,
 * byte for byte. Returns the gateway's bodies by path (what koa is then started with).
 */
async function gatewayAnswers(demo: Demo, gateway: Server, token: string): Promise<Record<string, object>> {
  const bodies: Record<string, object> = {};
  for (const endpoint of ENDPOINTS) {
    const path = warmPath(demo, endpoint);
    const ok = await get(`${gateway.url}${path}`, token);
    if (ok.status !== 200) throw new Error(`gateway: GET ${path} with a valid token answered ${ok.status}: ${ok.body.slice(0, 300)}`);
    const body = JSON.parse(ok.body) as { success?: unknown; message?: object };
    if (body.success !== true || typeof body.message !== 'object') throw new Error(`gateway: GET ${path}: not the envelope: ${ok.body.slice(0, 300)}`);
    bodies[new URL(path, gateway.url).pathname] = body;
  }
  return bodies;
}

async function sanityCheck(demo: Demo, servers: Map<Target, Server>, token: string): Promise<void> {
  for (const endpoint of ENDPOINTS) {
    const path = warmPath(demo, endpoint);
    const gatewayBody = (await get(`${servers.get('gateway')!.url}${path}`, token)).body;
    for (const server of servers.values()) {
      const ok = await get(`${server.url}${path}`, token);
      if (ok.status !== 200) throw new Error(`${server.label}: GET ${path} with the gateway's token answered ${ok.status}: ${ok.body.slice(0, 300)}`);
      if (ok.body !== gatewayBody) throw new Error(`${server.label}: GET ${path}: the body differs from the gateway's:\n${ok.body.slice(0, 300)}\n${gatewayBody.slice(0, 300)}`);
      const without = await get(`${server.url}${path}`);
      if (without.status !== 401) throw new Error(`${server.label}: GET ${path} without a token answered ${without.status}, not 401`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Cold storms

interface Answer {
  status: number;
  body: string;
  /** From when the request was sent to its last byte. */
  ms: number;
}

function httpGet(agent: Agent, url: string, token?: string): Promise<Answer> {
  return new Promise((done, fail) => {
    const started = performance.now();
    const req = httpRequest(url, { agent, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started }));
      res.on('error', fail);
    });
    req.on('error', fail);
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer from ${url} within 10 s`)));
    req.end();
  });
}

/**
 * `STORM` requests for `path` sent at once, each on a keep-alive connection of its own opened
 * beforehand (with as many requests for /healthz), so that they leave together instead of one
 * handshake after another. `beforeFire` runs once the connections are open.
 */
async function storm(url: string, path: string, token: string, beforeFire: () => Promise<void>): Promise<{ answers: Answer[]; connections: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: STORM, maxFreeSockets: STORM, keepAliveMsecs: 10_000 });
  try {
    const opened = await Promise.all(Array.from({ length: STORM }, () => httpGet(agent, `${url}/healthz`)));
    if (opened.some((a) => a.status !== 200)) throw new Error(`GET /healthz did not answer 200 to every caller: ${opened.find((a) => a.status !== 200)!.status}`);
    const connections = Object.values(agent.freeSockets).reduce((n, sockets) => n + (sockets?.length ?? 0), 0);
    await beforeFire();
    const answers = await Promise.all(Array.from({ length: STORM }, () => httpGet(agent, `${url}${path}`, token)));
    return { answers, connections };
  } finally {
    agent.destroy();
  }
}

interface StormRun {
  store: Store;
  round: number;
  key: string;
  path: string;
  callers: number;
  /** Keep-alive connections open when the storm was sent (should be `callers`). */
  connections: number;
  /** Answers with another status than the key's. */
  unexpected: number;
  /** Different answer bodies among the expected ones (1: everyone got the same). */
  distinctBodies: number;
  /** What the store was asked during the storm: upstream calls, or Redis commands on directory keys. */
  storeCalls: number;
  /** Those calls by upstream path (query included), or by Redis command. */
  calls: Record<string, number>;
  firstMs: number;
  p50Ms: number;
  maxMs: number;
}

interface UpstreamCount {
  total: number;
  byPath: Record<string, number>;
}

async function upstreamCount(upstream: Server): Promise<UpstreamCount> {
  const res = await fetch(`${upstream.url}/__count`);
  return await res.json() as UpstreamCount;
}

function stormRun(store: Store, round: number, key: StormKey, result: { answers: Answer[]; connections: number }, storeCalls: number, calls: Record<string, number>): StormRun {
  const expected = result.answers.filter((a) => a.status === key.status);
  const ms = result.answers.map((a) => a.ms);
  return {
    store, round, key: key.label, path: key.path,
    callers: result.answers.length,
    connections: result.connections,
    unexpected: result.answers.length - expected.length,
    distinctBodies: new Set(expected.map((a) => a.body)).size,
    storeCalls, calls,
    firstMs: Math.min(...ms), p50Ms: median(ms), maxMs: Math.max(...ms),
  };
}

async function stormHttp(gw: Server, upstream: Server, token: string, key: StormKey, round: number): Promise<StormRun> {
  const before = await upstreamCount(upstream);
  const result = await storm(gw.url, key.path, token, async () => {});
  const after = await upstreamCount(upstream);
  const calls: Record<string, number> = {};
  for (const [path, n] of Object.entries(after.byPath)) {
    const d = n - (before.byPath[path] ?? 0);
    if (d !== 0) calls[path] = d;
  }
  return stormRun('http', round, key, result, after.total - before.total, calls);
}

async function stormRedis(gw: Server, redis: RedisServer, token: string, key: StormKey, round: number): Promise<StormRun> {
  let result: { answers: Answer[]; connections: number } | undefined;
  const commands = await monitorWhile(redis.admin, async () => {
    result = await storm(gw.url, key.path, token, async () => {
      if (DELAY_MS > 0) await redis.admin.call('CLIENT', 'PAUSE', String(DELAY_MS), 'ALL');
    });
  });
  const calls: Record<string, number> = {};
  let storeCalls = 0;
  for (const c of commands) {
    // Commands a script runs inside Redis cost no call of their own.
    if (c.source === 'lua' || !c.args.some((a) => DIRECTORY_KEY.test(a))) continue;
    storeCalls++;
    calls[c.args[0]!.toUpperCase()] = (calls[c.args[0]!.toUpperCase()] ?? 0) + 1;
  }
  return stormRun('redis', round, key, result!, storeCalls, calls);
}

interface StormContext {
  demo: Demo;
  runtime: Runtime;
  keys: SigningKey;
  upstream: Server;
  redis?: RedisServer;
}

/** One storm round for one store: a fresh gateway (an empty cache), primed, then one storm per key. */
async function stormRound(ctx: StormContext, store: Store, round: number): Promise<{ runs: StormRun[]; problems: number; tail: string }> {
  const gw = await startDirectoryGateway(`storm-${store}`, ctx.runtime, ctx.keys, store, { upstream: ctx.upstream.url, redis: ctx.redis?.url });
  try {
    const token = await signIn(gw.url);
    for (const path of primingPaths(ctx.demo)) {
      const r = await get(`${gw.url}${path}`, token);
      if (r.status !== 200 && r.status !== 404) throw new Error(`${store} gateway: GET ${path} answered ${r.status}: ${r.body.slice(0, 300)}`);
    }
    const runs: StormRun[] = [];
    for (const key of stormKeys(ctx.demo)) {
      const run = store === 'http' ? await stormHttp(gw, ctx.upstream, token, key, round) : await stormRedis(gw, ctx.redis!, token, key, round);
      runs.push(run);
      log(`storm ${round + 1}/${STORM_ROUNDS} ${store.padEnd(5)} ${key.label.padEnd(34)} ${run.callers} callers: store calls ${run.storeCalls}`
        + ` (${Object.entries(run.calls).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'})  answers first ${fmt(run.firstMs, 1)} ms, median ${fmt(run.p50Ms, 1)} ms, last ${fmt(run.maxMs, 1)} ms`
        + `${run.unexpected > 0 ? `  UNEXPECTED STATUS: ${run.unexpected}` : ''}${run.distinctBodies > 1 ? `  ${run.distinctBodies} different bodies` : ''}`);
    }
    if (!isRunning(gw.proc)) throw new Error(`${store} gateway died during the storms:\n${gw.err.tail()}\n${gw.out.tail()}`);
    return { runs, problems: gw.out.problems + gw.err.problems, tail: gw.out.tail(5) };
  } finally {
    await stopChild(gw.proc);
  }
}

// ---------------------------------------------------------------------------------------------
// Profile (--profile): one more gateway under --cpu-prof, after the measured rounds

interface ProfileResult {
  endpoint: Endpoint;
  summary: ProfileSummary;
}

async function profileGateway(ctx: WarmContext, tmp: string, runtime: Runtime, keys: SigningKey): Promise<ProfileResult[]> {
  const dir = join(tmp, 'prof-gateway');
  mkdirSync(dir, { recursive: true });
  const gw = await startDirectoryGateway('gateway (profiled)', runtime, keys, 'file', {}, ['--cpu-prof', '--cpu-prof-dir', dir]);
  const windows: [Endpoint, number, number][] = [];
  try {
    // A new gateway refuses the tokens issued before it started: its own, from now on.
    const own: WarmContext = { ...ctx, gateway: gw };
    await renewToken(own);
    for (const endpoint of ENDPOINTS) if (WARMUP > 0) await measure(own, 'gateway', endpoint, gw, WARMUP, -1);
    for (const endpoint of ENDPOINTS) {
      const from = profileClockUs();
      const run = await measure(own, 'gateway', endpoint, gw, SECONDS, -1);
      windows.push([endpoint, from, profileClockUs()]);
      log(`profile run: ${runLine(run)}`);
    }
  } finally {
    // Writing the profile at exit takes a while for a busy process.
    await stopChild(gw.proc, 15_000);
  }
  const profile = readProfile(dir, join(RESULTS, 'directory-gateway.cpuprofile'));
  return windows.map(([endpoint, from, to]) => ({ endpoint, summary: summarizeWindow(profile, [from, to], `gateway ${endpoint}`) }));
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

type Row = { target: Target; endpoint: Endpoint } & LoadRow;

function summarize(runs: Run[]): Row[] {
  return ENDPOINTS.flatMap((endpoint) => TARGETS.map((target) => ({ target, endpoint, ...loadRow(runs.filter((r) => r.target === target && r.endpoint === endpoint)) })));
}

/** Per path: the gateway's metric ÷ koa's in the same round. */
function ratios(runs: Run[]): Ratio[] {
  return ENDPOINTS.flatMap((endpoint) => {
    const paired = (metric: (r: Run) => number) => pairedRatio(runs, ROUNDS, { target: 'gateway', endpoint }, { target: 'koa', endpoint }, metric);
    const throughput = paired((r) => r.rps);
    return [
      { name: `${endpoint}: gateway / koa, throughput`, ...throughput, target: { text: '≥ 0.85×', met: throughput.median >= 0.85 } },
      { name: `${endpoint}: gateway / koa, p50 latency`, ...paired((r) => r.p50Ms) },
      { name: `${endpoint}: gateway / koa, p99 latency`, ...paired((r) => r.p99Ms) },
      { name: `${endpoint}: gateway / koa, CPU per request`, ...paired((r) => r.serverCpuUsPerReq) },
    ];
  });
}

function resultsTable(rows: Row[]): string {
  const lines = [
    '| path | server | req/s (median) | range over rounds | p50 ms | p99 ms | server CPU µs/req | server core use | wrk CPU µs/req | client core use | other load (cores) | non-2xx / socket errors |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(`| ${r.endpoint} | ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.rpsRange[0])}–${fmt(r.rpsRange[1])} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.serverCpuUsPerReq)} | ${fmt(100 * r.serverCoreUse)} % | ${fmt(r.clientCpuUsPerReq)} | ${fmt(100 * r.clientCoreUse)} % | ${fmt(r.foreignCores, 2)} | ${r.non2xx} / ${r.socketErrors} of ${r.requests} |`);
  }
  return lines.join('\n');
}

function roundsTable(runs: Run[]): string {
  const lines = ENDPOINTS.flatMap((endpoint) => TARGETS.map((target) => ({ labels: [endpoint, LABEL[target]], match: { target, endpoint } })));
  return roundsTableOf(runs, ROUNDS, ['path', 'server'], lines, (r) => r.rps);
}

/** Every storm of a key cost the store exactly one call, and every caller got the key's answer. */
const stormMet = (rs: StormRun[]) => rs.every((r) => r.storeCalls === 1);

function stormTable(runs: StormRun[], stores: Store[], keys: StormKey[]): string {
  const lines = [
    `| store | key (\`GET …\`) | callers | store calls per storm (${STORM_ROUNDS} storm${STORM_ROUNDS === 1 ? '' : 's'}) | what the store was asked | answers: first / median / last ms (median over storms) | unexpected status | exactly 1 call |`,
    '|---|---|---:|---|---|---:|---:|---|',
  ];
  for (const store of stores) for (const key of keys) {
    const rs = runs.filter((r) => r.store === store && r.key === key.label);
    if (rs.length === 0) continue;
    const asked = new Map<string, number>();
    for (const r of rs) for (const [k, n] of Object.entries(r.calls)) asked.set(k, (asked.get(k) ?? 0) + n);
    const askedText = [...asked].map(([k, n]) => `\`${k}\` ×${n}`).join(', ') || 'nothing';
    lines.push(`| ${store} | ${key.label}: \`${key.path}\` → ${key.status} | ${rs[0]!.callers} | ${rs.map((r) => r.storeCalls).join(', ')} | ${askedText} `
      + `| ${fmt(median(rs.map((r) => r.firstMs)), 1)} / ${fmt(median(rs.map((r) => r.p50Ms)), 1)} / ${fmt(median(rs.map((r) => r.maxMs)), 1)} `
      + `| ${rs.reduce((a, r) => a + r.unexpected, 0)} | ${stormMet(rs) ? 'yes' : '**no**'} |`);
  }
  return lines.join('\n');
}

function stormSummary(runs: StormRun[], stores: Store[]): string[] {
  return stores.map((store) => {
    const rs = runs.filter((r) => r.store === store);
    const calls = rs.map((r) => r.storeCalls);
    const met = stormMet(rs);
    return `- ${store} store: ${rs.length} storms of ${STORM} callers each cost the store **${fmt(Math.min(...calls))}–${fmt(Math.max(...calls))}** call(s) (median ${fmt(median(calls), 1)}) — target exactly 1 per storm: ${met ? 'met' : '**not met**'}`;
  });
}

// ---------------------------------------------------------------------------------------------
// Main

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const hasRedis = spawnSync('sh', ['-c', 'command -v redis-server']).status === 0;
  if (WANT_REDIS && !hasRedis) log(`${NAME}: redis-server is not installed: no storms against the Redis store`);
  const STORES: Store[] = ['http', ...(WANT_REDIS && hasRedis ? ['redis' as const] : [])];
  const demo = readDemo();
  const keyList = stormKeys(demo);
  const keys = makeSigningKey();

  // Warm cache: the gateway, one token, its answers; then koa with those answers.
  const gateway = await startDirectoryGateway('gateway', runtime, keys, 'file', {});
  const bodies = await gatewayAnswers(demo, gateway, await signIn(gateway.url));
  const modules = gatewayModules(runtime);
  const koa = await startNodeServer(LABEL.koa, 'koa-constant.ts', SERVER_CORE, { SIGNING_KEYS: keys.signingKeys, BODIES: JSON.stringify(bodies), GATEWAY_MODULES: modules.dir }, {
    nodeFlags: modules.nodeFlags, readyPath: '/api/roles', readyStatus: 401,
  });
  // The load's token is signed in once koa runs too: koa refuses the one it was made with.
  const ctx: WarmContext = { demo, gateway, tokensFile: join(tmp, 'token.txt'), tokenAt: 0 };
  const token = await renewToken(ctx);
  const servers = new Map<Target, Server>([['gateway', gateway], ['koa', koa]]);
  await sanityCheck(demo, servers, token);

  const env = {
    ...runEnv(started, source, runtime),
    pinning: PIN
      ? `gateways and koa on core ${SERVER_CORE} (\`taskset -c ${SERVER_CORE}\`, all their threads); wrk, the upstream, redis-server and this script on core ${CLIENT_CORE}`
      : 'none (needs taskset and 2+ cores)',
    bodyBytes: Object.fromEntries(Object.entries(bodies).map(([path, body]) => [path, Buffer.byteLength(JSON.stringify(body))])),
  };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; runtime ${runtime.mode}; gateway src/ at ${source}`);
  log(`${NAME}: warm cache: ${ENDPOINTS.map((e) => `GET ${warmPath(demo, e)}`).join(', ')}; ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections; pinning: ${env.pinning}`);
  log(`${NAME}: sanity checks passed (200 and the same body from both servers with the gateway's token, 401 without one)`);

  if (WARMUP > 0) {
    log(`warm-up: ${WARMUP} s per server and path`);
    for (const endpoint of ENDPOINTS) for (const target of TARGETS) log(`  warm-up ${runLine(await measure(ctx, target, endpoint, servers.get(target)!, WARMUP, -1))}`);
  }
  const runs: Run[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? TARGETS : [...TARGETS].reverse();
    for (const endpoint of ENDPOINTS) for (const target of order) {
      const server = servers.get(target)!;
      const run = await quiet.repeatDisturbed(`${LABEL[target]} ${endpoint}`, SECONDS, () => measure(ctx, target, endpoint, server, SECONDS, round), (r) => `${fmt(r.rps)} req/s`);
      runs.push(run);
      log(`round ${round + 1}/${ROUNDS} ${runLine(run)}`);
    }
  }
  const gatewayLogLines = gateway.out.lines.length;
  const gatewayLogTail = gateway.out.tail(5);
  const stderrLines = [...servers.values()].map((s) => ({ label: s.label, lines: s.err.lines.length, tail: s.err.tail(5) })).filter((s) => s.lines > 0);
  let profiles: ProfileResult[] = [];
  if (opt.profile) {
    await stopChild(koa.proc);
    log(`profile: one more gateway under --cpu-prof, ${SECONDS} s per path after a ${WARMUP} s warm-up`);
    profiles = await profileGateway(ctx, tmp, runtime, keys);
  }
  for (const server of servers.values()) await stopChild(server.proc);

  // Cold storms.
  const upstream = await startNodeServer('upstream', 'directory-upstream.ts', CLIENT_CORE, { DATA_FILE, DELAY_MS: String(DELAY_MS), TOKEN: UPSTREAM_TOKEN }, { readyPath: '/__count', readyStatus: 200 });
  let redis: RedisServer | undefined;
  if (STORES.includes('redis')) {
    redis = await startRedis(tmp);
    const r = spawnSync(process.execPath, runtime.cli('import-directory'), { cwd: ROOT, env: { ...cleanEnv(), REDIS_URL: redis.url }, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`the directory import into Redis failed: ${r.stderr}${r.stdout}`);
    log(`${NAME}: Redis ${redis.version}: ${r.stdout.trim()}`);
  }
  const stormCtx: StormContext = { demo, runtime, keys, upstream, ...(redis === undefined ? {} : { redis }) };
  log(`${NAME}: cold storms: ${STORM} callers per key, ${keyList.length} keys, ${STORM_ROUNDS} round(s), stores ${STORES.join(', ')}, store delay ${DELAY_MS} ms`);
  const storms: StormRun[] = [];
  const stormProblems: { store: Store; count: number; tail: string }[] = [];
  for (let round = 0; round < STORM_ROUNDS; round++) {
    for (const store of STORES) {
      const r = await stormRound(stormCtx, store, round);
      storms.push(...r.runs);
      if (r.problems > 0) stormProblems.push({ store, count: r.problems, tail: r.tail });
    }
  }
  if (!isRunning(upstream.proc)) throw new Error(`the upstream died during the storms:\n${upstream.err.tail()}`);
  const upstreamErrLines = upstream.err.lines.length;
  await stopChild(upstream.proc);
  redis?.admin.disconnect();

  const rows = summarize(runs);
  const ratioList = ratios(runs);
  const warmErrors = rows.reduce((a, r) => a + r.non2xx + r.socketErrors, 0);
  const stormErrors = storms.reduce((a, r) => a + r.unexpected + (r.distinctBodies > 1 ? 1 : 0), 0);
  const report: LoadReport = { table: resultsTable(rows), ratios: ratioList.map(ratioLine), rounds: roundsTable(runs) };
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}${redis === undefined ? '' : `, Redis ${redis.version}`}`,
    `- gateway: src/ at ${env.commit}; ${env.runtime}; LOG_LEVEL=warn, NODE_ENV=production, one Ed25519 signing key; every directory setting at its default (cache TTL 10 s)`,
    `- koa: bench/servers/koa-constant.ts, koa ${packageVersion('koa')} under ${runtime.mode === 'dist' ? 'plain \`node\`' : '\`node --import tsx\`'}, the gateway's bearer check from the modules the gateway runs, the gateway's answer as a constant body (${Object.entries(env.bodyBytes).map(([p, n]) => `${p} ${n} bytes`).join(', ')})`,
    `- pinning: ${env.pinning}`,
    `- warm cache: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, one access token on every request; ${ROUNDS} rounds × ${SECONDS} s per server and path after a ${WARMUP} s warm-up, the two servers in turn, the order reversed every other round`,
    `- cold storms: ${STORM} callers (node:http, one keep-alive connection each, opened beforehand) sent at once for one key never asked before; per round and store a fresh gateway (empty cache), primed with ${primingPaths(demo).map((p) => `\`${p}\``).join(' and ')}; the HTTP upstream answers after ${DELAY_MS} ms${redis === undefined ? '' : `; Redis's clients paused for ${DELAY_MS} ms (CLIENT PAUSE … ALL) just before each storm, calls counted with MONITOR (commands naming a directory key, not those inside a script)`}`,
    stolenLine(runs),
    otherLoadLine(runs, QUIET_WAIT, 'warm run'),
    '',
    '**Warm cache**',
    '',
    ...loadReportLines(report),
    '',
    gatewayLogLines === 0 ? 'The gateway (LOG_LEVEL=warn) logged nothing during the runs.' : `The gateway (LOG_LEVEL=warn) logged ${gatewayLogLines} line(s) during the runs.`,
    ...(stderrLines.length > 0 ? [`Lines on stderr: ${stderrLines.map((s) => `${s.label} ${s.lines}`).join(', ')}.`] : []),
    '',
    '**Cold storms**',
    '',
    stormTable(storms, STORES, keyList),
    '',
    ...stormSummary(storms, STORES),
    '',
    stormProblems.length === 0
      ? 'No storm gateway logged a warning or an error.'
      : `Storm gateways' warnings/errors: ${stormProblems.map((p) => `${p.store} ${p.count}`).join(', ')}.`,
    ...(profiles.length > 0
      ? ['', `CPU profile (\`--profile\`: one more gateway under \`node --cpu-prof\`, sampled over a ${SECONDS} s run of each path after the warm-up; shares of the main thread's samples, idle excluded):`, '',
        ...profiles.flatMap((p) => [formatProfileSummary(`gateway, GET /api/${p.endpoint} (warm cache)`, p.summary), ''])]
      : []),
  ].join('\n');

  process.stdout.write(loadReportText(report));
  process.stdout.write(`\n${stormTable(storms, STORES, keyList)}\n\n${stormSummary(storms, STORES).join('\n')}\n`);
  if (gatewayLogLines > 0) process.stdout.write(`\ngateway logged ${gatewayLogLines} line(s), last:\n${gatewayLogTail}\n`);
  for (const s of stderrLines) process.stdout.write(`\n${s.label} wrote ${s.lines} line(s) on stderr, last:\n${s.tail}\n`);
  for (const p of stormProblems) process.stdout.write(`\nstorm gateway (${p.store}): ${p.count} warning/error line(s), last:\n${p.tail}\n`);
  if (upstreamErrLines > 0) process.stdout.write(`\nthe upstream wrote ${upstreamErrLines} line(s) on stderr\n`);
  for (const p of profiles) process.stdout.write(`\n${formatProfileSummary(`gateway, GET /api/${p.endpoint} (warm cache)`, p.summary)}\n`);

  writeRawFigures(RESULTS, 'directory', started, {
    env,
    options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, storm: STORM, stormRounds: STORM_ROUNDS, delayMs: DELAY_MS, stores: STORES },
    warm: { paths: Object.fromEntries(ENDPOINTS.map((e) => [e, warmPath(demo, e)])), rows, ratios: ratioList, runs },
    storms: { keys: keyList, primingPaths: primingPaths(demo), runs: storms, met: Object.fromEntries(STORES.map((s) => [s, stormMet(storms.filter((r) => r.store === s))])) },
    profiles,
  });
  updateReport(NAME, REPORT, generated, {
    noReport: opt.noReport,
    failure: warmErrors + stormErrors > 0 ? `${warmErrors} warm request(s) not answered 2xx, ${stormErrors} storm answer(s) with an unexpected status or body` : undefined,
  });
}

runBench({ name: NAME, slug: 'directory', budgetMs: BUDGET_MS, tools: ['wrk'], runtime: opt.runtime }, main);
