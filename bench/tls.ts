/**
 * TLS and HTTP/2 at the edge: the gateway's public proxied route over HTTP/1.1 in cleartext,
 * over HTTP/1.1 with TLS (wrk) and over HTTP/2 with TLS (h2load), beside a bare Node proxy
 * (bench/servers/bare.ts: cleartext, TLS, and HTTP/2 on the stream API, what TLS and HTTP/2
 * cost Node itself) and nginx terminating TLS in front of the same backend (HTTP/1.1 and
 * HTTP/2 alike); and TLS handshakes per second, full and resumed (`openssl s_time`), against
 * both. Results: a table on stdout, bench/reports/tls.md (method: "TLS and HTTP/2: gateway vs
 * nginx" in bench/README.md), and bench/results/tls-<time>.json.
 *
 *   npm run bench:tls [-- --rounds 3 --seconds 5 --warmup 2 --connections 32 --streams 4
 *                         --quiet-wait 120 --runtime dist|tsx --no-report]
 *
 * Targets of the issue: HTTP/2 over TLS at least 1.0× HTTP/1.1 over TLS (requests per second),
 * and TLS adding at most 20 % CPU per request to a kept-alive proxied request.
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as connectHttp2 } from 'node:http2';
import { get } from 'node:https';
import { join } from 'node:path';
import { parseRunOptions, boundedInt } from './lib/cli.js';
import { cleanEnv, REPORTS, RESULTS, ROOT, runEnv, waitReady, type Runtime } from './lib/gateway.js';
import { CLIENT_CORE, firstLine, foreignCores, freePort, nproc, pinned, PIN, processCpuSeconds, Quiet, sampleLoad, SERVER_CORE, stolenCores } from './lib/machine.js';
import { isRunning, Output, stopChild, track } from './lib/processes.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { rotatedRounds, runBench, type BenchRun } from './lib/run.js';
import { startNodeServer, type Server } from './lib/servers.js';
import { measureLoad, type LoadFigures } from './lib/wrk.js';

const NAME = 'bench:tls';
const REPORT: Report = { file: join(REPORTS, 'tls.md'), title: 'TLS and HTTP/2: gateway vs nginx', script: `npm run ${NAME}` };
const PATH = '/bench/items/42';
const PLAIN_LUA = join(ROOT, 'bench', 'wrk', 'plain.lua');

const opt = parseRunOptions(NAME, { rounds: 3, seconds: 5, connections: 32 }, { streams: { type: 'string', default: '4' }, 'handshake-seconds': { type: 'string', default: '3' } });
const STREAMS = boundedInt(NAME, 'streams', opt.extra.streams as string, 1, 100);
const HANDSHAKE_SECONDS = boundedInt(NAME, 'handshake-seconds', opt.extra['handshake-seconds'] as string, 1, 30);
/** h2load's connections: the same requests in flight as wrk's, `STREAMS` on each. */
const H2_CONNECTIONS = Math.max(1, Math.round(opt.connections / STREAMS));

type Target = 'gw-h1' | 'gw-tls-h1' | 'gw-tls-h2' | 'gw-tls-h2-one' | 'bare-h1' | 'bare-tls-h1' | 'bare-tls-h2' | 'nginx-tls-h1' | 'nginx-tls-h2';
const TARGETS: readonly Target[] = ['gw-h1', 'gw-tls-h1', 'gw-tls-h2', 'gw-tls-h2-one', 'bare-h1', 'bare-tls-h1', 'bare-tls-h2', 'nginx-tls-h1', 'nginx-tls-h2'];
const LABEL: Record<Target, string> = {
  'bare-h1': 'bare Node proxy, HTTP/1.1 cleartext',
  'bare-tls-h1': 'bare Node proxy, HTTP/1.1 over TLS',
  'bare-tls-h2': 'bare Node proxy, HTTP/2 over TLS (stream API)',
  'gw-h1': 'gateway, HTTP/1.1 cleartext',
  'gw-tls-h1': 'gateway, HTTP/1.1 over TLS',
  'gw-tls-h2': 'gateway, HTTP/2 over TLS',
  'gw-tls-h2-one': 'gateway, HTTP/2 over TLS, 1 connection',
  'nginx-tls-h1': 'nginx, HTTP/1.1 over TLS',
  'nginx-tls-h2': 'nginx, HTTP/2 over TLS',
};

