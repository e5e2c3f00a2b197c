/**
 * npm run config:check -- [--config <file>] [--data <file>] [--json]
 * (in the image: node dist/cli/config-check.js [options])
 *
 * Checks a configuration before it is deployed, without starting anything (no listener, no
 * Redis connection, no file written): the configuration is read as the gateway reads it
 * (defaults, the GATEWAY_CONFIG file or --config, the environment), its signing keys loaded,
 * its data file (or --data) read; then the effective configuration is printed with secrets
 * redacted, and settings that work but are risky are named. Exit code: 0 clean, 1 errors (the
 * gateway would not start), 2 warnings only. docs/reload.md ("Checking a configuration")
 * lists the warnings; test/ops/config-check.test.ts holds them.
 *
 * Output: the effective configuration as JSON on stdout, warnings, errors and a summary line on
 * stderr; with --json, one JSON object on stdout instead: {ok, errors, warnings, settings}.
 */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createSigner } from '../auth/signer.js';
import { ConfigError, describeConfig, loadConfig } from '../config/load.js';
import { type Config, type RouteConfig } from '../config/schema.js';
import { readDataFile, type DataFile } from '../state/data-file/data-file.js';
import { checkDemoData, findDemoKeys } from '../state/data-file/demo-data.js';
import { isShippedDemoFile } from '../state/owners/file.js';
import { certificateProblems } from '../tls/certificates.js';
import { systemClock } from '../util/clock.js';
import { runWhenExecuted, type CommandRun } from './redis.js';

const USAGE = 'usage: npm run config:check -- [--config <file>] [--data <file>] [--json]\n'
  + '       (in the image: node dist/cli/config-check.js [--config <file>] [--data <file>] [--json])';

export type WarningCode = 'public-route-over-protected' | 'forward-authorization' | 'trusts-every-proxy'
  | 'metrics-on-public-port' | 'demo-data' | 'data-file-missing' | 'ephemeral-signing-key' | 'trusted-issuer-over-http';

export interface Finding {
  code: WarningCode;
  message: string;
}

export interface CheckReport {
  /** What stops the gateway from starting; empty when it would start. */
  errors: string[];
  warnings: Finding[];
  /** The effective configuration by setting path, secrets redacted; undefined when it did not load. */
  settings: Record<string, unknown> | undefined;
}

export interface CheckOptions {
  /** The environment the gateway would run with (GATEWAY_CONFIG, setting variables, NODE_ENV). */
  env: NodeJS.ProcessEnv;
  cwd?: string;
}

/** Everything the check finds, as a value (main() prints it). */
export function checkConfiguration({ env, cwd = process.cwd() }: CheckOptions): CheckReport {
  const report: CheckReport = { errors: [], warnings: [], settings: undefined };
  let config: Config;
  try {
    config = loadConfig({ env, cwd });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    report.errors.push(...err.problems);
    return report;
  }
  report.settings = describeConfig(config);
  try {
    // Loads and checks every key as start-up does (PEM, algorithm, activeKid); keeps nothing.
    createSigner(config, systemClock);
  } catch (err) {
    report.errors.push((err as Error).message);
  }
  // Every certificate and key read and checked as start-up does, each problem named.
  report.errors.push(...certificateProblems(config.tls));
  const data = readData(config, report);
  if (data !== undefined && config.data.keySource === 'file') checkDemo(config, data, env, report);
  report.warnings.push(...riskySettings(config));
  return report;
}

/** The data file the gateway would read (the demo data's saved copy, when it exists), without creating it. */
function readData(config: Config, report: CheckReport): DataFile | undefined {
  const saved = resolve(config.data.demoSaveFile);
  const file = isShippedDemoFile(config.data.file) && existsSync(saved) ? saved : config.data.file;
  if (!existsSync(file)) {
    if (existsSync(dirname(file))) {
      report.warnings.push({ code: 'data-file-missing', message: `data.file: ${file} does not exist; the gateway will create it with no accounts` });
      return undefined;
    }
    report.errors.push(`data.file: ${file} does not exist, nor does its folder`);
    return undefined;
  }
  try {
    return readDataFile(file);
  } catch (err) {
    report.errors.push((err as Error).message);
    return undefined;
  }
}

function checkDemo(config: Config, data: DataFile, env: NodeJS.ProcessEnv, report: CheckReport): void {
  const demo = findDemoKeys(data);
  if (demo.length === 0) return;
  try {
    // Under NODE_ENV=production without data.allowDemoData the gateway refuses to start.
    checkDemoData(data, { file: config.data.file, isProduction: env.NODE_ENV === 'production', allowDemoData: config.data.allowDemoData });
  } catch (err) {
    report.errors.push((err as Error).message);
    return;
  }
  report.warnings.push({
    code: 'demo-data',
    message: `the data file holds demo API keys or owners whose secrets and passwords are published in the README (${demo.join(', ')}): anyone who reaches the gateway can sign in with them`,
  });
}

