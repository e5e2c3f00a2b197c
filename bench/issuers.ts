/**
 * What a trusted issuer's token costs a proxied request against the gateway's own
 * (docs/identity-providers.md): one gateway, one route accepting both `"self"` and an issuer
 * this script serves (a tiny JWKS server on node:http with an RS256 public key), loaded once
 * with the gateway's own EdDSA tokens and once with the issuer's RS256 tokens (minted by jose),
 * each set small enough that every token is in the gateway's verified-token cache after its
 * first use. The target (issue 29): external RS256 cached ≥ 0.95× the gateway's own token in
 * req/s. Results: a table on stdout, bench/reports/issuers.md (method and findings: "Issuers:
 * an external RS256 token against the gateway's own" in bench/README.md), and
 * bench/results/issuers-<time>.json.
 *
 *   node --import tsx bench/issuers.ts [--rounds 5 --seconds 5 --warmup 2 --connections 64
 *                                       --tokens 1000 --quiet-wait 120 --runtime dist|tsx
 *                                       --no-report]
 *
 * As bench/policies.ts: wrk, one thread, keep-alive connections, closed loop, each request with
 * the next of --tokens tokens in turn; the gateway pinned to core 1, wrk, the backend, the JWKS
 * server and this script to core 0; rounds rotate the order; medians over rounds, ratios
 * medians of the per-round ratios. The external runs must count one valid issuer token per
 * answered request in gateway_issuer_tokens_total (the issuer's path was taken, not the
 * gateway's own), and the JWKS must have been fetched once (the key set was cached too).
 */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { exportJWK, SignJWT } from 'jose';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { REPORTS, RESULTS, ROOT, runEnv, startGateway, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, nproc, PIN, Quiet, SERVER_CORE } from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { gatewayServer, startNodeServer as startBenchServer, type Server } from './lib/servers.js';
import { loadReportLines, loadReportText, loadRow, otherLoadLine, pairedRatio, ratioLine, roundsTable as roundsTableOf, stolenLine, type LoadReport, type LoadRow, type Ratio } from './lib/summary.js';
import { makeSigningKey, TokenSupply } from './lib/tokens.js';
import { bearerRun, measureLoad, type LoadFigures } from './lib/wrk.js';

const NAME = 'bench:issuers';
const REPORT: Report = { file: join(REPORTS, 'issuers.md'), title: 'Issuers: an external RS256 token against the gateway\'s own', script: `npm run ${NAME}` };
const PATH = '/bench/items/42';
const PREFIX = '/bench';
const ACCOUNTS = 100;
const AUDIENCE = 'bench-api';
const EXTERNAL_KID = 'bench-rs256';
/** The external tokens' lifetime: longer than any run of this bench. */
const EXTERNAL_LIFETIME_S = 4 * 3600;
/** The target: external RS256 (cached) req/s over the gateway's own token's. */
const TARGET_RATIO = 0.95;

type Target = 'self' | 'external';
const LABEL: Record<Target, string> = { self: 'own EdDSA', external: 'issuer RS256' };
const TARGETS: Target[] = ['self', 'external'];

const opt = parseRunOptions(NAME, { rounds: 5, seconds: 5, connections: 64 }, {
  tokens: { type: 'string', default: '1000' },
});
const { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, quietWait: QUIET_WAIT } = opt;
// At most the verified-token cache's default 50 000 entries: every token is a hit after its first use.
const TOKENS = boundedInt(NAME, 'tokens', opt.extra.tokens as string, 10, 20_000);
const BUDGET_MS = (120 + QUIET_WAIT + TARGETS.length * (WARMUP + 3 + ROUNDS * (SECONDS + 4)) + 60) * 2 * 1000;
const quiet = new Quiet(QUIET_WAIT);

/** The issuer: an RS256 key pair, its public half served as a JWKS; counts the fetches. */
interface Issuer {
  url: string;
  jwksUri: string;
  server: HttpServer;
  fetches: () => number;
  privateKey: KeyObject;
}

async function startIssuer(): Promise<Issuer> {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...(await exportJWK(publicKey)), kid: EXTERNAL_KID, alg: 'RS256', use: 'sig' };
  const body = JSON.stringify({ keys: [jwk] });
  let fetches = 0;
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/jwks.json') {
      fetches++;
      res.writeHead(200, { 'content-type': 'application/jwk-set+json', 'cache-control': 'max-age=3600' }).end(body);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, jwksUri: `${url}/jwks.json`, server, fetches: () => fetches, privateKey };
}

