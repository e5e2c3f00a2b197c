/**
 * Every benchmark behind issue 32's targets, one after another, and one page that says where each
 * target stands: bench/reports/summary.md, a line per target with its figure from the latest
 * report of the bench that measures it (each bench still writes its own report, with its
 * method, tables, peers and profiles).
 *
 *   npm run bench:all [-- --only proxy,limits --skip memory --quiet-wait 120 --rounds 3
 *                         --summary-only]
 *
 * The benches run as their own npm scripts would (each builds src/ as the image does, starts
 * its peers and stops everything it started), in the order of the targets, with the options
 * that make their reports answer the issue (`--profile` where a target reads a profile). A
 * bench that fails does not stop the others: its target is then shown from its last report,
 * marked as older than this run. `--summary-only` runs nothing and rewrites the page from the
 * reports as they are. About 40 minutes on a 2-core machine (`--rounds 3`: about 30); run it on
 * a quiet one.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { usage } from './lib/cli.js';
import { REPORTS, ROOT } from './lib/gateway.js';
import { log } from './lib/report.js';

const NAME = 'bench:all';

interface Step {
  /** bench/<name>.ts, bench/reports/<name>.md */
  name: string;
  /** Options beyond each bench's defaults. */
  args: string[];
  /** Whether the bench takes --quiet-wait and --rounds (the load benches do; bench:memory paces its own load). */
  quietWait: boolean;
}

const STEPS: Step[] = [
  // Mode `many` (5,000 distinct tokens reused) is the issue's; `one` and `new` serve older targets.
  { name: 'proxy', args: ['--profile', '--modes', 'many'], quietWait: true },
  { name: 'limits', args: [], quietWait: true },
  { name: 'tls', args: [], quietWait: true },
  { name: 'workers', args: [], quietWait: true },
  { name: 'forward-auth', args: [], quietWait: true },
  { name: 'issuers', args: [], quietWait: true },
  { name: 'auth', args: ['--profile'], quietWait: true },
  { name: 'memory', args: [], quietWait: false },
];

interface Target {
  /** Issue 32's numbering. */
  n: number;
  text: string;
  report: string;
  /** Picks the report's verdict lines for this target. */
  lines: RegExp;
}

const TARGETS: Target[] = [
  { n: 1, text: 'CPU per proxied request ≤ 1.3× the bare Node proxy; throughput ≥ 1.25× Fastify + @fastify/jwt (HS256)', report: 'proxy', lines: /gateway \/ (bare Node proxy|fastify HS256), .*\(issue 32\)/ },
  { n: 2, text: 'access log, request metrics and the exchange ≤ 10 % of a proxied request (profile)', report: 'proxy', lines: /access log, request metrics and the exchange/ },
  { n: 3, text: 'rate limits on, against redis-server: ≥ 0.8× the same run with limits off', report: 'limits', lines: /throughput \(issue 32\)/ },
  { n: 4, text: 'HTTP/2 over TLS ≥ 1.0× HTTP/1.1 over TLS; TLS adds ≤ 20 % CPU per kept-alive request', report: 'tls', lines: /HTTP\/2 over TLS ÷|TLS ÷ cleartext/ },
  { n: 5, text: 'one worker per core by default; 2 workers ≥ 1.8× one worker on 2 cores (measured per gateway CPU-second here: bench/README.md)', report: 'workers', lines: /target ≥/ },
  { n: 6, text: 'forward-auth decisions ≥ 2× proxied requests per core', report: 'forward-auth', lines: /per core\)/ },
  { n: 6, text: 'an external-issuer token ≥ 0.95× an own token', report: 'issuers', lines: /target ≥/ },
  { n: 7, text: 'sign-in and refresh ≥ 0.9× the sign-in floor, limits off and on against Redis', report: 'auth', lines: /\/ floor: .*target/ },
  { n: 8, text: 'RSS under 1,000,000 distinct tokens over 10 minutes stays under the bound the docs give per cache size', report: 'memory', lines: /RSS bound for a cache/ },
];

const { values: args } = parseArgs({
  options: {
    only: { type: 'string' },
    skip: { type: 'string' },
    'quiet-wait': { type: 'string' },
    rounds: { type: 'string' },
    'summary-only': { type: 'boolean', default: false },
  },
});
const known = new Set(STEPS.map((s) => s.name));
const listed = (text: string | undefined, option: string): Set<string> | undefined => {
  if (text === undefined) return undefined;
  const names = new Set(text.split(',').map((s) => s.trim()).filter((s) => s !== ''));
  for (const name of names) if (!known.has(name)) usage(NAME, `--${option}: no bench named ${name} (${[...known].join(', ')})`);
  return names;
};
const only = listed(args.only, 'only');
const skip = listed(args.skip, 'skip') ?? new Set<string>();
const quietWait = args['quiet-wait'];
if (quietWait !== undefined && !/^\d+$/.test(quietWait)) usage(NAME, '--quiet-wait takes seconds');
/** Fewer rounds for a shorter run (each bench checks the number); its default otherwise. */
const rounds = args.rounds;
if (rounds !== undefined && !/^\d+$/.test(rounds)) usage(NAME, '--rounds takes a number');