/** Settings that are valid but open something up, each with why. */
export function riskySettings(config: Config): Finding[] {
  const found: Finding[] = [];
  const label = (r: RouteConfig) => (r.name === undefined ? `"${r.prefix}"` : `"${r.name}" (${r.prefix})`);
  const publicRoutes = config.routes.filter((r) => r.auth === 'public');
  for (const open of publicRoutes) {
    const outer = open.prefix.toLowerCase();
    for (const guarded of config.routes.filter((r) => r.auth === 'required')) {
      const inner = guarded.prefix.toLowerCase();
      if (outer === '/' || inner.startsWith(`${outer}/`)) {
        found.push({
          code: 'public-route-over-protected',
          message: `public route ${label(open)} lies over the protected route ${label(guarded)}: only paths under ${guarded.prefix} need a token; `
            + `if ${label(open)}'s backend serves those paths under another spelling (its own routing, case or encoding), they are open`,
        });
      } else if (inner.startsWith(outer)) {
        found.push({
          code: 'public-route-over-protected',
          message: `public route ${label(open)} is a prefix of the protected route ${label(guarded)} (not on a "/" boundary, so they match apart): check that ${open.prefix} is meant to be public`,
        });
      }
    }
  }
  for (const route of config.routes.filter((r) => r.forwardAuthorization)) {
    found.push({
      code: 'forward-authorization',
      message: `route ${label(route)} has forwardAuthorization on: its backend receives the caller's bearer token and can replay it at every other route until it expires`,
    });
  }
  for (const entry of config.proxy.trustedProxies.filter((p) => p.endsWith('/0'))) {
    found.push({
      code: 'trusts-every-proxy',
      message: `proxy.trustedProxies holds "${entry}", every address: any client can write X-Forwarded-For / Forwarded and pick the address its limits count`,
    });
  }
  for (const issuer of config.trustedIssuers) {
    const plain = [issuer.issuer, issuer.jwksUri].filter((url) => url !== undefined && url.startsWith('http:') && !isLoopbackUrl(url));
    if (plain.length > 0) {
      found.push({
        code: 'trusted-issuer-over-http',
        message: `trusted issuer "${issuer.issuer}" is reached over plain HTTP (${plain.join(', ')}): whoever is on the path can serve their own keys and sign tokens the gateway accepts; use https`,
      });
    }
  }
  if (config.signing.keys.length === 0) {
    found.push({
      code: 'ephemeral-signing-key',
      message: 'signing.keys (SIGNING_KEYS) is empty: a signing key is made at each start, so every restart ends every session (the access tokens signed before it no longer verify); configure a key for anything but a try-out',
    });
  }
  if (config.metrics.enabled && config.management.port === undefined) {
    found.push({
      code: 'metrics-on-public-port',
      message: 'metrics.enabled serves /metrics on the main port: set management.port (MANAGEMENT_PORT) to serve it, /healthz and /readyz on a port of their own',
    });
  }
  return found;
}

/**
 * The command on its arguments and environment, as a value: main() hands it to the process,
 * and tests run it in theirs (a process costs them more than the check).
 */
export function runConfigCheck(args: string[], env: NodeJS.ProcessEnv, cwd = process.cwd()): CommandRun {
  let values;
  try {
    values = parseArgs({ args, options: { config: { type: 'string' }, data: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean' } } }).values;
  } catch (err) {
    return { code: 1, stdout: '', stderr: `${(err as Error).message}\n${USAGE}\n` };
  }
  if (values.help === true) return { code: 0, stdout: `${USAGE}\n`, stderr: '' };
  const effective = { ...env };
  if (values.config !== undefined) effective.GATEWAY_CONFIG = resolve(cwd, values.config);
  // The environment is the highest source: the data file given here wins over any other.
  if (values.data !== undefined) effective.GATEWAY_DATA_FILE = resolve(cwd, values.data);
  const report = checkConfiguration({ env: effective, cwd });
  const code = report.errors.length > 0 ? 1 : report.warnings.length > 0 ? 2 : 0;

  if (values.json === true) return { code, stdout: `${JSON.stringify({ ok: report.errors.length === 0, ...report }, null, 2)}\n`, stderr: '' };
  const lines = [
    ...report.errors.map((e) => `error: ${e}`),
    ...report.warnings.map((w) => `warning (${w.code}): ${w.message}`),
  ];
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  const summary = report.errors.length > 0 ? `config check: ${count(report.errors.length, 'error')}, ${count(report.warnings.length, 'warning')}: the gateway would not start`
    : report.warnings.length > 0 ? `config check: ${count(report.warnings.length, 'warning')}` : 'config check: no problems';
  return {
    code,
    stdout: report.settings === undefined ? '' : `${JSON.stringify(report.settings, null, 2)}\n`,
    stderr: `${[...lines, summary].join('\n')}\n`,
  };
}

async function main(): Promise<void> {
  const { code, stdout, stderr } = runConfigCheck(process.argv.slice(2), process.env);
  process.stdout.write(stdout);
  process.stderr.write(stderr);
  process.exitCode = code;
}

runWhenExecuted(import.meta.url, main);

/** http://localhost, 127.0.0.0/8 or [::1]: a provider on the same host (tests, a sidecar) is no eavesdropper's. */
function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || /^127\./.test(host);
}
