/**
 * What an owner sign-in flood does to everyone else: the p99 latency of other requests
 * (`GET /healthz` through the gateway's own stack) while idle, and while a flood of owner
 * sign-ins from rotating addresses (each with an email and an address of its own, so that no
 * limit refuses it and every one costs an argon2 verification) hits the same gateway. Two
 * gateways, in one run:
 *
 * - `capped`: hashing bounded as by default, the pool at nice 0 (`owner.passwordHashConcurrency` 0: one fewer than the cores and
 *   than libuv's pool, at least 1; `owner.passwordHashQueue` 64, past it 503 `overloaded`);
 * - `uncapped`: `OWNER_PASSWORD_HASH_CONCURRENCY=4`, `OWNER_PASSWORD_HASH_QUEUE=10000`: the
 *   bound before issue 26 (4 at once, a queue without bound), for comparison.
 *
 *   node --import tsx bench/owner-flood.ts [--rounds 3 --seconds 10 --rate 200 --flood-rate 50
 *                                           --quiet-wait 120 --runtime dist|tsx --no-report]
 *
 * Both gateways may use every core (the flood's hashing runs on libuv's thread pool beside the
 * event loop: that contention is what is measured), and the driver (this script) runs on core
 * 0. Load is open loop: `--rate` requests a second to /healthz from this script, each timed from
 * its send to its last byte; `--flood-rate` sign-ins a second from a child process (so that its
 * client work never delays the timing), each with `X-Forwarded-For` of an address of its own
 * (the gateways trust 127.0.0.1) and a wrong password. Every round measures,
 * for each gateway in turn (the order rotated each round), an idle run and then a flood run of
 * `--seconds`; the ratio of a round is the flood run's p99 over the idle run's. Everything is on
 * 127.0.0.1 and bounded: each request by a 10 s timeout, the whole run by its budget.
 */
import { fork } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { boundedInt, parseRunOptions } from './lib/cli.js';
import { REPORTS, RESULTS, runEnv, startGateway, type Gateway } from './lib/gateway.js';
import { CLIENT_CORE, foreignCores, nproc, processCpuSeconds, Quiet, repin, sampleLoad, SERVER_CORE } from './lib/machine.js';
import { fmt, log, median, runHeading, updateReport, writeRawFigures, type Report } from './lib/report.js';
import { runBench } from './lib/run.js';

const NAME = 'bench:owner-flood';
const REPORT: Report = { file: join(REPORTS, 'owner-flood.md'), title: 'Owner sign-in flood: what it costs other requests', script: `npm run ${NAME}` };
/** The target of issue 26: others' p99 under the flood at most twice the idle p99. */
const TARGET = 2;

type Variant = 'capped' | 'uncapped' | 'budget' | 'nice';
const ALL_VARIANTS: Variant[] = ['capped', 'uncapped', 'budget', 'nice'];
let VARIANTS: Variant[] = ALL_VARIANTS;
const SETTINGS: Record<Variant, Record<string, string>> = {
  // Each variant names the pool's nice value itself, so that its figures keep their meaning
  // whatever the default is (19 since the nice variant met the target; 0 before).
  capped: { OWNER_PASSWORD_HASH_NICE: '0' },
  uncapped: { OWNER_PASSWORD_HASH_CONCURRENCY: '4', OWNER_PASSWORD_HASH_QUEUE: '10000', OWNER_PASSWORD_HASH_NICE: '0' },
  budget: {},
  nice: { OWNER_PASSWORD_HASH_NICE: '19' },
};

/** The nice values of a process's libuv pool threads (the `nice` variant's check that the setting took). */
function poolNice(pid: number): number[] {
  const values: number[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() !== 'libuv-worker') continue;
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // After "(name) ": field 19 of stat is the nice value.
      values.push(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch { /* the thread ended */ }
  }
  return values;
}

/** The hashing budget of the `budget` variant (`--budget`, a fraction of a core). */
let budgetShare = 0.25;
/** Bootstrap resamples of the rounds for the headline's interval. */
const RESAMPLES = 1000;

