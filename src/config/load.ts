/**
 * Builds the one frozen Config: schema defaults, then the JSON file named by GATEWAY_CONFIG,
 * then environment variables (the env names are declared in schema.ts). Any problem, from any
 * source, ends in a ConfigError listing every field at fault; main.ts prints it and exits
 * before listening.
 */
import { dirname, isAbsolute, resolve } from 'node:path';
import { OperatorFileError, readOperatorFile } from '../util/operator-file.js';
import { configSchema, describeSettings, type Config } from './schema.js';

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface LoadOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Settings layered over the file and under the environment; tests use it instead of files. */
  overrides?: Record<string, unknown>;
}

export function loadConfig({ env = process.env, cwd = process.cwd(), overrides }: LoadOptions = {}): Config {
  const problems: string[] = [];
  const raw: Record<string, unknown> = {};

  const file = env.GATEWAY_CONFIG;
  if (file !== undefined && file !== '') {
    const path = resolve(cwd, file);
    const fromFile = readConfigFile(path, problems);
    if (fromFile !== undefined) {
      resolvePaths(fromFile, dirname(path));
      deepMerge(raw, fromFile);
    }
  }
  if (overrides !== undefined) deepMerge(raw, structuredClone(overrides));

  const fromEnv = readEnv(env, problems);
  resolvePaths(fromEnv, cwd);
  deepMerge(raw, fromEnv);

  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const envByPath = new Map(describeSettings().map((s) => [s.path, s.env]));
    for (const issue of parsed.error.issues) {
      const path = issue.path.join('.') || '(top level)';
      const envName = envNameFor(issue.path.map(String), envByPath);
      const source = envName !== undefined && (env[envName] ?? '') !== '' ? ` (from env ${envName})` : '';
      problems.push(`${path}${source}: ${issue.message}`);
    }
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);

  const config = parsed.data;
  if (!isAbsolute(config.data.file)) config.data.file = resolve(cwd, config.data.file);
  return deepFreeze(config);
}

/** The env name of the setting that holds `path` (a problem may lie deep inside an array setting). */
function envNameFor(path: string[], envByPath: Map<string, string | undefined>): string | undefined {
  for (let end = path.length; end > 0; end--) {
    const setting = path.slice(0, end).join('.');
    if (envByPath.has(setting)) return envByPath.get(setting);
  }
  return undefined;
}

/**
 * Every setting's effective value by path, for the start-up log and `config check`; secrets are
 * redacted, and so are the credentials of any URL (`https://user:password@host`): a setting that
 * refuses them only where it is used (the directory URLs, outside the http store) still holds them.
 */
export function describeConfig(config: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const row of describeSettings()) {
    const value = row.path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], config);
    out[row.path] = row.secret && value !== undefined ? '[redacted]' : withoutUrlCredentials(value);
  }
  return out;
}

const URL_CREDENTIALS = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#@]*@/;

function withoutUrlCredentials(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(URL_CREDENTIALS, '$1[redacted]@');
  if (Array.isArray(value)) return value.map(withoutUrlCredentials);
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, withoutUrlCredentials(v)]));
  return value;
}

/** Far above any real configuration (routes, limits, inline PEMs), far below trouble. */
const MAX_CONFIG_FILE_BYTES = 4 * 1024 * 1024;

function readConfigFile(path: string, problems: string[]): Record<string, unknown> | undefined {
  let text: string;
  try {
    text = readOperatorFile(path, MAX_CONFIG_FILE_BYTES);
  } catch (err) {
    problems.push(`GATEWAY_CONFIG: cannot read ${path} (${err instanceof OperatorFileError ? err.reason : 'error'})`);
    return undefined;
  }
  try {
    const value: unknown = JSON.parse(text);
    if (isPlainObject(value)) return value;
    problems.push(`GATEWAY_CONFIG: ${path} must hold a JSON object`);
  } catch (err) {
    problems.push(`GATEWAY_CONFIG: ${path} is not valid JSON (${jsonErrorWithoutText(err as Error)})`);
  }
  return undefined;
}

/**
 * JSON.parse's message without the piece of the file V8 quotes in some of them (`Unexpected
 * token 'x', "{"pem": "-----BEGIN"... is not valid JSON`): the file holds secrets, and this
 * message goes to stderr, the log on a reload, and `config check`'s output.
 */
function jsonErrorWithoutText(err: Error): string {
  const at = /at position \d+(?: \(line \d+ column \d+\))?/.exec(err.message);
  const what = err.message.split(/[,(]|\bin JSON\b/)[0]!.trim();
  return at === null ? what : `${what} ${at[0]}`;
}

/** Environment values are strings; turn each into the type its setting expects. */
function readEnv(env: NodeJS.ProcessEnv, problems: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const row of describeSettings()) {
    if (row.env === undefined) continue;
    const text = env[row.env];
    if (text === undefined || text === '') continue;
    let value: unknown = text;
    if (row.type === 'number') {
      value = /^-?\d+(\.\d+)?$/.test(text.trim()) ? Number(text) : text;
    } else if (row.type === 'boolean') {
      value = text === 'true' ? true : text === 'false' ? false : text;
    } else if (row.commaList && !text.trimStart().startsWith('[')) {
      value = text.split(',').map((part) => part.trim()).filter((part) => part !== '');
    } else if (row.type === 'array' || row.type === 'object') {
      try {
        value = JSON.parse(text);
      } catch {
        problems.push(`${row.path} (from env ${row.env}): expected JSON`);
        continue;
      }
    }
    setPath(out, row.path.split('.'), value);
  }
  return out;
}

/** Relative file paths are taken from where they were written: the config file's folder, or cwd. */
function resolvePaths(raw: Record<string, unknown>, base: string): void {
  const data = raw.data as Record<string, unknown> | undefined;
  if (typeof data?.file === 'string') data.file = resolve(base, data.file);
  const redis = raw.redis as Record<string, unknown> | undefined;
  for (const name of ['tlsCaFile', 'tlsCertFile', 'tlsKeyFile']) {
    if (typeof redis?.[name] === 'string') redis[name] = resolve(base, redis[name]);
  }
  const tls = raw.tls as Record<string, unknown> | undefined;
  for (const name of ['certFile', 'keyFile', 'clientCaFile']) {
    if (typeof tls?.[name] === 'string') tls[name] = resolve(base, tls[name]);
  }
  if (Array.isArray(tls?.certificates)) {
    for (const entry of tls.certificates) {
      for (const name of ['certFile', 'keyFile']) if (typeof entry?.[name] === 'string') entry[name] = resolve(base, entry[name]);
    }
  }
  const keys = (raw.signing as Record<string, unknown> | undefined)?.keys;
  if (Array.isArray(keys)) {
    for (const key of keys) {
      if (typeof key?.pemFile === 'string') key.pemFile = resolve(base, key.pemFile);
    }
  }
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Objects merge key by key; anything else (arrays included) is replaced whole. */
function deepMerge(target: Record<string, unknown>, source: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(source)) {
    if (key === '__proto__' || key === 'constructor' || key === 'prototype') continue;
    if (isPlainObject(value) && isPlainObject(target[key])) deepMerge(target[key] as Record<string, unknown>, value);
    else target[key] = value;
  }
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
