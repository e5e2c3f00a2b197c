/**
 * What a route's `allow` rules cost a proxied request (docs/policies.md): the gateway with no
 * rules, and with 20 rules on the route where the request is allowed by the last one (so all 20
 * are asked: the worst case of first-match-wins), in one run. Results: a table on stdout,
 * bench/reports/policies.md (method and findings: "Policies: what 20 rules cost a proxied
 * request" in bench/README.md), and bench/results/policies-<time>.json.
 *
 *   node --import tsx bench/policies.ts [--rounds 5 --seconds 5 --warmup 2 --connections 64
 *                                        --tokens 20000 --quiet-wait 120 --runtime dist|tsx
 *                                        --decisions 200000 --no-report]
 *
 * Two measurements, since the target (at most 5 % of a proxied request) is below what one
 * run of load resolves on this VM (bench/README.md, "Limits": 340–630 µs between rounds):
 * - under load, as bench/limits.ts: wrk, one thread, keep-alive connections, closed loop, each
 *   request with the next of --tokens distinct access tokens; the gateway under test pinned to
 *   core 1, wrk, the backend and this script to core 0; rounds rotate the order; medians over
 *   rounds, ratios medians of the per-round ratios. The rules gateway must count one
 *   `allow` of rule 19 per answered request in gateway_policy_decisions_total;
 * - the decision alone: the same 20 rules compiled by src/proxy/policy.ts, asked for the same
 *   request --decisions times in this process (pinned to core 0 once the load is over), with
 *   the counter increment admission adds; its µs per decision over the no-rules gateway's
 *   CPU per request is the share the target is about.
 */
