/**
 * What a forward-auth decision costs next to the gateway proxying the request itself
 * (docs/forward-auth.md), in one run: the same authenticated `GET` reaching the same backend
 * - `forward auth`: wrk → nginx (`auth_request`, configured exactly as docs/forward-auth.md
 *   shows) → the gateway's /api/forward-auth on a decision-only route, then nginx → backend;
 * - `gateway proxy`: wrk → the gateway, which checks the token and proxies → backend.
 * Results: a table on stdout, bench/reports/forward-auth.md (method and findings: "Forward auth"
 * in bench/README.md), and bench/results/forward-auth-<time>.json.
 *
 *   node --import tsx bench/forward-auth.ts [--rounds 5 --seconds 5 --warmup 2 --connections 64
 *                                            --tokens 20000 --quiet-wait 120 --runtime dist|tsx
 *                                            --no-report]
 *
 * As bench/policies.ts: wrk, one thread, keep-alive connections, closed loop, each request with
 * the next of --tokens distinct access tokens; rounds rotate the order; medians over rounds,
 * ratios medians of the per-round ratios. The auth layer gets core 1 in both setups (the
 * gateway alone; or nginx, one worker without a master, and the gateway together), wrk, the
 * backend and this script core 0; CPU per request is measured per process: the gateway, nginx,
 * the backend, wrk.
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { REPORTS, RESULTS, ROOT, runEnv, startGateway, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, freePort, nproc, pinned, PIN, processCpuSeconds, Quiet, SERVER_CORE } from './lib/machine.js';
import { isRunning, Output, stopChild, track } from './lib/processes.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { gatewayServer, startNodeServer as startBenchServer, type Server } from './lib/servers.js';
import { loadReportLines, loadReportText, loadRow, otherLoadLine, pairedRatio, ratioLine, roundsTable as roundsTableOf, stolenLine, type LoadReport, type LoadRow, type Ratio } from './lib/summary.js';
import { makeSigningKey, TokenSupply, type SigningKey } from './lib/tokens.js';
import { bearerRun, measureLoad, type LoadFigures } from './lib/wrk.js';

const NAME = 'bench:forward-auth';
const REPORT: Report = { file: join(REPORTS, 'forward-auth.md'), title: 'Forward auth: a decision behind nginx against the gateway proxying', script: `npm run ${NAME}` };
const PATH = '/bench/items/42';
const PREFIX = '/bench';
const ACCOUNTS = 100;
const NGINX = process.env.NGINX_BIN ?? '/usr/sbin/nginx';

type Target = 'forward' | 'proxy';
const LABEL: Record<Target, string> = { forward: 'forward auth', proxy: 'gateway proxy' };
const TARGETS: Target[] = ['forward', 'proxy'];

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 5, connections: 64 }, { tokens: { type: 'string', default: '20000' } });
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
const TOKENS = boundedInt(NAME, 'tokens', opt.extra.tokens as string, 100, 200_000);
const BUDGET_MS = (120 + QUIET_WAIT + TARGETS.length * (WARMUP + 3 + ROUNDS * (SECONDS + 4)) + 60) * 2 * 1000;
const quiet = new Quiet(QUIET_WAIT);

/** The setup's gateway: a decision-only route (forward auth) or one that proxies. */
async function startTarget(target: Target, runtime: Runtime, keys: SigningKey, backendUrl: string, tmp: string): Promise<Server> {
  const dataFile = join(tmp, `data-${target}.json`);
  copyFileSync(join(ROOT, 'config', 'demo-data.json'), dataFile);
  const route = target === 'proxy' ? { prefix: PREFIX, targets: [backendUrl] } : { prefix: PREFIX };
  return gatewayServer(`${LABEL[target]} (gateway)`, await startGateway({
    name: target, runtime,
    settings: { LOG_LEVEL: 'warn', SIGNING_KEYS: keys.signingKeys, RATE_LIMITS: 'off', ROUTES: JSON.stringify([route]), GATEWAY_DATA_FILE: dataFile, TRUSTED_PROXIES: '["127.0.0.1"]' },
  }));
}