/** `count` distinct RS256 tokens of the issuer (jose), one a line, into `file`. */
async function mintExternalTokens(issuer: Issuer, file: string, count: number): Promise<string[]> {
  const start = performance.now();
  const now = Math.floor(Date.now() / 1000);
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    tokens.push(await new SignJWT({ scope: 'items.read', client_id: 'bench-client' })
      .setProtectedHeader({ alg: 'RS256', kid: EXTERNAL_KID, typ: 'at+jwt' })
      .setIssuer(issuer.url).setAudience(AUDIENCE).setSubject(`ext_acct_${i % ACCOUNTS}`)
      .setJti(randomBytes(16).toString('base64url')).setIssuedAt(now).setExpirationTime(now + EXTERNAL_LIFETIME_S)
      .sign(issuer.privateKey));
  }
  if (new Set(tokens).size !== tokens.length) throw new Error('minted external tokens are not distinct');
  writeFileSync(file, `${tokens.join('\n')}\n`);
  log(`${NAME}: ${count} distinct RS256 issuer token(s) (${Math.min(count, ACCOUNTS)} accounts) minted by jose in ${fmt((performance.now() - start) / 1000, 1)} s`);
  return tokens;
}

function routes(issuer: Issuer, backendUrl: string): string {
  return JSON.stringify([{ prefix: PREFIX, targets: [backendUrl], issuers: ['self', issuer.url] }]);
}

function trustedIssuers(issuer: Issuer): string {
  return JSON.stringify([{ issuer: issuer.url, audience: AUDIENCE, jwksUri: issuer.jwksUri, algorithms: ['RS256'] }]);
}

async function startTarget(runtime: Runtime, signingKeys: string, issuer: Issuer, backendUrl: string, tmp: string): Promise<Server> {
  const dataFile = join(tmp, 'data.json');
  copyFileSync(join(ROOT, 'config', 'demo-data.json'), dataFile);
  return gatewayServer('gateway', await startGateway({
    name: 'issuers', runtime,
    settings: { LOG_LEVEL: 'warn', SIGNING_KEYS: signingKeys, RATE_LIMITS: 'off', ROUTES: routes(issuer, backendUrl), TRUSTED_ISSUERS: trustedIssuers(issuer), GATEWAY_DATA_FILE: dataFile },
  }));
}

/** gateway_issuer_tokens_total of the issuer's valid tokens. */
async function validIssuerTokens(server: Server, issuer: Issuer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('gateway_issuer_tokens_total{') && l.includes(`issuer="${issuer.url}"`) && l.includes('outcome="valid"'));
  return Number(line?.split(' ').at(-1) ?? 0);
}

/** Both tokens reach the backend; a token of the issuer for another audience is refused. */
async function sanityCheck(server: Server, own: string, external: string, wrongAudience: string): Promise<void> {
  for (const [what, token] of [['own', own], ['external', external]] as const) {
    const res = await fetch(`${server.url}${PATH}`, { headers: { authorization: `Bearer ${token}` } });
    const body = await res.text();
    if (res.status !== 200 || !body.includes('bench-backend')) throw new Error(`GET ${PATH} with the ${what} token answered ${res.status}: ${body.slice(0, 300)}`);
  }
  const refused = await fetch(`${server.url}${PATH}`, { headers: { authorization: `Bearer ${wrongAudience}` } });
  await refused.arrayBuffer();
  if (refused.status !== 401) throw new Error(`an issuer token for another audience answered ${refused.status}, expected 401 (is the issuer's token checked?)`);
}

interface Run extends LoadFigures {
  target: Target;
  round: number;
  backendCpuUsPerReq: number;
  /** Valid issuer tokens counted per answered request: 1 on external runs, 0 on own-token runs. */
  countedPerReq: number;
  counted: number;
}

async function measure(backend: Server, server: Server, issuer: Issuer, files: { self: TokenSupply; external: string }, target: Target, seconds: number, round: number): Promise<Run> {
  const tokensFile = target === 'self' ? await files.self.fileFor(seconds) : files.external;
  await quiet.wait(LABEL[target]);
  const before = await validIssuerTokens(server, issuer);
  const figures = await measureLoad(bearerRun(server.url, PATH, tokensFile, CONNECTIONS, seconds), { server: server.pid, backend: backend.pid });
  if (!isRunning(server.proc)) throw new Error(`the gateway died during the run:\n${server.err.tail()}\n${server.out.tail()}`);
  const counted = (await validIssuerTokens(server, issuer)) - before;
  return { target, round, ...figures, counted, countedPerReq: counted / Math.max(figures.requests, 1) };
}