interface Run extends LoadFigures {
  target: Target;
  round: number;
}

interface Servers {
  backend: Server;
  gwPlain: Server;
  gwTls: Server;
  barePlain: Server;
  bareTls: Server;
  bareTlsH2: Server;
  nginx: Server;
}

/** An ECDSA P-256 certificate for 127.0.0.1, signed by a CA of the run's own. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  const run = (args: string[]) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
  };
  run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Bench CA']);
  writeFileSync(join(dir, 'leaf.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n');
  run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=127.0.0.1']);
  run(['x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '2', '-extfile', 'leaf.ext']);
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'leaf.pem'), key: join(dir, 'leaf.key') };
}

/** Polls `url` (trusting `ca`) until it answers 200; throws if the process exits or 20 s pass. */
async function waitHttps(url: string, ca: string, server: Server, http2 = false): Promise<void> {
  const deadline = Date.now() + 20_000;
  let lastError = '';
  for (;;) {
    if (!isRunning(server.proc)) throw new Error(`${server.label} exited:\n${server.err.tail()}`);
    const status = await new Promise<number>((resolve) => {
      const failed = (e: Error) => { lastError = e.message; resolve(0); };
      if (!http2) return void get(url, { ca: readFileSync(ca, 'utf8'), agent: false }, (res) => { res.resume(); resolve(res.statusCode ?? 0); }).on('error', failed);
      const session = connectHttp2(new URL(url).origin, { ca: readFileSync(ca, 'utf8') }).on('error', failed);
      const done = (status: number) => { session.destroy(); resolve(status); };
      session.request({ ':path': new URL(url).pathname }).on('response', (head) => done(Number(head[':status']))).on('error', (e: Error) => { lastError = e.message; done(0); }).end();
    });
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${server.label} not ready on ${url} (${lastError}):\n${server.err.tail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function copyOf(from: string, to: string): string {
  copyFileSync(from, to);
  return to;
}

/** The gateway, pinned to the server core, with one public route to the backend (and TLS when `tls`). */
async function startGatewayOn(runtime: Runtime, dir: string, backendUrl: string, label: string, tls?: { cert: string; key: string; ca: string }): Promise<Server> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...cleanEnv(), NODE_ENV: 'production', ALLOW_DEMO_DATA: 'true', HOST: '127.0.0.1', PORT: String(port), RATE_LIMITS: 'off', LOG_LEVEL: 'warn',
    // Each a copy of the demo data of its own: the data file has one writer (a lock).
    GATEWAY_DATA_FILE: copyOf(join(ROOT, 'config', 'demo-data.json'), join(dir, `data-${port}.json`)),
    ROUTES: JSON.stringify([{ name: 'bench', prefix: '/bench', targets: [backendUrl], auth: 'public' }]),
    ...(tls === undefined ? {} : { TLS_CERT_FILE: tls.cert, TLS_KEY_FILE: tls.key }),
  };
  const [cmd, args] = pinned(SERVER_CORE, process.execPath, runtime.entry);
  const proc = track(spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] }));
  const scheme = tls === undefined ? 'http' : 'https';
  const server: Server = { label, proc, pid: proc.pid!, url: `${scheme}://127.0.0.1:${port}`, err: new Output(proc.stderr), out: new Output(null) };
  if (tls === undefined) await waitReady(server.url, '/readyz', proc, label, () => server.err.tail());
  else await waitHttps(`${server.url}/readyz`, tls.ca, server);
  return server;
}

/**
 * The bare Node proxy over TLS (bench/servers/bare.ts with the run's certificate), on the server
 * core: node:https's server, or with `http2` node:http2's on the stream API.
 */