import { copyFileSync, readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { Counter, Registry } from 'prom-client';
import { configSchema } from '../src/config/schema.js';
import { createClientIp } from '../src/http/client-address.js';
import { compilePolicy } from '../src/proxy/policy.js';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { REPORTS, RESULTS, ROOT, runEnv, startGateway, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, nproc, PIN, Quiet, SERVER_CORE } from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { gatewayServer, startNodeServer as startBenchServer, type Server } from './lib/servers.js';
import { loadReportLines, loadReportText, loadRow, otherLoadLine, pairedRatio, perRound, ratioLine, roundsTable as roundsTableOf, stolenLine, type LoadReport, type LoadRow, type Ratio } from './lib/summary.js';
import { makeSigningKey, TokenSupply, type SigningKey } from './lib/tokens.js';
import { bearerRun, measureLoad, type LoadFigures } from './lib/wrk.js';

const NAME = 'bench:policies';
const REPORT: Report = { file: join(REPORTS, 'policies.md'), title: 'Policies: what 20 rules cost a proxied request', script: `npm run ${NAME}` };
const PATH = '/bench/items/42';
const PREFIX = '/bench';
const ACCOUNTS = 100;
/** The target: the rules' share of a proxied request's CPU. */
const TARGET_SHARE = 0.05;

/**
 * 20 rules: the first 19 match the method and the path and fail on a claim (every selector
 * before it asked), the 20th allows by method, path and source (the address parsed too).
 */
const RULES = [
  ...Array.from({ length: 19 }, (_, i) => ({ name: `team-${i}`, methods: ['GET', 'POST'], paths: ['/bench/items/:id', `/bench/team-${i}/*rest`], claims: { org: `org-${i}` } })),
  { name: 'local', methods: ['GET'], paths: ['/bench/items/:id'], sources: ['10.0.0.0/8', '127.0.0.0/8', '::1'] },
];
const LAST_RULE = 'local';

type Target = 'none' | 'rules';
const LABEL: Record<Target, string> = { none: 'no rules', rules: '20 rules' };
const TARGETS: Target[] = ['none', 'rules'];

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 5, connections: 64 }, {
  tokens: { type: 'string', default: '20000' },
  decisions: { type: 'string', default: '200000' },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
const TOKENS = boundedInt(NAME, 'tokens', opt.extra.tokens as string, 100, 200_000);
const DECISIONS = boundedInt(NAME, 'decisions', opt.extra.decisions as string, 1000, 10_000_000);
const BUDGET_MS = (120 + QUIET_WAIT + TARGETS.length * (WARMUP + 3 + ROUNDS * (SECONDS + 4)) + 60) * 2 * 1000;
const quiet = new Quiet(QUIET_WAIT);

function route(target: Target, backendUrl: string): Record<string, unknown> {
  return { prefix: PREFIX, targets: [backendUrl], ...(target === 'rules' ? { allow: RULES } : {}) };
}

/** Each gateway with a copy of the demo data of its own: a data file has one writer (its lock). */
async function startTarget(target: Target, runtime: Runtime, keys: SigningKey, backendUrl: string, tmp: string): Promise<Server> {
  const dataFile = join(tmp, `data-${target}.json`);
  copyFileSync(join(ROOT, 'config', 'demo-data.json'), dataFile);
  return gatewayServer(LABEL[target], await startGateway({
    name: target, runtime,
    settings: { LOG_LEVEL: 'warn', SIGNING_KEYS: keys.signingKeys, RATE_LIMITS: 'off', ROUTES: JSON.stringify([route(target, backendUrl)]), GATEWAY_DATA_FILE: dataFile },
  }));
}

/** 200 with the backend's answer for a valid token; on the rules gateway a path no rule names is 403. */
async function sanityCheck(target: Target, server: Server, token: string): Promise<void> {
  const ok = await fetch(`${server.url}${PATH}`, { headers: { authorization: `Bearer ${token}` } });
  const body = await ok.text();
  if (ok.status !== 200 || !body.includes('bench-backend')) throw new Error(`${server.label}: GET ${PATH} answered ${ok.status}: ${body.slice(0, 300)}`);
  const other = await fetch(`${server.url}${PREFIX}/other/1`, { headers: { authorization: `Bearer ${token}` } });
  await other.arrayBuffer();
  const want = target === 'rules' ? 403 : 200;
  if (other.status !== want) throw new Error(`${server.label}: GET ${PREFIX}/other/1 answered ${other.status}, expected ${want} (are the rules in force?)`);
}

/** gateway_policy_decisions_total of the last rule's allows. */
async function allowedByLast(server: Server): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^gateway_policy_decisions_total\\{route="${PREFIX}",rule="${LAST_RULE}",outcome="allow"\\} (\\d+)$`, 'm').exec(text);
  return Number(m?.[1] ?? 0);
}

interface Run extends LoadFigures {
  target: Target;
  round: number;
  backendCpuUsPerReq: number;
  /** Allows of the last rule per answered request (rules gateway): 1, give or take those in flight. */
  countedPerReq?: number;
  counted?: number;
}

async function measure(backend: Server, tokens: TokenSupply, target: Target, server: Server, seconds: number, round: number): Promise<Run> {
  const tokensFile = await tokens.fileFor(seconds);
  await quiet.wait(server.label);
  const before = target === 'rules' ? await allowedByLast(server) : 0;
  const figures = await measureLoad(bearerRun(server.url, PATH, tokensFile, CONNECTIONS, seconds), { server: server.pid, backend: backend.pid });
  if (!isRunning(server.proc)) throw new Error(`${server.label} died during the run:\n${server.err.tail()}\n${server.out.tail()}`);
  const run: Run = { target, round, ...figures };
  if (target === 'rules') {
    run.counted = (await allowedByLast(server)) - before;
    run.countedPerReq = run.counted / Math.max(figures.requests, 1);
  }
  return run;
}

function runLine(run: Run): string {
  return `${LABEL[run.target].padEnd(9)} ${fmt(run.rps).padStart(6)} req/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
    + `  server ${fmt(run.serverCpuUsPerReq)} µs/req (core ${fmt(100 * run.serverCoreUse)} %)  backend ${fmt(run.backendCpuUsPerReq)} µs/req  wrk ${fmt(run.clientCpuUsPerReq)} µs/req`
    + `  other load ${fmt(run.foreignCores, 2)}${run.countedPerReq === undefined ? '' : `  counted ${fmt(run.countedPerReq, 3)}/req`}`
    + `${run.non2xx + run.socketErrors > 0 ? `  ERRORS: ${run.non2xx} non-2xx, ${run.socketErrors} socket` : ''}`;
}

/**
 * µs per decision of the 20 rules for the bench's request, counter increment included: the
 * median of 5 passes. Each decision gets what a request gives admission: a new identity with a
 * frozen claims object, the path of another item, the peer as Node gives it on a dual-stack
 * listener (IPv4-mapped IPv6, parsed and unmapped), so the loop is not kinder than traffic.
 */
