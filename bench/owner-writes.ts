/**
 * Group commit on the data file: a burst of owner-API changes against a gateway on a large data
 * file, and what it does to everyone else. One gateway process (src/main.ts through tsx, no
 * Redis, limits off) on a generated data file of --accounts accounts with --roles roles each
 * (the defaults make about 9 MB, the size of issue 26's report); --changes account renames
 * (PATCH /owner/v1/accounts/{id}, the admin token) sent by --concurrency clients at once; while
 * they run, GET /healthz every 10 ms. Prints, as JSON: changes per second, file writes and
 * changes per write (from the gateway's gateway_data_file_* counters), and /healthz latency
 * (p50, p99, max) idle and during the burst; the gateway is pinned to the server core (where
 * there are two) and the clients to the other. Figures: bench/reports/owner-writes.md.
 *
 *   npm run bench:owner-writes -- [--accounts 100 --roles 600 --changes 400 --concurrency 32]
 *
 * Without group commit every change is one write of the whole file (changes per write 1.0).
 */
import { createHash, randomBytes } from 'node:crypto';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { REPORTS, startGateway } from './lib/gateway.js';
import { log, runHeading, updateReport, type Report } from './lib/report.js';
import { runBench } from './lib/run.js';

const NAME = 'bench:owner-writes';
const REPORT: Report = { file: join(REPORTS, 'owner-writes.md'), title: 'Owner writes: group commit on the data file', script: `npm run ${NAME}` };

const { values } = parseArgs({
  options: {
    accounts: { type: 'string', default: '100' },
    roles: { type: 'string', default: '600' },
    changes: { type: 'string', default: '400' },
    concurrency: { type: 'string', default: '32' },
    'no-report': { type: 'boolean', default: false },
  },
});
const accounts = Number(values.accounts);
const roles = Number(values.roles);
const changes = Number(values.changes);
const concurrency = Number(values.concurrency);

function latencies(ms: number[]): { samples: number; p50: number; p99: number; max: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => Number(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(1));
  return { samples: sorted.length, p50: at(0.5), p99: at(0.99), max: at(1) };
}

runBench({ name: NAME, slug: 'owner-writes', budgetMs: 10 * 60_000, tools: [], runtime: 'tsx' }, async ({ started, tmp, runtime }) => {
  const token = `gwadm_${randomBytes(32).toString('hex').slice(0, 43)}`;
  const digest = `sha256:${createHash('sha256').update(token).digest('hex')}`;
  const file = join(tmp, 'data.json');
  writeFileSync(file, JSON.stringify({
    owners: [],
    accounts: Array.from({ length: accounts }, (_, a) => ({
      id: `acct_${a}`,
      name: `Account ${a}`,
      roles: Array.from({ length: roles }, (_, r) => ({ id: r + 1, slug: `role-${r + 1}`, name: `Role number ${r + 1} of account ${a}`, description: 'A role made for the benchmark, with a description of ordinary length.', public: r % 2 === 0 })),
    })),
  }, null, 2));
  const gw = await startGateway({
    name: 'gateway',
    runtime,
    stdout: 'ignore',
    settings: { GATEWAY_DATA_FILE: file, OWNER_ADMIN_TOKEN_DIGESTS: JSON.stringify([digest]), RATE_LIMITS: 'off', DRAIN_DELAY_MS: '0', DATA_WATCH_INTERVAL_MS: '0' },
  });

  async function healthLatencies(until: () => boolean): Promise<number[]> {
    const samples: number[] = [];
    while (!until()) {
      const t0 = performance.now();
      await (await fetch(`${gw.url}/healthz`)).arrayBuffer();
      samples.push(performance.now() - t0);
      await sleep(10);
    }
    return samples;
  }
  const counter = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`${gw.url}/metrics`)).text())?.[1] ?? 0);

  const idleUntil = performance.now() + 3000;
  const idle = await healthLatencies(() => performance.now() > idleUntil);
  let sent = 0;
  let isBurstOver = false;
  const t0 = performance.now();
  const client = async () => {
    while (sent < changes) {
      const n = sent++;
      const res = await fetch(`${gw.url}/owner/v1/accounts/acct_${n % accounts}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `Renamed ${n}` }),
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`change ${n}: ${res.status}`);
    }
  };
  const [, burst] = await Promise.all([
    Promise.all(Array.from({ length: concurrency }, client)).finally(() => { isBurstOver = true; }),
    healthLatencies(() => isBurstOver),
  ]);
  const seconds = (performance.now() - t0) / 1000;
  const writes = await counter('gateway_data_file_writes_total');
  const written = await counter('gateway_data_file_changes_written_total');
  const figures = {
    fileMB: Number((statSync(file).size / 1e6).toFixed(1)),
    changes,
    concurrency,
    changesPerSecond: Number((changes / seconds).toFixed(1)),
    fileWrites: writes,
    changesPerWrite: Number((written / writes).toFixed(1)),
    healthzIdleMs: latencies(idle),
    healthzDuringBurstMs: latencies(burst),
  };
  log(JSON.stringify(figures, null, 2));
  const generated = [
    runHeading(started.toISOString(), NAME),
    '',
    `A data file of ${figures.fileMB} MB (${accounts} accounts of ${roles} roles); ${changes} account renames by ${concurrency} clients at once.`,
    '',
    '| changes/s | file writes | changes per write | /healthz idle p50 / p99 (ms) | /healthz during the burst p50 / p99 / max (ms) |',
    '|---|---|---|---|---|',
    `| ${figures.changesPerSecond} | ${writes} | ${figures.changesPerWrite} | ${figures.healthzIdleMs.p50} / ${figures.healthzIdleMs.p99} | ${figures.healthzDuringBurstMs.p50} / ${figures.healthzDuringBurstMs.p99} / ${figures.healthzDuringBurstMs.max} |`,
  ].join('\n');
  updateReport(NAME, REPORT, generated, { noReport: values['no-report'] });
});