function runLine(run: Run): string {
  return `${LABEL[run.target].padEnd(12)} ${fmt(run.rps).padStart(6)} req/s  p50 ${fmt(run.p50Ms, 2)} ms  p99 ${fmt(run.p99Ms, 2)} ms`
    + `  server ${fmt(run.serverCpuUsPerReq)} µs/req (core ${fmt(100 * run.serverCoreUse)} %)  backend ${fmt(run.backendCpuUsPerReq)} µs/req  wrk ${fmt(run.clientCpuUsPerReq)} µs/req`
    + `  other load ${fmt(run.foreignCores, 2)}  issuer tokens ${fmt(run.countedPerReq, 3)}/req`
    + `${run.non2xx + run.socketErrors > 0 ? `  ERRORS: ${run.non2xx} non-2xx, ${run.socketErrors} socket` : ''}`;
}

type Row = { target: Target } & LoadRow & { countedPerReq: number };

function summarize(runs: Run[]): Row[] {
  return TARGETS.map((target) => {
    const own = runs.filter((r) => r.target === target);
    return { target, ...loadRow(own, { backend: true }), countedPerReq: median(own.map((r) => r.countedPerReq)) };
  });
}

function ratios(runs: Run[]): Ratio[] {
  const paired = (metric: (r: Run) => number) => pairedRatio(runs, ROUNDS, { target: 'external' }, { target: 'self' }, metric);
  const throughput = paired((r) => r.rps);
  return [
    { name: 'issuer RS256 / own EdDSA, throughput', ...throughput, target: { text: `≥ ${TARGET_RATIO}×`, met: throughput.median >= TARGET_RATIO } },
    { name: 'issuer RS256 / own EdDSA, p50 latency', ...paired((r) => r.p50Ms) },
    { name: 'issuer RS256 / own EdDSA, p99 latency', ...paired((r) => r.p99Ms) },
    { name: 'issuer RS256 / own EdDSA, CPU per request', ...paired((r) => r.serverCpuUsPerReq) },
  ];
}

function resultsTable(rows: Row[]): string {
  const lines = [
    '| token | req/s (median) | range over rounds | p50 ms | p99 ms | server CPU µs/req | server core use | backend CPU µs/req | wrk CPU µs/req | valid issuer tokens / req | other load (cores) | non-2xx / socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(`| ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.rpsRange[0])}–${fmt(r.rpsRange[1])} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.serverCpuUsPerReq)} | ${fmt(100 * r.serverCoreUse)} % | ${fmt(r.backendCpuUsPerReq)} | ${fmt(r.clientCpuUsPerReq)} | ${fmt(r.countedPerReq, 3)} | ${fmt(r.foreignCores, 2)} | ${r.non2xx} / ${r.socketErrors} of ${r.requests} |`);
  }
  return lines.join('\n');
}