interface Phase {
  variant: Variant;
  flood: boolean;
  round: number;
  /** Latencies of the /healthz calls, ms. */
  latencies: number[];
  p50: number;
  p99: number;
  errors: number;
  /** Sign-in answers by status (flood runs). */
  signIns: Record<string, number>;
  /** Cores' worth of CPU the gateway used. */
  gatewayCores: number;
  /** Cores' worth of CPU this script (the timing driver) and the flood's sender used. */
  driverCores: number;
  senderCores: number;
  foreignCores: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Sends `rate` calls a second for `seconds`, each started on schedule whatever the others do (open loop). */
async function openLoop(rate: number, seconds: number, send: (i: number) => Promise<void>): Promise<void> {
  const pending: Promise<void>[] = [];
  const start = performance.now();
  const total = rate * seconds;
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    pending.push(send(i));
  }
  await Promise.all(pending);
}

let floodCounter = 0;
/** The flood's sender runs on the core the driver (CLIENT_CORE) leaves. */
const SENDER_CORE = SERVER_CORE;

/** The p99 of the latencies of some runs, pooled. */
function pooledP99(runs: readonly Phase[]): number {
  return percentile(runs.flatMap((p) => p.latencies).sort((a, b) => a - b), 99);
}

/**
 * The headline: p99 of all flood runs' latencies pooled over the rounds, over the same of the
 * idle runs; with a 90 % interval from resampling whole rounds (each round's idle and flood run
 * together), since rounds differ more than samples within a run do (the machine drifts).
 */
function pooledRatio(idle: readonly Phase[], flood: readonly Phase[], rounds: number): { ratio: number; low: number; high: number } {
  const ratio = pooledP99(flood) / pooledP99(idle);
  // A fixed-seed generator (mulberry32): the same figures give the same interval.
  let seed = 0x2026;
  const random = (): number => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const ratios: number[] = [];
  for (let i = 0; i < RESAMPLES; i++) {
    const picked = Array.from({ length: rounds }, () => Math.floor(random() * rounds));
    ratios.push(pooledP99(picked.map((r) => flood.find((p) => p.round === r)!)) / pooledP99(picked.map((r) => idle.find((p) => p.round === r)!)));
  }
  ratios.sort((a, b) => a - b);
  return { ratio, low: percentile(ratios, 5), high: percentile(ratios, 95) };
}

/**
 * Sends the flood from a child process of its own, so that the sign-ins' client work never
 * delays this process's reading of the /healthz answers it times.
 */
interface FloodChild {
  /** Starts the flood; resolves when it ended, with the sign-ins' answers by status and the sender's CPU seconds. */
  run(): Promise<{ counts: Record<string, number>; cpuSeconds: number }>;
}

/**
 * Starts the flood's sender, a child process of its own (so that the sign-ins' client work never
 * delays this process's reading of the /healthz answers it times), and waits until it is ready:
 * its start-up must not fall inside a measured run.
 */
function startFloodChild(url: string, rate: number, seconds: number): Promise<FloodChild> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['--flood-child', url, String(rate), String(seconds), String(floodCounter)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    floodCounter += rate * seconds;
    child.on('error', reject);
    // The sender on the core the driver does not use: neither delays the other's work.
    if (child.pid !== undefined) repin(child.pid, SENDER_CORE);
    child.once('message', () => resolve({
      run: () => new Promise((done, fail) => {
        let result: { counts: Record<string, number>; cpuSeconds: number } | undefined;
        child.once('message', (message) => { result = message as typeof result; });
        // Resolved once the child is reaped, so that its CPU time counts as this script's, not as other load.
        child.once('exit', (code) => { if (code === 0 && result !== undefined) done(result); else fail(new Error(`flood child exited with ${code}`)); });
        child.send('go');
      }),
    }));
  });
}

