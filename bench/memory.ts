/**
 * Memory: the gateway's resident set while a million distinct valid access tokens pass through
 * it (each verified once, none seen again: its cache of verified tokens must stay within its
 * bounds), and while a 1 GiB upload streams through a proxied route. Results: a summary on
 * stdout, bench/reports/memory.md (method and findings: "Memory: a million tokens and a 1 GiB
 * upload" in bench/README.md), and bench/results/memory-<time>.json with every sample.
 *
 *   npm run bench:memory [-- --minutes 10 --tokens 1000000 --accounts 10000 --concurrency 32
 *                            --cache-entries 50000 --upload-mib 1024 --no-upload
 *                            --runtime dist|tsx --no-report]
 *
 * One gateway (src/ built as for bench:proxy; NODE_ENV=production, one Ed25519 key, one route
 * `/bench` to bench/servers/backend.ts, every other setting at its default: LOG_LEVEL=info to
 * /dev/null, rate limits on with the counters in memory, no Redis) on core 1. This script, the
 * backend and nothing else on core 0: the script is the client, minting each token just
 * before it sends it (EdDSA, bench/lib/tokens.ts; `--accounts` subjects),
 * over a keep-alive pool of `--concurrency` connections, paced to spread `--tokens` evenly over
 * `--minutes` (flat out if it cannot keep up: the count reached is reported).
 * - Upload first, on the fresh gateway after a 5 s warm-up of token traffic: `POST
 *   /bench/upload` with `--upload-mib` MiB streamed from one 64 KiB buffer (with backpressure),
 *   the backend counting the bytes that arrive; RSS sampled every 100 ms: before, peak, after.
 *   Then the same upload through bench/servers/floor.ts (bare http-proxy-3), for comparison.
 * - Then the tokens: RSS (/proc/<pid>/status, VmRSS) every second and the V8 heap in use
 *   (GET /metrics) every 10 s; after a warm-up (a fifth of the run, at most 60 s) the RSS must
 *   stay within 10 % of the warm-up's end: the median of the last tenth of the samples and
 *   the highest sample, each against the median of the first tenth after the warm-up (an
 *   earlier target, kept as a figure), and the highest sample of the whole run must stay under
 *   the bound docs/operations.md states for the cache's size (`rssBoundMiB`, issue 32's target
 *   8). `--cache-entries` sets the verified-token cache's size (its entry bound, with a byte
 *   bound that lets it fill: `cacheSettings`); the default is the gateway's own.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { boundedInt, usage } from './lib/cli.js';
import { REPORTS, RESULTS, runEnv, startGateway } from './lib/gateway.js';
import { CLIENT_CORE, nproc, PIN, processCpuSeconds, SERVER_CORE } from './lib/machine.js';
import { isRunning, stopChild } from './lib/processes.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { runBench, type BenchRun } from './lib/run.js';
import { startNodeServer } from './lib/servers.js';
import { makeSigningKey, mintToken } from './lib/tokens.js';

const NAME = 'bench:memory';
const REPORT: Report = { file: join(REPORTS, 'memory.md'), title: 'Memory: a million tokens and a 1 GiB upload', script: `npm run ${NAME}` };
const PATH = '/bench/items/42';
const UPLOAD_PATH = '/bench/upload';
const MiB = 1024 * 1024;
/** Flat means within this share of the level after warm-up. */
const FLAT = 0.10;
/** The gateway's defaults (config/schema.ts: tokens.verifiedCacheMaxEntries, verifiedCacheMaxBytes). */
const DEFAULT_CACHE_ENTRIES = 50_000;
const DEFAULT_CACHE_BYTES = 64 * MiB;

/**
 * The resident set docs/operations.md promises ("Memory") for a verified-token cache of
 * `entries`: a fixed part (Node, the modules, the other bounded stores, V8's young generation,
 * the upload's buffers that the allocator keeps, the garbage V8 lets gather before a full
 * collection) and a part per entry (about 0.9 KB for a default token, bench/README.md, twice
 * that for a token of about 1 KB). Fitted on runs of this bench at 50,000 and 200,000 entries
 * (highest samples 559 and 685 MiB: 0.84 KiB more per entry), with a margin; the two places
 * must say the same.
 */