function decisionCost(): { usPerDecision: number; passes: number[] } {
  const config = configSchema.parse({ routes: [route('rules', 'http://127.0.0.1:9')] });
  const policy = compilePolicy(config.routes[0]!.allow, 'enforce')!;
  const counter = new Counter({ name: 'bench_policy_decisions_total', help: 'bench', labelNames: ['route', 'rule', 'outcome'], registers: [new Registry()] });
  const children = new Map<string, ReturnType<typeof counter.labels>>();
  // The client address as admission reads it: the peer (no trusted proxy), unmapped.
  const clientIp = createClientIp({ trustedProxies: [], clientAddressHeader: 'x-forwarded-for' });
  const req = { socket: { remoteAddress: '::ffff:127.0.0.1' }, headers: {} } as unknown as IncomingMessage;
  const once = (i: number) => {
    const claims = Object.freeze({ sub: `acct_bench_${i % ACCOUNTS}`, client_id: 'key_bench', jti: String(i), iat: i, iat_ms: i, exp: i + 900 });
    const identity = { accountId: claims.sub, keyId: 'key_bench', tokenId: claims.jti, issuedAt: i, issuedAtMs: i, expiresAt: i + 900, scopes: [], claims };
    const decision = policy.decide({ method: 'GET', url: `${PREFIX}/items/${i % 1000}`, identity, clientIp: () => clientIp(req) });
    if (decision.rule !== LAST_RULE) throw new Error(`the bench's request was decided by ${decision.rule}, not ${LAST_RULE}`);
    // As admission counts: the bound child found by outcome and rule.
    const key = `allow ${decision.rule}`;
    let child = children.get(key);
    if (child === undefined) children.set(key, child = counter.labels(PREFIX, decision.rule, 'allow'));
    child.inc();
  };
  for (let i = 0; i < 20_000; i++) once(i);
  const passes: number[] = [];
  for (let p = 0; p < 5; p++) {
    const start = process.cpuUsage();
    for (let i = 0; i < DECISIONS; i++) once(i);
    const used = process.cpuUsage(start);
    passes.push((used.user + used.system) / DECISIONS);
  }
  return { usPerDecision: median(passes), passes };
}

type Row = { target: Target } & LoadRow & { countedPerReq: number };

function summarize(runs: Run[]): Row[] {
  return TARGETS.map((target) => {
    const own = runs.filter((r) => r.target === target);
    return { target, ...loadRow(own, { backend: true }), countedPerReq: median(own.map((r) => r.countedPerReq ?? NaN)) };
  });
}

function ratios(runs: Run[]): Ratio[] {
  const paired = (metric: (r: Run) => number) => pairedRatio(runs, ROUNDS, { target: 'rules' }, { target: 'none' }, metric);
  return [
    { name: '20 rules / no rules, throughput', ...paired((r) => r.rps) },
    { name: '20 rules / no rules, p50 latency', ...paired((r) => r.p50Ms) },
    { name: '20 rules / no rules, p99 latency', ...paired((r) => r.p99Ms) },
    { name: '20 rules / no rules, CPU per request', ...paired((r) => r.serverCpuUsPerReq) },
  ];
}

function resultsTable(rows: Row[]): string {
  const lines = [
    '| gateway | req/s (median) | range over rounds | p50 ms | p99 ms | server CPU µs/req | server core use | backend CPU µs/req | wrk CPU µs/req | allows of the last rule / req | other load (cores) | non-2xx / socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(`| ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.rpsRange[0])}–${fmt(r.rpsRange[1])} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.serverCpuUsPerReq)} | ${fmt(100 * r.serverCoreUse)} % | ${fmt(r.backendCpuUsPerReq)} | ${fmt(r.clientCpuUsPerReq)} | ${r.target === 'rules' ? fmt(r.countedPerReq, 3) : '—'} | ${fmt(r.foreignCores, 2)} | ${r.non2xx} / ${r.socketErrors} of ${r.requests} |`);
  }
  return lines.join('\n');
}