/** An external run that did not count one valid issuer token per answered request, or an own-token run that counted any. */
function countingProblems(runs: Run[]): string[] {
  return runs.filter((r) => r.round >= 0 && (r.target === 'external' ? r.counted < r.requests || r.counted > r.requests + CONNECTIONS : r.counted !== 0))
    .map((r) => `${LABEL[r.target]} round ${r.round + 1}: ${r.counted} valid issuer tokens for ${r.requests} answered`);
}

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const keys = makeSigningKey();
  const issuer = await startIssuer();
  try {
    const backend = await startBenchServer('backend', 'backend.ts', CLIENT_CORE, {}, { readyPath: PATH, readyStatus: 200 });
    const server = await startTarget(runtime, keys.signingKeys, issuer, backend.url, tmp);
    // Minted after the gateway started: it refuses its own tokens issued before (memory resets).
    const own = await TokenSupply.mint(NAME, keys.privateKey, tmp, TOKENS, ACCOUNTS, 'own.txt');
    const externalFile = join(tmp, 'external.txt');
    const external = await mintExternalTokens(issuer, externalFile, TOKENS);
    const wrongAudience = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: EXTERNAL_KID }).setIssuer(issuer.url).setAudience('another-api')
      .setSubject('ext_acct_0').setIssuedAt().setExpirationTime('10m').sign(issuer.privateKey);
    await sanityCheck(server, readFileSync(own.file, 'utf8').split('\n')[0]!, external[0]!, wrongAudience);
    const env = {
      ...runEnv(started, source, runtime),
      pinning: PIN ? `gateway on core ${SERVER_CORE} (\`taskset -c ${SERVER_CORE}\`); wrk, the backend, the JWKS server and this script on core ${CLIENT_CORE}` : 'none (needs taskset and 2+ cores)',
    };
    log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; runtime ${runtime.mode}; gateway src/ at ${source}; pinning: ${env.pinning}`);
    log(`${NAME}: sanity checks passed (200 with both tokens; an issuer token for another audience is 401)`);

    const runs = await rotatedRounds({
      targets: TARGETS, rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, quiet, label: (t) => LABEL[t], line: runLine,
      measure: (target, seconds, round) => measure(backend, server, issuer, { self: own, external: externalFile }, target, seconds, round),
    });
    const logged = server.out.lines.length;
    const jwksFetches = issuer.fetches();
    await stopChild(server.proc);

    const rows = summarize(runs);
    const ratioList = ratios(runs);
    const counting = countingProblems(runs);
    const errors = rows.reduce((a, r) => a + r.non2xx + r.socketErrors, 0);
    const report: LoadReport = {
      table: resultsTable(rows),
      ratios: ratioList.map(ratioLine),
      rounds: roundsTableOf(runs, ROUNDS, ['token'], TARGETS.map((target) => ({ labels: [LABEL[target]], match: { target } })), (r) => r.rps),
    };
    const generated = [
      runHeading(env.date, NAME),
      '',
      `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}`,
      `- gateway: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, LOG_LEVEL=warn, RATE_LIMITS=off, one Ed25519 signing key; \`ROUTES=[{"prefix":"${PREFIX}","targets":[<backend>],"issuers":["self",<issuer>]}]\`, \`TRUSTED_ISSUERS=[{"issuer":<issuer>,"audience":"${AUDIENCE}","jwksUri":<issuer>/jwks.json,"algorithms":["RS256"]}]\`; the issuer a node:http server in this script serving one RSA-2048 public key as a JWKS`,
      `- tokens: ${TOKENS} distinct own EdDSA tokens (the gateway's header and claims, bench/lib/tokens.ts) and ${TOKENS} distinct issuer RS256 tokens (jose; \`iss\`, \`aud\`, \`sub\`, \`scope\`, \`jti\`, \`iat\`, \`exp\`; header \`kid\`, \`typ: at+jwt\`), each of ${ACCOUNTS} accounts: far fewer than the verified-token cache holds (50 000), so after the warm-up every request is a cache hit for both`,
      `- pinning: ${env.pinning}`,
      `- load: wrk, 1 thread, ${CONNECTIONS} keep-alive connections, closed loop, \`GET ${PATH}\`, each request with the next token of its set in turn; ${ROUNDS} rounds × ${SECONDS} s per token after a ${WARMUP} s warm-up, the order rotated each round`,
      stolenLine(runs),
      otherLoadLine(runs, QUIET_WAIT, 'run'),
      '',
      ...loadReportLines(report),
      '',
      `The issuer's JWKS was fetched ${jwksFetches} time(s) in the whole run.`,
      logged === 0 ? 'The gateway logged nothing (LOG_LEVEL=warn) during the runs.' : `The gateway logged ${logged} line(s) at warn or above.`,
      counting.length === 0 ? 'Every issuer run counted one valid issuer token per answered request in gateway_issuer_tokens_total, and no own-token run counted any.' : `Counting problems: ${counting.join('; ')}.`,
    ].join('\n');

    process.stdout.write(loadReportText(report));
    process.stdout.write(`\nJWKS fetches: ${jwksFetches}\n`);
    writeRawFigures(RESULTS, 'issuers', started, { env, options: { rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, connections: CONNECTIONS, tokens: TOKENS }, rows, ratios: ratioList, counting, jwksFetches, runs });
    const failures = [
      ...(errors > 0 ? [`${errors} request(s) were not answered 2xx`] : []),
      ...(counting.length > 0 ? [`counting: ${counting.join('; ')}`] : []),
      ...(jwksFetches !== 1 ? [`the JWKS was fetched ${jwksFetches} times, expected once (keys not cached?)`] : []),
    ];
    updateReport(NAME, REPORT, generated, { noReport: opt.noReport, failure: failures.length > 0 ? failures.join('; ') : undefined });
  } finally {
    issuer.server.closeAllConnections();
    issuer.server.close();
  }
}

runBench({ name: NAME, slug: 'issuers', budgetMs: BUDGET_MS, tools: ['wrk'], runtime: opt.runtime }, main);