const RSS_BOUND_BASE_MIB = 600;
const RSS_BOUND_PER_ENTRY_KIB = 2;
function rssBoundMiB(entries: number): number {
  return RSS_BOUND_BASE_MIB + (entries * RSS_BOUND_PER_ENTRY_KIB) / 1024;
}

/** The cache settings for `entries`: its entry bound, and a byte bound that lets it fill with default tokens. */
function cacheSettings(entries: number): Record<string, string> {
  return {
    VERIFIED_TOKEN_CACHE_MAX_ENTRIES: String(entries),
    VERIFIED_TOKEN_CACHE_MAX_BYTES: String(Math.max(DEFAULT_CACHE_BYTES, Math.ceil((entries * DEFAULT_CACHE_BYTES) / DEFAULT_CACHE_ENTRIES))),
  };
}

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    tokens: { type: 'string', default: '1000000' },
    accounts: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '32' },
    'cache-entries': { type: 'string', default: String(DEFAULT_CACHE_ENTRIES) },
    'upload-mib': { type: 'string', default: '1024' },
    'no-upload': { type: 'boolean', default: false },
    runtime: { type: 'string', default: 'dist' },
    'no-report': { type: 'boolean', default: false },
  },
});
const MINUTES = boundedInt(NAME, 'minutes', args.minutes, 1, 120);
const TOKENS = boundedInt(NAME, 'tokens', args.tokens, 1000, 100_000_000);
const ACCOUNTS = boundedInt(NAME, 'accounts', args.accounts, 1, 1_000_000);
const CONCURRENCY = boundedInt(NAME, 'concurrency', args.concurrency, 1, 512);
const CACHE_ENTRIES = boundedInt(NAME, 'cache-entries', args['cache-entries'], 1000, 1_000_000);
const CACHE = cacheSettings(CACHE_ENTRIES);
const UPLOAD_MIB = boundedInt(NAME, 'upload-mib', args['upload-mib'], 1, 16 * 1024);
const UPLOAD = args['no-upload'] !== true;
if (args.runtime !== 'dist' && args.runtime !== 'tsx') usage(NAME, '--runtime is dist or tsx');
const DURATION_MS = MINUTES * 60_000;
const WARMUP_MS = Math.min(60_000, DURATION_MS / 5);
const BUDGET_MS = DURATION_MS + 600_000;