/** Runs one bench as `npm run bench:<name>` would, its output passed through; resolves to its exit code. */
function runStep(step: Step): Promise<number> {
  const extra = [
    ...step.args,
    ...(step.quietWait && quietWait !== undefined ? ['--quiet-wait', quietWait] : []),
    ...(step.quietWait && rounds !== undefined ? ['--rounds', rounds] : []),
  ];
  log(`\n${NAME}: bench:${step.name}${extra.length > 0 ? ` -- ${extra.join(' ')}` : ''}`);
  const child = spawn(process.execPath, ['--import', 'tsx', join('bench', `${step.name}.ts`), ...extra], { cwd: ROOT, stdio: 'inherit' });
  return new Promise((done) => {
    child.once('error', () => done(127));
    child.once('exit', (code, signal) => done(code ?? (signal === null ? 1 : 128)));
  });
}

/** A report's run: its date (ISO) and the commit of src/ it measured, as its head says them. */
function runOf(text: string): { date: string | undefined; commit: string | undefined } {
  return {
    date: /^Run of \S+ \(([^)]+)\)/m.exec(text)?.[1],
    commit: /src\/ at (?:commit )?([0-9a-f]{7,40}\S*)/.exec(text)?.[1]?.replace(/[;,]$/, ''),
  };
}

/** `ran`: the benches this run ran, by exit code (none with --summary-only: nothing is then marked as older). */
function summary(started: Date, ran: Map<string, number>): string {
  const rows: string[] = [];
  const sources = new Map<string, string>();
  for (const target of TARGETS) {
    const file = join(REPORTS, `${target.report}.md`);
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const { date, commit } = runOf(text);
    const exit = ran.get(target.report);
    const stale = exit !== undefined && (date === undefined || new Date(date) < started);
    sources.set(target.report, `[${target.report}.md](${target.report}.md): run of ${date ?? 'never'}${commit === undefined ? '' : ` at ${commit}`}${exit === undefined ? (ran.size > 0 ? ' (not run this time)' : '') : exit === 0 ? '' : ` (**this run's bench:${target.report} failed, exit ${exit}: the figures are older**)`}${stale && exit === 0 ? ' (**older than this run**)' : ''}`);
    const found = text.split('\n').filter((line) => target.lines.test(line)).map((line) => line.replace(/^- /, '').trim());
    const verdicts = found.map((line) => (/not met/.test(line) ? 'not met' : /\bmet\b/.test(line) ? 'met' : '—'));
    const verdict = found.length === 0 ? 'no figure' : verdicts.every((v) => v === 'met') ? 'met' : verdicts.some((v) => v === 'met') ? 'partly met' : 'not met';
    rows.push(`| ${target.n} | ${target.text} | ${found.length === 0 ? `no figure in ${target.report}.md` : found.map((l) => l.replaceAll('|', '\\|')).join('<br>')} | ${verdict === 'met' ? 'met' : `**${verdict}**`} | [${target.report}.md](${target.report}.md) |`);
  }
  return [
    '# Issue 32\'s targets: where each stands',
    '',
    'Written by `npm run bench:all`, which runs every bench below one after another and then',
    'rewrites this page from their reports: a line per target, with the verdict lines of the',
    'report that measures it. Each report holds its method, peers, tables and profiles; what the',
    'figures have shown over time is in [bench/README.md](../README.md).',
    '',
    `Written ${started.toISOString()}, \`npm run ${NAME}${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}\`.`,
    '',
    '| # | target | figures (from the report) | verdict | report |',
    '|---:|---|---|---|---|',
    ...rows,
    '',
    'The reports:',
    '',
    ...[...sources.values()].map((s) => `- ${s}`),
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const started = new Date();
  const outcomes = new Map<string, number>();
  if (args['summary-only'] !== true) {
    for (const step of STEPS) {
      if ((only !== undefined && !only.has(step.name)) || skip.has(step.name)) continue;
      const code = await runStep(step);
      outcomes.set(step.name, code);
      if (code !== 0) log(`${NAME}: bench:${step.name} exited ${code}; going on with the others`);
    }
  }
  const file = join(REPORTS, 'summary.md');
  writeFileSync(file, summary(started, outcomes));
  log(`\n${NAME}: ${[...outcomes].map(([name, code]) => `${name} ${code === 0 ? 'ok' : `exit ${code}`}`).join(', ') || 'nothing run'}; summary written to ${file}`);
  if ([...outcomes.values()].some((code) => code !== 0)) process.exitCode = 1;
}

await main();