/** A rules run that did not count about one allow of the last rule per answered request. */
function countingProblems(runs: Run[]): string[] {
  return runs.filter((r) => r.target === 'rules' && r.round >= 0 && ((r.counted ?? 0) < r.requests || (r.counted ?? 0) > r.requests + CONNECTIONS))
    .map((r) => `round ${r.round + 1}: ${r.counted} allows of "${LAST_RULE}" for ${r.requests} answered`);
}

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const keys = makeSigningKey();
  const backend = await startBenchServer('backend', 'backend.ts', CLIENT_CORE, {}, { readyPath: PATH, readyStatus: 200 });
  const servers = new Map<Target, Server>();
  for (const target of TARGETS) servers.set(target, await startTarget(target, runtime, keys, backend.url, tmp));
  const tokens = await TokenSupply.mint(NAME, keys.privateKey, tmp, TOKENS, ACCOUNTS);
  const firstToken = readFileSync(tokens.file, 'utf8').slice(0, 4096).split('\n')[0]!;
  for (const [target, server] of servers) await sanityCheck(target, server, firstToken);
  const env = {
    ...runEnv(started, source, runtime),
    pinning: PIN ? `gateway under test on core ${SERVER_CORE} (\`taskset -c ${SERVER_CORE}\`); wrk, the backend and this script on core ${CLIENT_CORE}` : 'none (needs taskset and 2+ cores)',
  };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; runtime ${runtime.mode}; gateway src/ at ${source}; pinning: ${env.pinning}`);
  log(`${NAME}: sanity checks passed (200 through both gateways; a path no rule names is 403 on the rules gateway only)`);

  const runs = await rotatedRounds({
    targets: TARGETS, rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, quiet, label: (t) => LABEL[t], line: runLine,
    measure: (target, seconds, round) => measure(backend, tokens, target, servers.get(target)!, seconds, round),
  });
  const logged = [...servers.values()].filter((s) => s.out.lines.length > 0).map((s) => `${s.label} ${s.out.lines.length} line(s)`);
  for (const server of servers.values()) await stopChild(server.proc);

  const decision = decisionCost();
  const rows = summarize(runs);
  const baseCpu = rows.find((r) => r.target === 'none')!.serverCpuUsPerReq;
  const share = decision.usPerDecision / baseCpu;
  const added = median(perRound(runs, ROUNDS, { target: 'rules' }, { target: 'none' }, (a, b) => a.serverCpuUsPerReq - b.serverCpuUsPerReq));
  const counting = countingProblems(runs);
  const errors = rows.reduce((a, r) => a + r.non2xx + r.socketErrors, 0);
  const ratioList = ratios(runs);
  const report: LoadReport = {
    table: resultsTable(rows),
    ratios: [...ratioList.map(ratioLine), `- 20 rules − no rules, CPU per request: **${fmt(added)} µs** (median of the per-round differences; below what this VM resolves in one run)`],
    rounds: roundsTableOf(runs, ROUNDS, ['gateway'], TARGETS.map((target) => ({ labels: [LABEL[target]], match: { target } })), (r) => r.rps),
  };
  const verdict = `**${fmt(decision.usPerDecision, 2)} µs** per decision of the 20 rules (a new identity, path and IPv4-mapped peer each, counter increment included; median of 5 passes of ${DECISIONS}: ${decision.passes.map((p) => fmt(p, 2)).join(', ')} µs), **${fmt(100 * share, 2)} %** of the no-rules gateway's ${fmt(baseCpu)} µs of CPU per proxied request: ${share <= TARGET_SHARE ? 'within' : 'OVER'} the ${fmt(100 * TARGET_SHARE)} % target`;
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}`,
    `- gateways: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, LOG_LEVEL=warn, RATE_LIMITS=off, one Ed25519 signing key; \`ROUTES=[{"prefix":"${PREFIX}","targets":[<backend>]}]\`, and for \`20 rules\` with \`allow\`: 19 rules \`{"methods":["GET","POST"],"paths":["/bench/items/:id","/bench/team-<i>/*rest"],"claims":{"org":"org-<i>"}}\` that match the request's method and path and fail on the claim, then \`${JSON.stringify(RULES[19])}\`, which allows it (all 20 asked, the client address parsed)`,
    `- pinning: ${env.pinning}`,
    `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, \`GET ${PATH}\`, each request with the next of ${TOKENS} distinct tokens of ${ACCOUNTS} accounts; ${ROUNDS} rounds × ${SECONDS} s per gateway after a ${WARMUP} s warm-up, the order rotated each round`,
    `- decision alone: ${verdict}`,
    stolenLine(runs),
    otherLoadLine(runs, QUIET_WAIT, 'run'),
    '',
    ...loadReportLines(report),
    '',
    logged.length === 0 ? 'No gateway logged anything (LOG_LEVEL=warn) during the runs.' : `Gateways logged at warn or above: ${logged.join(', ')}.`,
    counting.length === 0 ? `Every run of the rules gateway counted one allow of rule "${LAST_RULE}" per answered request.` : `Counting problems: ${counting.join('; ')}.`,
  ].join('\n');

  process.stdout.write(loadReportText(report));
  process.stdout.write(`\ndecision alone: ${verdict}\n`);
  writeRawFigures(RESULTS, 'policies', started, { env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, tokens: TOKENS, decisions: DECISIONS, rules: RULES }, rows, ratios: ratioList, decision, share, added, counting, runs });
  const failures = [
    ...(errors > 0 ? [`${errors} request(s) were not answered 2xx`] : []),
    ...(counting.length > 0 ? [`counting: ${counting.join('; ')}`] : []),
  ];
  updateReport(NAME, REPORT, generated, { noReport: opt.noReport, failure: failures.length > 0 ? failures.join('; ') : undefined });
}

runBench({ name: NAME, slug: 'policies', budgetMs: BUDGET_MS, tools: ['wrk'], runtime: opt.runtime }, main);