/** VmRSS and VmHWM of a process, bytes. */
function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** The gateway's V8 heap in use (prom-client's default metrics, which the gateway prefixes), bytes; NaN if absent. */
async function heapUsed(url: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    return Number(/^gateway_nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

const mb = (bytes: number) => fmt(bytes / MiB, 1);

// ---------------------------------------------------------------------------------------------
// The client: one new token a request

interface Driven { sent: number; ok: number; failed: number; statuses: Record<string, number> }

/**
 * GET PATH with a freshly minted token per request, `concurrency` at a time, paced to `rate`
 * requests a second, until `until` (ms, performance.now()) or `max` requests.
 */
async function drive(url: string, key: ReturnType<typeof makeSigningKey>, agent: Agent, rate: number, until: number, max: number, into: Driven): Promise<void> {
  const { hostname, port } = new URL(url);
  const t0 = performance.now();
  let next = 0;
  // A status, or the socket error's code (so that a failed run says what failed).
  const one = (token: string) => new Promise<number | string>((done) => {
    const req = request({ agent, hostname, port, path: PATH, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.once('end', () => done(res.statusCode ?? 0));
    });
    req.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? 'error'));
    req.end();
  });
  const loop = async () => {
    while (performance.now() < until && into.sent < max) {
      const i = next++;
      const due = t0 + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      if (performance.now() >= until || into.sent >= max) break;
      into.sent++;
      const status = await one(mintToken(key.privateKey, into.sent, ACCOUNTS));
      if (status === 200) into.ok++;
      else {
        into.failed++;
        into.statuses[String(status)] = (into.statuses[String(status)] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
}

// ---------------------------------------------------------------------------------------------
// The upload

interface Upload { mib: number; ok: boolean; status: number; bytesArrived: number; seconds: number; rssBefore: number; rssPeak: number; rssAfter: number; hwmBefore: number; hwmAfter: number }

async function upload(url: string, pid: number, token: string): Promise<Upload> {
  const total = UPLOAD_MIB * MiB;
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  await sleep(2000);
  const before = memoryOf(pid);
  let peak = before.rss;
  const sampler = setInterval(() => { peak = Math.max(peak, memoryOf(pid).rss); }, 100);
  const t0 = performance.now();
  const { hostname, port } = new URL(url);
  try {
    const answer = await new Promise<{ status: number; body: string }>((done, fail) => {
      const req = request({
        hostname, port, path: UPLOAD_PATH, method: 'POST', agent: false,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'content-length': String(total) },
      }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => { body += d; });
        res.once('end', () => done({ status: res.statusCode ?? 0, body }));
      });
      req.once('error', fail);
      let left = total;
      const write = () => {
        while (left > 0) {
          const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
          left -= piece.length;
          if (!req.write(piece)) return void req.once('drain', write);
        }
        req.end();
      };
      write();
    });
    const seconds = (performance.now() - t0) / 1000;
    let bytesArrived = -1;
    try { bytesArrived = (JSON.parse(answer.body) as { bytes?: number }).bytes ?? -1; } catch { /* reported */ }
    clearInterval(sampler);
    await sleep(5000);
    const after = memoryOf(pid);
    return { mib: UPLOAD_MIB, ok: answer.status === 200 && bytesArrived === total, status: answer.status, bytesArrived, seconds, rssBefore: before.rss, rssPeak: peak, rssAfter: after.rss, hwmBefore: before.hwm, hwmAfter: after.hwm };
  } finally {
    clearInterval(sampler);
  }
}

// ---------------------------------------------------------------------------------------------
// Main

interface Sample { t: number; rss: number; heapUsed?: number; sent: number }

async function main({ started, tmp, source, runtime }: BenchRun): Promise<void> {
  const keys = makeSigningKey();
  const backend = await startNodeServer('backend', 'backend.ts', CLIENT_CORE, {}, { readyPath: PATH, readyStatus: 200 });
  const gw = await startGateway({
    name: 'gateway', runtime, stdout: 'ignore',
    settings: { SIGNING_KEYS: keys.signingKeys, ROUTES: JSON.stringify([{ prefix: '/bench', targets: [backend.url] }]), GATEWAY_DATA_FILE: join(tmp, 'data.json'), ...CACHE },
  });
  const env = { ...runEnv(started, source, runtime), pinning: PIN ? `gateway on core ${SERVER_CORE}; this script (the client) and the backend on core ${CLIENT_CORE}` : 'none (needs taskset and 2+ cores)' };
  log(`${NAME}: ${env.cpu}; node ${env.node}; runtime ${runtime.mode}; gateway src/ at ${source}; ${env.pinning}`);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });

  // Sanity: a fresh token passes, none and a foreign one do not.
  const check = async (authorization: string | undefined, want: number) => {
    const res = await fetch(`${gw.url}${PATH}`, { headers: authorization === undefined ? {} : { authorization } });
    const body = await res.text();
    if (res.status !== want) throw new Error(`gateway: GET ${PATH} answered ${res.status}, not ${want}: ${body.slice(0, 300)}`);
  };
  await check(`Bearer ${mintToken(keys.privateKey, 0, ACCOUNTS)}`, 200);
  await check(undefined, 401);
  await check(`Bearer ${mintToken(makeSigningKey().privateKey, 0, ACCOUNTS)}`, 401);

  const warm: Driven = { sent: 0, ok: 0, failed: 0, statuses: {} };
  await drive(gw.url, keys, agent, 2000, performance.now() + 5000, Infinity, warm);
  let up: Upload | undefined;
  let floorUp: Upload | undefined;
  if (UPLOAD) {
    log(`${NAME}: uploading ${UPLOAD_MIB} MiB through ${UPLOAD_PATH}`);
    up = await upload(gw.url, gw.pid, mintToken(keys.privateKey, 0, ACCOUNTS));
    log(`${NAME}: upload ${up.ok ? 'arrived whole' : `FAILED (status ${up.status}, ${up.bytesArrived} bytes arrived)`} in ${fmt(up.seconds, 1)} s; RSS before ${mb(up.rssBefore)} MiB, peak ${mb(up.rssPeak)}, after ${mb(up.rssAfter)}`);
    // The same upload through the bare stack (bench/servers/floor.ts), for what is the gateway's and what its stack's.
    const floor = await startNodeServer('floor Ed25519', 'floor.ts', SERVER_CORE, { BACKEND: backend.url, PUBLIC_KEY: keys.publicPem }, { readyPath: PATH, readyStatus: 401 });
    floorUp = await upload(floor.url, floor.pid, mintToken(keys.privateKey, 0, ACCOUNTS));
    await stopChild(floor.proc);
    log(`${NAME}: the floor's upload ${floorUp.ok ? 'arrived whole' : 'FAILED'} in ${fmt(floorUp.seconds, 1)} s; RSS before ${mb(floorUp.rssBefore)} MiB, peak ${mb(floorUp.rssPeak)}, after ${mb(floorUp.rssAfter)}`);
  }

  log(`${NAME}: ${TOKENS} new tokens over ${MINUTES} min (${fmt(TOKENS / (DURATION_MS / 1000))}/s), ${ACCOUNTS} accounts, ${CONCURRENCY} at a time`);
  const driven: Driven = { sent: 0, ok: 0, failed: 0, statuses: {} };
  const samples: Sample[] = [];
  const t0 = performance.now();
  const cpu0 = processCpuSeconds(gw.pid);
  let lastHeap = -Infinity;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      if (!isRunning(gw.proc)) throw new Error(`the gateway died:\n${gw.err.tail()}`);
      const t = performance.now() - t0;
      const sample: Sample = { t: t / 1000, rss: memoryOf(gw.pid).rss, sent: driven.sent };
      if (t - lastHeap >= 10_000) {
        lastHeap = t;
        sample.heapUsed = await heapUsed(gw.url);
      }
      samples.push(sample);
      if (samples.length % 60 === 0) log(`  ${fmt(t / 1000)} s: RSS ${mb(sample.rss)} MiB, ${driven.sent} tokens sent (${driven.failed} not answered 200)`);
      await sleep(1000 - ((performance.now() - t0) % 1000));
    }
  })();
  // A failure surfaces at the await below; until then it must not count as unhandled.
  sampler.catch(() => {});
  await drive(gw.url, keys, agent, TOKENS / (DURATION_MS / 1000), t0 + DURATION_MS, TOKENS, driven);
  // However soon the tokens ran out, RSS is watched for the whole run.
  while (performance.now() - t0 < DURATION_MS) await sleep(200);
  sampling = false;
  await sampler;
  const gatewayCpu = processCpuSeconds(gw.pid) - cpu0;
  const elapsed = (performance.now() - t0) / 1000;
  agent.destroy();

  // Flatness after the warm-up.
  const after = samples.filter((s) => s.t * 1000 >= WARMUP_MS);
  const tenth = Math.max(3, Math.floor(after.length / 10));
  const first = median(after.slice(0, tenth).map((s) => s.rss));
  const last = median(after.slice(-tenth).map((s) => s.rss));
  const peak = Math.max(...after.map((s) => s.rss));
  const heaps = samples.filter((s) => s.heapUsed !== undefined && Number.isFinite(s.heapUsed));
  // The bound holds over the whole run, the warm-up and the upload before it included.
  const highest = Math.max(...samples.map((s) => s.rss), up?.rssPeak ?? 0);
  const bound = { entries: CACHE_ENTRIES, mib: rssBoundMiB(CACHE_ENTRIES), highestMib: highest / MiB, met: highest / MiB <= rssBoundMiB(CACHE_ENTRIES) };
  const tokensFlat = { first, last, peak, lastRatio: last / first, peakRatio: peak / first, met: last / first <= 1 + FLAT && peak / first <= 1 + FLAT };
  const uploadFlat = up === undefined ? undefined : { peakRatio: up.rssPeak / up.rssBefore, afterRatio: up.rssAfter / up.rssBefore, met: up.ok && up.rssPeak / up.rssBefore <= 1 + FLAT };
  const failed = driven.failed + (up !== undefined && !up.ok ? 1 : 0);

  const every = Math.max(1, Math.round(samples.length / 20));
  const seriesTable = [
    '| time s | tokens sent | RSS MiB | V8 heap in use MiB (nearest sample) |',
    '|---:|---:|---:|---:|',
    ...samples.filter((_, i) => i % every === 0 || i === samples.length - 1).map((s) => {
      const h = heaps.reduce<Sample | undefined>((best, x) => (best === undefined || Math.abs(x.t - s.t) < Math.abs(best.t - s.t) ? x : best), undefined);
      return `| ${fmt(s.t)} | ${s.sent} | ${mb(s.rss)} | ${h === undefined ? '—' : mb(h.heapUsed!)} |`;
    }),
  ].join('\n');
  const lines = [
    `- tokens: **${driven.sent}** distinct new tokens sent in ${fmt(elapsed)} s (${fmt(driven.sent / elapsed)}/s; ${driven.ok} answered 200${driven.failed > 0 ? `, **${driven.failed} not** (${Object.entries(driven.statuses).map(([s, n]) => `${/^[0-9]+$/.test(s) ? s : `socket error ${s}`}: ${n}`).join(', ')})` : ''}); gateway CPU ${fmt((gatewayCpu * 1e6) / Math.max(driven.sent, 1))} µs per request (${fmt((100 * gatewayCpu) / elapsed)} % of its core)`,
    `- RSS bound for a cache of ${CACHE_ENTRIES} entries (docs/operations.md: ${RSS_BOUND_BASE_MIB} MiB + ${RSS_BOUND_PER_ENTRY_KIB} KiB per entry = ${fmt(bound.mib)} MiB): highest sample of the run, upload included, **${mb(highest)} MiB** (${fmt(highest / MiB / bound.mib, 2)}× the bound) — target under the bound: ${bound.met ? 'met' : '**not met**'}`,
    `- RSS after the ${fmt(WARMUP_MS / 1000)} s warm-up: median of the first tenth ${mb(first)} MiB, of the last tenth ${mb(last)} MiB (**${fmt(tokensFlat.lastRatio, 3)}×**), highest sample ${mb(peak)} MiB (**${fmt(tokensFlat.peakRatio, 3)}×**) — flat within ${100 * FLAT} % (an earlier target): ${tokensFlat.met ? 'met' : '**not met**'}`,
    `- V8 heap in use: ${heaps.length > 0 ? `${mb(heaps[0]!.heapUsed!)} MiB at the first sample, ${mb(heaps.at(-1)!.heapUsed!)} MiB at the last, at most ${mb(Math.max(...heaps.map((h) => h.heapUsed!)))}` : 'not sampled (no gateway_nodejs_heap_size_used_bytes in /metrics)'}`,
    ...(up === undefined ? [] : [
      `- upload through the gateway: ${UPLOAD_MIB} MiB streamed through \`POST ${UPLOAD_PATH}\` in ${fmt(up.seconds, 1)} s (${fmt(UPLOAD_MIB / up.seconds)} MiB/s), ${up.ok ? 'arrived whole at the backend' : `**FAILED**: status ${up.status}, ${up.bytesArrived} bytes arrived`}; gateway RSS before ${mb(up.rssBefore)} MiB, peak ${mb(up.rssPeak)} MiB (**${fmt(uploadFlat!.peakRatio, 3)}×**), 5 s after ${mb(up.rssAfter)} MiB (${fmt(uploadFlat!.afterRatio, 3)}×); VmHWM ${mb(up.hwmBefore)} → ${mb(up.hwmAfter)} MiB — target peak within ${100 * FLAT} %: ${uploadFlat!.met ? 'met' : '**not met**'}`,
      ...(floorUp === undefined ? [] : [`- the same upload through floor Ed25519 (bare http-proxy-3 + jose, bench/servers/floor.ts, core ${SERVER_CORE}), for comparison: ${fmt(floorUp.seconds, 1)} s, ${floorUp.ok ? 'arrived whole' : '**FAILED**'}; RSS before ${mb(floorUp.rssBefore)} MiB, peak ${mb(floorUp.rssPeak)} MiB (+${mb(floorUp.rssPeak - floorUp.rssBefore)} MiB, ${fmt(floorUp.rssPeak / floorUp.rssBefore, 3)}×; the gateway: +${mb(up.rssPeak - up.rssBefore)} MiB), 5 s after ${mb(floorUp.rssAfter)} MiB`]),
    ]),
  ];
  const generated = [
    runHeading(env.date, NAME),
    '',
    `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}`,
    `- gateway: src/ at ${env.commit}; ${env.runtime}; NODE_ENV=production, one Ed25519 signing key, \`ROUTES=[{"prefix":"/bench","targets":["http://127.0.0.1:<backend>"]}]\`, \`VERIFIED_TOKEN_CACHE_MAX_ENTRIES=${CACHE.VERIFIED_TOKEN_CACHE_MAX_ENTRIES}\` and \`VERIFIED_TOKEN_CACHE_MAX_BYTES=${CACHE.VERIFIED_TOKEN_CACHE_MAX_BYTES}\`${CACHE_ENTRIES === DEFAULT_CACHE_ENTRIES ? ' (the defaults)' : ''}, every other setting at its default (LOG_LEVEL=info to /dev/null, rate limits on with counters in memory, no Redis)`,
    `- pinning: ${env.pinning}`,
    `- client: this script, each request with a token minted just before it (EdDSA, bench/lib/tokens.ts; subjects of ${ACCOUNTS} accounts), ${CONCURRENCY} keep-alive connections, paced to ${TOKENS} tokens over ${MINUTES} min; the gateway's RSS (VmRSS) every second, its V8 heap in use (GET /metrics) every 10 s`,
    '',
    ...lines,
    '',
    'RSS over the run (a row every ~5 % of the samples):',
    '',
    seriesTable,
  ].join('\n');
  process.stdout.write(`\n${lines.join('\n')}\n\n${seriesTable}\n`);
  writeRawFigures(RESULTS, 'memory', started, {
    env, options: { minutes: MINUTES, tokens: TOKENS, accounts: ACCOUNTS, concurrency: CONCURRENCY, cacheEntries: CACHE_ENTRIES, uploadMib: UPLOAD ? UPLOAD_MIB : 0, warmupS: WARMUP_MS / 1000 },
    tokens: { ...driven, elapsedS: elapsed, gatewayCpuS: gatewayCpu, flat: tokensFlat, bound }, upload: up === undefined ? undefined : { ...up, flat: uploadFlat }, floorUpload: floorUp, samples,
  });
  updateReport(NAME, REPORT, generated, { noReport: args['no-report'] === true, failure: failed > 0 ? `${failed} request(s) failed` : undefined });
}

runBench({ name: NAME, slug: 'memory', budgetMs: BUDGET_MS, tools: [], runtime: args.runtime as 'dist' | 'tsx' }, main);