/** The flood child: `rate` owner sign-ins a second for `seconds`, each from an address and with an email of its own. */
async function floodChild([url, rateText, secondsText, firstText]: string[]): Promise<void> {
  const signIns: Record<string, number> = {};
  const first = Number(firstText);
  await new Promise<void>((resolve) => {
    process.once('message', () => resolve());
    process.send!('ready');
  });
  const cpuBefore = process.cpuUsage();
  await openLoop(Number(rateText), Number(secondsText), async (i) => {
    const n = first + i;
    // A fresh address and email each: no limit refuses these, so each one costs a hash.
    const address = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
    try {
      const res = await fetch(`${url}/owner/v1/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
        body: JSON.stringify({ email: `flood${n}@example.test`, password: 'a wrong password, long enough' }),
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      signIns[res.status] = (signIns[res.status] ?? 0) + 1;
    } catch {
      signIns.timeout = (signIns.timeout ?? 0) + 1;
    }
  });
  const cpu = process.cpuUsage(cpuBefore);
  process.send!({ counts: signIns, cpuSeconds: (cpu.user + cpu.system) / 1e6 }, () => process.exit(0));
}

async function measurePhase(gw: Gateway<Variant>, flood: boolean, round: number, { seconds, rate, floodRate }: { seconds: number; rate: number; floodRate: number }): Promise<Phase> {
  const latencies: number[] = [];
  let errors = 0;
  let signIns: Record<string, number> = {};
  let senderSeconds = 0;
  const sender = flood ? await startFloodChild(gw.url, floodRate, seconds) : undefined;
  const loadBefore = sampleLoad();
  const cpuBefore = processCpuSeconds(gw.pid);
  const driverBefore = process.cpuUsage();
  const others = openLoop(rate, seconds, async () => {
    const sent = performance.now();
    try {
      const res = await fetch(`${gw.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer();
      if (res.status !== 200) errors++;
      latencies.push(performance.now() - sent);
    } catch {
      errors++;
    }
  });
  const floods = sender === undefined ? Promise.resolve() : sender.run().then(({ counts, cpuSeconds }) => { signIns = counts; senderSeconds = cpuSeconds; });
  await Promise.all([others, floods]);
  const elapsed = (performance.now() - loadBefore.at) / 1000;
  const gatewayCores = (processCpuSeconds(gw.pid) - cpuBefore) / elapsed;
  const driver = process.cpuUsage(driverBefore);
  const driverCores = (driver.user + driver.system) / 1e6 / elapsed;
  const sorted = [...latencies].sort((a, b) => a - b);
  return { variant: gw.name, flood, round, latencies, p50: percentile(sorted, 50), p99: percentile(sorted, 99), errors, signIns, gatewayCores, driverCores, senderCores: senderSeconds / elapsed, foreignCores: foreignCores(loadBefore, sampleLoad()) };
}

function main(): void {
  const options = parseRunOptions(NAME, { rounds: 3, seconds: 10, connections: 1 }, {
    rate: { type: 'string', default: '500' },
    'flood-rate': { type: 'string', default: '50' },
    budget: { type: 'string', default: '0.25' },
    variants: { type: 'string', default: ALL_VARIANTS.join(',') },
  });
  budgetShare = Number(options.extra.budget);
  if (!(budgetShare > 0 && budgetShare <= 64)) throw new Error(`${NAME}: --budget must be a fraction of a core above 0`);
  SETTINGS.budget = { OWNER_PASSWORD_HASH_BUDGET: String(budgetShare), OWNER_PASSWORD_HASH_NICE: '0' };
  VARIANTS = (options.extra.variants as string).split(',').map((v) => v.trim()) as Variant[];
  if (VARIANTS.length === 0 || VARIANTS.some((v) => !ALL_VARIANTS.includes(v))) throw new Error(`${NAME}: --variants takes some of ${ALL_VARIANTS.join(',')}`);
  const rate = boundedInt(NAME, 'rate', options.extra.rate as string, 10, 2000);
  const floodRate = boundedInt(NAME, 'flood-rate', options.extra['flood-rate'] as string, 1, 500);
  const { rounds, seconds } = options;

  runBench({ name: NAME, slug: 'owner-flood', budgetMs: (rounds * VARIANTS.length * 2 * (seconds + 15) + options.quietWait + 120) * 1000, tools: [], runtime: options.runtime }, async ({ started, source, runtime }) => {
    const quiet = new Quiet(options.quietWait);
    const gateways: Gateway<Variant>[] = [];
    for (const variant of VARIANTS) {
      // A data file of its own each: the file has one writer, and a second gateway would wait for its lock.
      const dataFile = join(RESULTS, `owner-flood-${variant}.json`);
      copyFileSync(join(RESULTS, '..', '..', 'config', 'demo-data.json'), dataFile);
      gateways.push(await startGateway({
        name: variant,
        runtime,
        core: null,
        stdout: 'ignore',
        settings: { LOG_LEVEL: 'warn', TRUSTED_PROXIES: '["127.0.0.1"]', GATEWAY_DATA_FILE: dataFile, ...SETTINGS[variant] },
      }));
    }
    log(`${NAME}: ${rounds} rounds × (idle, flood) × ${VARIANTS.join(', ')}, ${seconds} s each; /healthz at ${rate}/s, sign-ins at ${floodRate}/s`);
    // Warm-up: the JIT, the dummy hash, the first connections.
    for (const gw of gateways) await measurePhase(gw, true, -1, { seconds: 2, rate, floodRate });
    for (const gw of gateways) if (gw.name === 'nice') log(`nice: the gateway's libuv pool threads at nice ${poolNice(gw.pid).join(', ')}`);

    const phases: Phase[] = [];
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? gateways : [...gateways].reverse();
      for (const gw of order) {
        for (const flood of [false, true]) {
          await quiet.wait(`${gw.name} ${flood ? 'flood' : 'idle'}`);
          // Let the queue of the last flood drain before an idle run.
          await sleep(1000);
          const phase = await measurePhase(gw, flood, round, { seconds, rate, floodRate });
          phases.push(phase);
          log(`round ${round + 1}/${rounds} ${gw.name.padEnd(8)} ${flood ? 'flood' : 'idle '}: p50 ${fmt(phase.p50, 2)} ms, p99 ${fmt(phase.p99, 2)} ms, gateway ${fmt(phase.gatewayCores, 2)} cores, other load ${fmt(phase.foreignCores, 2)}, sign-ins ${JSON.stringify(phase.signIns)}, errors ${phase.errors}`);
        }
      }
    }

    const rows: string[] = [];
    const summary: Record<Variant, { ratio: number; low: number; high: number; medianRatio: number; ratios: number[]; idleP99: number; floodP99: number }> = {} as never;
    for (const variant of VARIANTS) {
      const mine = phases.filter((p) => p.variant === variant);
      const ratios = Array.from({ length: rounds }, (_, r) => {
        const idle = mine.find((p) => p.round === r && !p.flood)!;
        const flood = mine.find((p) => p.round === r && p.flood)!;
        return flood.p99 / idle.p99;
      });
      const idleRuns = mine.filter((p) => !p.flood);
      const floodRuns = mine.filter((p) => p.flood);
      summary[variant] = { ...pooledRatio(idleRuns, floodRuns, rounds), medianRatio: median(ratios), ratios, idleP99: pooledP99(idleRuns), floodP99: pooledP99(floodRuns) };
      for (const flood of [false, true]) {
        const ps = mine.filter((p) => p.flood === flood);
        const signIns: Record<string, number> = {};
        for (const p of ps) for (const [k, v] of Object.entries(p.signIns)) signIns[k] = (signIns[k] ?? 0) + v;
        rows.push(`| ${variant} | ${flood ? 'flood' : 'idle'} | ${fmt(median(ps.map((p) => p.p50)), 2)} | ${fmt(median(ps.map((p) => p.p99)), 2)} | ${fmt(flood ? summary[variant].floodP99 : summary[variant].idleP99, 2)} | ${fmt(median(ps.map((p) => p.gatewayCores)), 2)} | ${fmt(median(ps.map((p) => p.driverCores)), 2)} / ${flood ? fmt(median(ps.map((p) => p.senderCores)), 2) : '—'} | ${flood ? Object.entries(signIns).map(([k, v]) => `${k}: ${v}`).join(', ') : '—'} | ${ps.reduce((n, p) => n + p.errors, 0)} of ${ps.reduce((n, p) => n + p.latencies.length, 0)} | ${fmt(Math.max(...ps.map((p) => p.foreignCores)), 2)} |`);
      }
    }
    // The target is judged on the gateway's settings: the defaults, the budget, the pool's nice value.
    const judged = VARIANTS.filter((v) => v !== 'uncapped');
    const env = runEnv(started, source, runtime);
    const generated = [
      runHeading(started.toISOString(), NAME),
      '',
      `- machine: ${env.cpu} (nproc ${nproc}), Node ${env.node}`,
      `- gateways: src/ at ${source}; ${runtime.note}; NODE_ENV=production, LOG_LEVEL=warn, TRUSTED_PROXIES=["127.0.0.1"], limits at their defaults (enforced); \`capped\`: hashing bounded as by default, the pool at nice 0 (OWNER_PASSWORD_HASH_NICE=0, the default before); \`uncapped\`: OWNER_PASSWORD_HASH_CONCURRENCY=4, OWNER_PASSWORD_HASH_QUEUE=10000, nice 0 (the bound before issue 26); \`budget\`: capped and OWNER_PASSWORD_HASH_BUDGET=${budgetShare}; \`nice\`: OWNER_PASSWORD_HASH_NICE=19, the defaults since; run: ${VARIANTS.join(', ')}`,
      `- cores: each gateway may use every core; this script (the driver, which times /healthz) runs on core ${CLIENT_CORE}, the flood's sender on core ${SENDER_CORE}`,
      `- load: open loop over keep-alive connections: \`GET /healthz\` at ${rate}/s from this script, timed from send to last byte; during a flood also \`POST /owner/v1/session\` at ${floodRate}/s from a child process of its own (started before the run), each from an address of its own (X-Forwarded-For) with an email of its own and a wrong password; ${rounds} rounds, each an idle and a flood run of ${seconds} s per gateway, the gateways' order reversed every other round, after a 2 s warm-up flood per gateway`,
      `- other load on the machine: the script waited until other processes used less than 0.15 cores before each run (at most ${options.quietWait} s in all); the last column is the most other processes used during a run`,
      '',
      '| gateway | phase | /healthz p50 ms (median of runs) | p99 ms (median of runs) | p99 ms (all runs pooled) | gateway cores | driver / sender cores | sign-in answers | errors | other load (cores, max) |',
      '|---|---|---:|---:|---:|---:|---:|---|---:|---:|',
      ...rows,
      '',
      'Ratios of /healthz p99, flood over idle. Headline: the p99 of all flood runs pooled over the p99 of all idle runs pooled, with a 90 % interval from resampling whole rounds; then the per-round ratios and their median:',
      '',
      ...VARIANTS.map((v) => `- ${v}: **${fmt(summary[v].ratio, 2)}×** (pooled: ${fmt(summary[v].floodP99, 2)} ms / ${fmt(summary[v].idleP99, 2)} ms; 90 % interval ${fmt(summary[v].low, 2)}–${fmt(summary[v].high, 2)}×; per round ${summary[v].ratios.map((r) => fmt(r, 2)).join(', ')}; their median ${fmt(summary[v].medianRatio, 2)}×)`),
      '',
      ...judged.map((v) => `Target of issue 26, others' p99 under the flood at most ${TARGET}× idle (\`${v}\`, headline): **${summary[v].ratio <= TARGET ? 'met' : 'not met'}**${summary[v].high <= TARGET ? ', the whole interval too' : summary[v].low > TARGET ? ', the whole interval above' : ', the interval straddles it'}.`),
    ].join('\n');
    process.stdout.write(`${generated}\n`);
    writeRawFigures(RESULTS, 'owner-flood', started, { env, rate, floodRate, rounds, seconds, summary, phases: phases.map(({ latencies, ...p }) => ({ ...p, count: latencies.length })) });
    updateReport(NAME, REPORT, generated, { noReport: options.noReport });
  });
}

if (process.argv[2] === '--flood-child') void floodChild(process.argv.slice(3));
else main();