async function startBareTls(backendUrl: string, tls: { cert: string; key: string; ca: string }, http2 = false): Promise<Server> {
  const port = await freePort();
  const env = { ...cleanEnv(), NODE_ENV: 'production', PORT: String(port), BACKEND: backendUrl, TLS_CERT_FILE: tls.cert, TLS_KEY_FILE: tls.key, HTTP2: String(http2) };
  const [cmd, args] = pinned(SERVER_CORE, process.execPath, [join(ROOT, 'bench', 'servers', 'bare.ts')]);
  const proc = track(spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] }));
  const server: Server = { label: http2 ? 'bare Node proxy (TLS, HTTP/2)' : 'bare Node proxy (TLS)', proc, pid: proc.pid!, url: `https://127.0.0.1:${port}`, err: new Output(proc.stderr), out: new Output(null) };
  await waitHttps(`${server.url}${PATH}`, tls.ca, server, http2);
  return server;
}

/** nginx terminating TLS (HTTP/2 and HTTP/1.1 by ALPN) in front of the backend: one process, keep-alive upstream, no access log. */
async function startNginx(dir: string, backendUrl: string, tls: { cert: string; key: string; ca: string }): Promise<Server> {
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, `daemon off;
master_process off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'nginx-error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  # Connections live through a run, as the gateway's do (nginx's default ends them after 1000 requests, HTTP/2 too).
  keepalive_requests 10000000;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream backend { server ${new URL(backendUrl).host}; keepalive 64; }
  server {
    listen 127.0.0.1:${port} ssl http2;
    ssl_certificate ${tls.cert};
    ssl_certificate_key ${tls.key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:bench:1m;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`);
  const [cmd, args] = pinned(SERVER_CORE, 'nginx', ['-c', conf, '-p', dir]);
  const proc = track(spawn(cmd, args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] }));
  const server: Server = { label: 'nginx', proc, pid: proc.pid!, url: `https://127.0.0.1:${port}`, err: new Output(proc.stderr), out: new Output(null) };
  await waitHttps(`${server.url}${PATH}`, tls.ca, server);
  return server;
}

/** One h2load run (one thread, on the client core): the same figures as a wrk run. */
async function measureH2(url: string, seconds: number, serverPid: number, { connections, streams }: { connections: number; streams: number }): Promise<LoadFigures> {
  const cpuBefore = processCpuSeconds(serverPid);
  const loadBefore = sampleLoad();
  const clientBefore = process.cpuUsage();
  const [cmd, args] = pinned(CLIENT_CORE, 'h2load', ['-t1', `-c${connections}`, `-m${streams}`, `-D${seconds}`, url]);
  const proc = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  const out = new Output(proc.stdout);
  const code = await new Promise<number | null>((done) => proc.once('close', (c) => done(c)));
  const loadAfter = sampleLoad();
  const cpu = processCpuSeconds(serverPid) - cpuBefore;
  const text = out.lines.join('\n');
  const finished = /finished in ([\d.]+)s, ([\d.]+) req\/s/.exec(text);
  const requests = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(text);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(text);
  const latency = /time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(text);
  if (code !== 0 || finished === null || requests === null || codes === null) throw new Error(`h2load failed (exit ${code}):\n${out.tail()}`);
  const ms = (v: string, unit: string) => Number(v) * (unit === 'us' ? 0.001 : unit === 's' ? 1000 : 1);
  const done = Number(requests[2]);
  const ok = Number(codes[1]);
  const other = Number(codes[2]) + Number(codes[3]) + Number(codes[4]);
  const elapsed = Number(finished[1]);
  const client = process.cpuUsage(clientBefore);
  return {
    requests: done, sent: Number(requests[1]), non2xx: other, socketErrors: Number(requests[4]) + Number(requests[5]) + Number(requests[6]),
    rps: ok / elapsed,
    // h2load prints min, max and mean per request: the mean stands in for the median here.
    p50Ms: latency === null ? NaN : ms(latency[5]!, latency[6]!), p99Ms: NaN, maxMs: latency === null ? NaN : ms(latency[3]!, latency[4]!),
    serverCpuUsPerReq: (cpu * 1e6) / Math.max(done, 1), serverCoreUse: cpu / elapsed,
    clientCpuUsPerReq: ((client.user + client.system) / Math.max(done, 1)), clientCoreUse: NaN,
    foreignCores: foreignCores(loadBefore, loadAfter), stolenCores: stolenCores(loadBefore, loadAfter),
  };
}