/** nginx with the nginx block of docs/forward-auth.md, pointed at `gatewayUrl` and `backendUrl`, on core 1. */
async function startNginx(gatewayUrl: string, backendUrl: string, tmp: string): Promise<Server> {
  const page = readFileSync(join(ROOT, 'docs', 'forward-auth.md'), 'utf8');
  const block = /```nginx\n([\s\S]*?)\n```/.exec(page)?.[1];
  if (block === undefined) throw new Error('docs/forward-auth.md shows no nginx block');
  const port = await freePort();
  const server = block.replace('server gateway:8080;', `server ${new URL(gatewayUrl).host};`)
    .replace('server app:9000;', `server ${new URL(backendUrl).host};`).replace('listen 80;', `listen 127.0.0.1:${port};`);
  const conf = join(tmp, 'nginx.conf');
  writeFileSync(conf, [
    'daemon off;', 'master_process off;', 'worker_processes 1;', `pid ${join(tmp, 'nginx.pid')};`, `error_log ${join(tmp, 'nginx-error.log')} warn;`,
    'events { worker_connections 1024; }',
    'http {', '  access_log off;', ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${join(tmp, k)};`), server, '}', '',
  ].join('\n'));
  const [cmd, args] = pinned(SERVER_CORE, NGINX, ['-p', tmp, '-c', conf, '-e', 'stderr']);
  const proc = track(spawn(cmd, args, { cwd: tmp, stdio: ['ignore', 'ignore', 'pipe'] }));
  const nginx: Server = { label: 'nginx', proc, pid: proc.pid!, url: `http://127.0.0.1:${port}`, err: new Output(proc.stderr), out: new Output(null) };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (!isRunning(proc)) throw new Error(`nginx exited: ${nginx.err.tail()}`);
    const answered = await fetch(`${nginx.url}${PATH}`).then((r) => r.status, () => 0);
    if (answered === 401) return nginx;
    if (Date.now() > deadline) throw new Error(`nginx did not answer 401 without a token (last: ${answered}): ${nginx.err.tail()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** 200 with the backend's answer for a valid token, 401 without one. */
async function sanityCheck(label: string, url: string, token: string): Promise<void> {
  const ok = await fetch(`${url}${PATH}`, { headers: { authorization: `Bearer ${token}` } });
  const body = await ok.text();
  if (ok.status !== 200 || !body.includes('bench-backend')) throw new Error(`${label}: GET ${PATH} answered ${ok.status}: ${body.slice(0, 300)}`);
  const refused = await fetch(`${url}${PATH}`);
  const envelope = await refused.text();
  if (refused.status !== 401 || !envelope.includes('missing_token')) throw new Error(`${label}: without a token ${refused.status}: ${envelope.slice(0, 300)}`);
}

interface Run extends LoadFigures {
  target: Target;
  round: number;
  backendCpuUsPerReq: number;
  /** nginx's CPU per request (forward auth only). */
  nginxCpuUsPerReq?: number;
  /** The auth layer's CPU per request: the gateway, plus nginx for forward auth. */
  layerCpuUsPerReq: number;
}

interface Setup { gateway: Server; front: Server }

async function measure(backend: Server, tokens: TokenSupply, target: Target, setup: Setup, seconds: number, round: number): Promise<Run> {
  const tokensFile = await tokens.fileFor(seconds);
  await quiet.wait(LABEL[target]);
  const nginxBefore = target === 'forward' ? processCpuSeconds(setup.front.pid) : 0;
  const figures = await measureLoad(bearerRun(setup.front.url, PATH, tokensFile, CONNECTIONS, seconds), { server: setup.gateway.pid, backend: backend.pid });
  const nginxCpu = target === 'forward' ? processCpuSeconds(setup.front.pid) - nginxBefore : 0;
  for (const s of [setup.gateway, setup.front]) if (!isRunning(s.proc)) throw new Error(`${s.label} died during the run:\n${s.err.tail()}`);
  const nginxCpuUsPerReq = target === 'forward' ? (nginxCpu * 1e6) / Math.max(figures.requests, 1) : undefined;
  return { target, round, ...figures, nginxCpuUsPerReq, layerCpuUsPerReq: figures.serverCpuUsPerReq + (nginxCpuUsPerReq ?? 0) };
}

function runLine(run: Run): string {
  return `${LABEL[run.target].padEnd(13)} ${fmt(run.rps).padStart(6)} req/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
    + `  gateway ${fmt(run.serverCpuUsPerReq)} µs/req${run.nginxCpuUsPerReq === undefined ? '' : `  nginx ${fmt(run.nginxCpuUsPerReq)} µs/req`}`
    + `  backend ${fmt(run.backendCpuUsPerReq)} µs/req  wrk ${fmt(run.clientCpuUsPerReq)} µs/req  other load ${fmt(run.foreignCores, 2)}`
    + `${run.non2xx + run.socketErrors > 0 ? `  ERRORS: ${run.non2xx} non-2xx, ${run.socketErrors} socket` : ''}`;
}

type Row = { target: Target } & LoadRow & { nginxCpuUsPerReq: number; layerCpuUsPerReq: number };

function summarize(runs: Run[]): Row[] {
  return TARGETS.map((target) => {
    const own = runs.filter((r) => r.target === target);
    return { target, ...loadRow(own, { backend: true }), nginxCpuUsPerReq: median(own.map((r) => r.nginxCpuUsPerReq ?? NaN)), layerCpuUsPerReq: median(own.map((r) => r.layerCpuUsPerReq)) };
  });
}

function ratios(runs: Run[]): Ratio[] {
  const paired = (metric: (r: Run) => number) => pairedRatio(runs, ROUNDS, { target: 'forward' }, { target: 'proxy' }, metric);
  const list: Ratio[] = [
    { name: 'forward auth / gateway proxy, throughput', ...paired((r) => r.rps) },
    { name: 'forward auth / gateway proxy, p50 latency', ...paired((r) => r.p50Ms) },
    { name: 'forward auth / gateway proxy, p99 latency', ...paired((r) => r.p99Ms) },
    { name: 'forward auth / gateway proxy, gateway CPU per request', ...paired((r) => r.serverCpuUsPerReq) },
    { name: 'forward auth / gateway proxy, auth layer CPU per request (gateway + nginx)', ...paired((r) => r.layerCpuUsPerReq) },
  ];
  // Issue 32's target 6, "decisions ≥ 2× proxied requests per core": what one core of the
  // gateway serves, requests per CPU-second (the inverse of its CPU per request). The ingress in
  // front is the team's own and forwards the request itself, so its CPU is not the gateway's
  // core; the auth layer's line above shows the two together.
  const perCore = paired((r) => (r.serverCpuUsPerReq > 0 ? 1e6 / r.serverCpuUsPerReq : 0));
  return [...list, { name: 'forward auth / gateway proxy, requests per gateway CPU-second (issue 32: per core)', ...perCore, target: { text: '≥ 2×', met: perCore.median >= 2 } }];
}

function resultsTable(rows: Row[]): string {
  const lines = [
    '| setup | req/s (median) | range over rounds | p50 ms | p99 ms | gateway CPU µs/req | nginx CPU µs/req | auth layer (core 1) µs/req | core 1 use (gateway) | backend CPU µs/req | wrk CPU µs/req | other load (cores) | non-2xx / socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(`| ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.rpsRange[0])}–${fmt(r.rpsRange[1])} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.serverCpuUsPerReq)} | ${r.target === 'forward' ? fmt(r.nginxCpuUsPerReq) : '—'} | ${fmt(r.layerCpuUsPerReq)} | ${fmt(100 * r.serverCoreUse)} % | ${fmt(r.backendCpuUsPerReq)} | ${fmt(r.clientCpuUsPerReq)} | ${fmt(r.foreignCores, 2)} | ${r.non2xx} / ${r.socketErrors} of ${r.requests} |`);
  }
  return lines.join('\n');
}

async function startSetups(runtime: Runtime, keys: SigningKey, backend: Server, tmp: string): Promise<Map<Target, Setup>> {
  const setups = new Map<Target, Setup>();
  const decider = await startTarget('forward', runtime, keys, backend.url, tmp);
  setups.set('forward', { gateway: decider, front: await startNginx(decider.url, backend.url, tmp) });
  const proxy = await startTarget('proxy', runtime, keys, backend.url, tmp);
  setups.set('proxy', { gateway: proxy, front: proxy });
  return setups;
}

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const keys = makeSigningKey();
  const backend = await startBenchServer('backend', 'backend.ts', CLIENT_CORE, {}, { readyPath: PATH, readyStatus: 200 });
  const setups = await startSetups(runtime, keys, backend, tmp);
  const tokens = await TokenSupply.mint(NAME, keys.privateKey, tmp, TOKENS, ACCOUNTS);
  const firstToken = readFileSync(tokens.file, 'utf8').slice(0, 4096).split('\n')[0]!;
  for (const [target, setup] of setups) await sanityCheck(LABEL[target], setup.front.url, firstToken);
  const env = {
    ...runEnv(started, source, runtime),
    pinning: PIN ? `the auth layer on core ${SERVER_CORE} (the gateway; for forward auth nginx too); wrk, the backend and this script on core ${CLIENT_CORE}` : 'none (needs taskset and 2+ cores)',
  };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; runtime ${runtime.mode}; gateway src/ at ${source}; pinning: ${env.pinning}`);
  log(`${NAME}: sanity checks passed (200 with the backend's answer through both; 401 missing_token without a token)`);

  const runs = await rotatedRounds({
    targets: TARGETS, rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, quiet, label: (t) => LABEL[t], line: runLine,
    measure: (target, seconds, round) => measure(backend, tokens, target, setups.get(target)!, seconds, round),
  });
  for (const setup of setups.values()) for (const s of new Set([setup.front, setup.gateway])) await stopChild(s.proc);

  const rows = summarize(runs);
  const errors = rows.reduce((a, r) => a + r.non2xx + r.socketErrors, 0);
  const ratioList = ratios(runs);
  const report: LoadReport = {
    table: resultsTable(rows),
    ratios: ratioList.map(ratioLine),
    rounds: roundsTableOf(runs, ROUNDS, ['setup'], TARGETS.map((target) => ({ labels: [LABEL[target]], match: { target } })), (r) => r.rps),
  };
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}, ${firstLineOf(NGINX)}`,
    `- gateways: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, LOG_LEVEL=warn, RATE_LIMITS=off, one Ed25519 signing key, TRUSTED_PROXIES=["127.0.0.1"]; \`forward auth\`: \`ROUTES=[{"prefix":"${PREFIX}"}]\` (decision-only) behind nginx with the nginx block of docs/forward-auth.md (one worker, no master, keep-alive to both upstreams); \`gateway proxy\`: \`ROUTES=[{"prefix":"${PREFIX}","targets":[<backend>]}]\``,
    `- pinning: ${env.pinning}`,
    `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, \`GET ${PATH}\`, each request with the next of ${TOKENS} distinct tokens of ${ACCOUNTS} accounts; ${ROUNDS} rounds × ${SECONDS} s per setup after a ${WARMUP} s warm-up, the order rotated each round`,
    stolenLine(runs),
    otherLoadLine(runs, QUIET_WAIT, 'run'),
    '',
    ...loadReportLines(report),
  ].join('\n');

  process.stdout.write(loadReportText(report));
  writeRawFigures(RESULTS, 'forward-auth', started, { env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, tokens: TOKENS }, rows, ratios: ratioList, runs });
  updateReport(NAME, REPORT, generated, { noReport: opt.noReport, failure: errors > 0 ? `${errors} request(s) were not answered 2xx` : undefined });
}

/** "nginx 1.x.y", from `nginx -v` (which writes to stderr). */
function firstLineOf(binary: string): string {
  return `nginx ${/nginx\/(\S+)/.exec(spawnSync(binary, ['-v'], { encoding: 'utf8' }).stderr)?.[1] ?? '?'}`;
}

runBench({ name: NAME, slug: 'forward-auth', budgetMs: BUDGET_MS, tools: ['wrk'], runtime: opt.runtime }, main);