async function measure(s: Servers, target: Target, seconds: number, round: number): Promise<Run> {
  const server = { 'gw-h1': s.gwPlain, 'gw-tls-h1': s.gwTls, 'gw-tls-h2': s.gwTls, 'gw-tls-h2-one': s.gwTls, 'bare-h1': s.barePlain, 'bare-tls-h1': s.bareTls, 'bare-tls-h2': s.bareTlsH2, 'nginx-tls-h1': s.nginx, 'nginx-tls-h2': s.nginx }[target];
  const url = `${server.url}${PATH}`;
  // The same requests in flight as wrk's: spread over connections, or all on one (as a browser,
  // or a load balancer speaking HTTP/2 to the gateway, multiplexes them).
  const shape = target === 'gw-tls-h2-one' ? { connections: 1, streams: opt.connections } : { connections: H2_CONNECTIONS, streams: STREAMS };
  const figures = target.includes('h2')
    ? await measureH2(url, seconds, server.pid, shape)
    : await measureLoad({ script: PLAIN_LUA, url, connections: opt.connections, seconds }, { server: server.pid });
  return { ...figures, target, round };
}

/** Handshakes per second (`openssl s_time`, on the client core): new sessions, or resumed ones. */
function handshakes(url: string, mode: 'new' | 'reuse', serverPid: number): { perSecond: number; serverCpuUsPer: number } {
  const { host } = new URL(url);
  const cpuBefore = processCpuSeconds(serverPid);
  const [cmd, args] = pinned(CLIENT_CORE, 'openssl', ['s_time', '-connect', host, `-${mode}`, '-time', String(HANDSHAKE_SECONDS)]);
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: (HANDSHAKE_SECONDS + 20) * 1000 });
  const cpu = processCpuSeconds(serverPid) - cpuBefore;
  const m = /(\d+) connections in ([\d.]+) real seconds/.exec(r.stdout);
  if (m === null) throw new Error(`openssl s_time failed: ${r.stdout.slice(-500)} ${r.stderr.slice(-500)}`);
  const count = Number(m[1]);
  return { perSecond: count / Number(m[2]), serverCpuUsPer: (cpu * 1e6) / Math.max(count, 1) };
}

function line(run: Run): string {
  return `${LABEL[run.target].padEnd(28)} ${fmt(run.rps).padStart(7)} req/s  server ${fmt(run.serverCpuUsPerReq).padStart(4)} µs CPU/req  non-2xx ${run.non2xx}  socket errors ${run.socketErrors}`;
}

/** Median over rounds of the per-round ratio a/b of `metric`. */
function ratio(runs: Run[], a: Target, b: Target, metric: (r: Run) => number): number {
  const per = [];
  for (let round = 0; round < opt.rounds; round++) {
    const x = runs.find((r) => r.target === a && r.round === round);
    const y = runs.find((r) => r.target === b && r.round === round);
    if (x !== undefined && y !== undefined) per.push(metric(x) / metric(y));
  }
  return median(per);
}

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const tls = makeCertificates(tmp);
  const backend = await startNodeServer('backend', 'backend.ts', CLIENT_CORE, {}, { readyPath: PATH, readyStatus: 200 });
  const servers: Servers = {
    backend,
    gwPlain: await startGatewayOn(runtime, tmp, backend.url, 'gateway (cleartext)'),
    gwTls: await startGatewayOn(runtime, tmp, backend.url, 'gateway (TLS)', tls),
    barePlain: await startNodeServer('bare Node proxy (cleartext)', 'bare.ts', SERVER_CORE, { BACKEND: backend.url }, { readyPath: PATH, readyStatus: 200 }),
    bareTls: await startBareTls(backend.url, tls),
    bareTlsH2: await startBareTls(backend.url, tls, true),
    nginx: await startNginx(tmp, backend.url, tls),
  };
  const env = {
    ...runEnv(started, source, runtime),
    nginx: firstLine('nginx', ['-v']) || spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim(),
    h2load: firstLine('h2load', ['--version']),
    openssl: firstLine('openssl', ['version']),
    pinning: PIN ? `servers under test on core ${SERVER_CORE}; wrk, h2load, openssl, the backend and this script on core ${CLIENT_CORE}` : 'none (needs taskset and 2+ cores)',
  };
  log(`${NAME}: ${env.cpu}; node ${env.node}; ${env.wrk}; ${env.h2load}; ${env.nginx}; ${env.openssl}; pinning: ${env.pinning}`);

  const quiet = new Quiet(opt.quietWait);
  const runs = await rotatedRounds({
    targets: TARGETS, rounds: opt.rounds, seconds: opt.seconds, warmup: opt.warmup, quiet, label: (t) => LABEL[t], line,
    measure: (target, seconds, round) => measure(servers, target, seconds, round),
  });
  const shakes = (['new', 'reuse'] as const).flatMap((mode) => ([['gateway', servers.gwTls], ['nginx', servers.nginx]] as const).map(([who, server]) => ({ who, mode, ...handshakes(server.url, mode, server.pid) })));
  for (const s of shakes) log(`handshakes ${s.who} ${s.mode}: ${fmt(s.perSecond)}/s, server ${fmt(s.serverCpuUsPer)} µs CPU each`);
  const stderr = Object.values(servers).filter((s) => s.err.lines.length > 0).map((s) => `${s.label}: ${s.err.tail(3)}`);
  for (const s of Object.values(servers)) await stopChild(s.proc);

  const rows = TARGETS.map((target) => {
    const mine = runs.filter((r) => r.target === target);
    return { target, rps: median(mine.map((r) => r.rps)), cpu: median(mine.map((r) => r.serverCpuUsPerReq)), p50: median(mine.map((r) => r.p50Ms)), errors: mine.reduce((a, r) => a + r.non2xx + r.socketErrors, 0) };
  });
  const h2OverH1 = ratio(runs, 'gw-tls-h2', 'gw-tls-h1', (r) => r.rps);
  const h2OneOverH1 = ratio(runs, 'gw-tls-h2-one', 'gw-tls-h1', (r) => r.rps);
  const bareH2OverH1 = ratio(runs, 'bare-tls-h2', 'bare-tls-h1', (r) => r.rps);
  const tlsCpu = ratio(runs, 'gw-tls-h1', 'gw-h1', (r) => r.serverCpuUsPerReq);
  const bareTlsCpu = ratio(runs, 'bare-tls-h1', 'bare-h1', (r) => r.serverCpuUsPerReq);
  const vsNginx = { h1: ratio(runs, 'gw-tls-h1', 'nginx-tls-h1', (r) => r.rps), h2: ratio(runs, 'gw-tls-h2', 'nginx-tls-h2', (r) => r.rps) };
  const table = [
    '| target | req/s | server CPU µs/req | latency ms (wrk: p50; h2load: mean) | non-2xx + socket errors |',
    '|---|---:|---:|---:|---:|',
    ...rows.map((r) => `| ${LABEL[r.target]} | ${fmt(r.rps)} | ${fmt(r.cpu)} | ${fmt(r.p50, 2)} | ${r.errors} |`),
  ].join('\n');
  const shakeTable = [
    '| server | full handshakes/s | server CPU µs each | resumed/s | server CPU µs each |',
    '|---|---:|---:|---:|---:|',
    ...(['gateway', 'nginx'] as const).map((who) => {
      const full = shakes.find((s) => s.who === who && s.mode === 'new')!;
      const resumed = shakes.find((s) => s.who === who && s.mode === 'reuse')!;
      return `| ${who} | ${fmt(full.perSecond)} | ${fmt(full.serverCpuUsPer)} | ${fmt(resumed.perSecond)} | ${fmt(resumed.serverCpuUsPer)} |`;
    }),
  ].join('\n');
  const targets = [
    `- HTTP/2 over TLS ÷ HTTP/1.1 over TLS, gateway req/s: ${fmt(h2OverH1, 2)} with ${H2_CONNECTIONS} connections × ${STREAMS} streams (target ≥ 1.0: ${h2OverH1 >= 1 ? 'met' : 'not met'}); ${fmt(h2OneOverH1, 2)} with the ${opt.connections} requests on one connection (${h2OneOverH1 >= 1 ? 'met' : 'not met'}); the bare Node proxy in the same run, HTTP/2 on the stream API ÷ HTTP/1.1, ${H2_CONNECTIONS} × ${STREAMS}: ${fmt(bareH2OverH1, 2)}`,
    `- TLS ÷ cleartext, gateway server CPU per kept-alive proxied request: ${fmt(tlsCpu, 2)} (target ≤ 1.20: ${tlsCpu <= 1.2 ? 'met' : 'not met'}); the bare Node proxy in the same run: ${fmt(bareTlsCpu, 2)}`,
    `- gateway ÷ nginx, req/s: ${fmt(vsNginx.h1, 2)} over HTTP/1.1 with TLS, ${fmt(vsNginx.h2, 2)} over HTTP/2 with TLS`,
  ];
  const errors = rows.reduce((a, r) => a + r.errors, 0);
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}, ${env.wrk}, ${env.h2load}, ${env.nginx}, ${env.openssl}`,
    `- gateway: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, \`ROUTES=[{"name":"bench","prefix":"/bench","targets":["http://127.0.0.1:<backend>"],"auth":"public"}]\`, RATE_LIMITS=off, LOG_LEVEL=warn (nginx logs nothing either); with TLS: an ECDSA P-256 certificate, every TLS and HTTP/2 setting at its default`,
    `- bare Node proxy: bench/servers/bare.ts (node:http or node:https server, or node:http2 on the stream API; \`http.request\` over a keep-alive agent, \`pipe\`), the same certificate, on the same core as the gateway`,
    `- nginx: one process (\`master_process off\`), \`listen ssl http2\`, the same certificate, keep-alive upstream (64), no access log, session cache on`,
    `- pinning: ${env.pinning}`,
    `- load: \`GET ${PATH}\`, ${opt.rounds} rounds × ${opt.seconds} s per target after a ${opt.warmup} s warm-up, order rotated each round; HTTP/1.1: wrk, 1 thread, ${opt.connections} keep-alive connections; HTTP/2: h2load, 1 thread, ${H2_CONNECTIONS} connections × ${STREAMS} streams (the same ${H2_CONNECTIONS * STREAMS} requests in flight), and for the gateway also 1 connection × ${opt.connections} streams; handshakes: \`openssl s_time -new\` / \`-reuse\`, ${HANDSHAKE_SECONDS} s each (one connection at a time)`,
    '',
    table,
    '',
    'Targets (median of the per-round ratios):',
    '',
    ...targets,
    '',
    'TLS handshakes (one client, one at a time):',
    '',
    shakeTable,
    ...(stderr.length > 0 ? ['', `Lines on stderr: ${stderr.join('; ')}`] : []),
  ].join('\n');
  process.stdout.write(`\n${table}\n\n${targets.join('\n')}\n\n${shakeTable}\n`);
  writeRawFigures(RESULTS, 'tls', started, { env, options: { ...opt, streams: STREAMS, h2Connections: H2_CONNECTIONS }, rows, runs, shakes, ratios: { h2OverH1, h2OneOverH1, bareH2OverH1, tlsCpu, bareTlsCpu, vsNginx } });
  updateReport(NAME, REPORT, generated, { noReport: opt.noReport, failure: errors > 0 ? `${errors} request(s) were not answered 2xx` : undefined });
}

runBench({ name: NAME, slug: 'tls', budgetMs: 15 * 60_000, tools: ['wrk', 'h2load', 'nginx', 'openssl'], runtime: opt.runtime }, main);
