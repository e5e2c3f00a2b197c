/**
 * `gatewayctl migrate`, `export` and `import`: the owners' state (owners; accounts with their
 * keys, members, invites and settings tokens; roles; sign records; audit events) copied from
 * the data file into Redis, or to and from a backup in JSON lines, from either store.
 *
 * Every copy is planned before anything is written: a record the target lacks is created, one
 * it holds exactly as the source does is left alone (so a second run writes nothing and says
 * so), and one it holds otherwise is a conflict. Any conflict refuses the whole copy, nothing
 * written, unless `force` is given: then the source's version replaces the target's (in Redis
 * the audit stream is only appended to: the source's events it lacks are added). Two owners
 * with one email cannot be forced. After writing, the target is read back and every record
 * copied is compared with the source by its digest; a difference is an error.
 *
 * Records are compared in one normal form (records.ts's schemas with their defaults, sign
 * record times in UTC, roles by id, audit events cut to the newest `owner.auditMaxEventsPerAccount`,
 * as either store keeps them) and digested as JSON with sorted keys.
 * test/cli/owner-data.test.ts holds all of this against a real redis-server.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { dataFileSchema, readDataFile, type AccountData, type DataFile } from '../state/data-file/data-file.js';
import { DataFileWriter } from '../state/data-file/writer.js';
import { checkDemoData } from '../state/data-file/demo-data.js';
import { createRecordReader } from '../state/directory/records.js';
import type { OwnerRecord } from '../state/owners/records.js';
import { isShippedDemoFile } from '../state/owners/file.js';
import { RedisOwnerStore } from '../state/owners/redis.js';
import type { Config } from '../config/schema.js';
import { createLogger } from '../telemetry/log.js';
import { UsageError, withRedis } from './redis.js';

export type StoreName = 'file' | 'redis';

export const EXPORT_FORMAT = 'auth-gateway-owner-data';

/** A copy that was refused or did not verify: exit 1 with its message. */
export class CopyRefused extends Error {
  override name = 'CopyRefused';
}

type Json = Record<string, unknown>;

/** JSON with object keys sorted at every level: one spelling per value, so one digest. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v as Json).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : v));
}

function digestOf(value: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex')}`;
}

const byId = <T extends { id: string | number }>(a: T, b: T) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** `data` validated (defaults filled in) and in the normal form records are compared in. */
export function normalise(data: unknown, maxAuditEvents: number, where: string): DataFile {
  const parsed = dataFileSchema.safeParse(data);
  if (!parsed.success) throw new CopyRefused(`${where} is not valid owner data:\n${parsed.error.issues.map((i) => `  - ${i.path.join('.') || '(top level)'}: ${i.message}`).join('\n')}`);
  return {
    owners: [...parsed.data.owners].sort(byId),
    accounts: [...parsed.data.accounts].sort(byId).map((a) => ({
      ...a,
      roles: [...a.roles].sort(byId),
      signRecords: a.signRecords.map((r) => ({
        address: r.address.toLowerCase(),
        signedNonce: r.signedNonce,
        signedAt: new Date(r.signedAt).toISOString(),
        signedExpiredAt: new Date(r.signedExpiredAt).toISOString(),
      })).sort((x, y) => (x.address < y.address ? -1 : 1)),
      audit: a.audit.slice(-maxAuditEvents),
    })),
  };
}

export interface Counts {
  owners: number;
  accounts: number;
  keys: number;
  settingsTokens: number;
  members: number;
  invites: number;
  roles: number;
  signRecords: number;
  audit: number;
}

export function countsOf(data: DataFile): Counts {
  const sum = (f: (a: AccountData) => number) => data.accounts.reduce((n, a) => n + f(a), 0);
  return {
    owners: data.owners.length,
    accounts: data.accounts.length,
    keys: sum((a) => a.apiKeys.length),
    settingsTokens: sum((a) => a.settingsTokens.length),
    members: sum((a) => a.members.length),
    invites: sum((a) => a.invites.length),
    roles: sum((a) => a.roles.length),
    signRecords: sum((a) => a.signRecords.length),
    audit: sum((a) => a.audit.length),
  };
}

function describeCounts(c: Counts): string {
  return `${c.owners} owners, ${c.accounts} accounts, ${c.keys} keys, ${c.settingsTokens} settings tokens, ${c.members} members, ${c.invites} invites, ${c.roles} roles, ${c.signRecords} sign records, ${c.audit} audit events`;
}

// ---- JSON lines -------------------------------------------------------------------------

/** What an account line leaves to lines of their own. */
const PARTS = [['member', 'members'], ['invite', 'invites'], ['key', 'apiKeys'], ['settingsToken', 'settingsTokens'], ['role', 'roles'], ['signRecord', 'signRecords'], ['audit', 'audit']] as const;

/** The record lines of `data` (normalised), in export order: owners, then each account followed by its parts. */
function recordLines(data: DataFile): string[] {
  const lines: Json[] = data.owners.map((o) => ({ type: 'owner', ...o }));
  for (const account of data.accounts) {
    const { members: _m, invites: _i, apiKeys: _k, settingsTokens: _s, roles: _r, signRecords: _g, audit: _a, ...doc } = account;
    lines.push({ type: 'account', ...doc });
    for (const [type, field] of PARTS) for (const part of account[field]) lines.push({ type, accountId: account.id, ...part });
  }
  return lines.map(canonicalJson);
}

/** The digest an export's last line names: of its record lines, so equal data gives equal digests whatever the store. */
function exportDigest(lines: string[]): string {
  return `sha256:${createHash('sha256').update(lines.join('\n'), 'utf8').digest('hex')}`;
}

/** `data` (normalised) as JSON lines: a header, one record a line, and a last line with the counts and digest. */
export function toJsonLines(data: DataFile, source: StoreName, now: Date): string {
  const lines = recordLines(data);
  return [
    canonicalJson({ type: 'header', format: EXPORT_FORMAT, version: 1, source, exportedAt: now.toISOString() }),
    ...lines,
    canonicalJson({ type: 'end', counts: countsOf(data), digest: exportDigest(lines) }),
  ].join('\n');
}

/** An export read back: refused when a line is not JSON, a record is invalid, or the end line's counts or digest disagree (a cut or edited file). */
export function fromJsonLines(text: string, maxAuditEvents: number, where: string): DataFile {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const records = lines.map((line, n) => {
    try {
      const value = JSON.parse(line) as unknown;
      if (value === null || typeof value !== 'object' || Array.isArray(value) || typeof (value as Json).type !== 'string') throw new Error('no type');
      return value as Json & { type: string };
    } catch {
      throw new CopyRefused(`${where}: line ${n + 1} is not a record (a JSON object with a "type")`);
    }
  });
  const header = records[0];
  if (header?.type !== 'header' || header.format !== EXPORT_FORMAT || header.version !== 1) throw new CopyRefused(`${where}: the first line is not the header of a version 1 ${EXPORT_FORMAT} export`);
  const end = records[records.length - 1];
  if (records.length < 2 || end?.type !== 'end') throw new CopyRefused(`${where}: no end line: the export was cut short`);
  const data: { owners: Json[]; accounts: Array<Json & Record<string, unknown[]>> } = { owners: [], accounts: [] };
  const accounts = new Map<string, Json & Record<string, unknown[]>>();
  const fields = new Map<string, string>(PARTS);
  records.slice(1, -1).forEach((record, n) => {
    const { type, ...rest } = record;
    if (type === 'owner') data.owners.push(rest);
    else if (type === 'account') {
      const account = { ...rest, ...Object.fromEntries(PARTS.map(([, field]) => [field, []])) } as Json & Record<string, unknown[]>;
      accounts.set(String(rest.id), account);
      data.accounts.push(account);
    } else if (fields.has(type)) {
      const { accountId, ...part } = rest;
      const account = accounts.get(String(accountId));
      if (account === undefined) throw new CopyRefused(`${where}: line ${n + 2} (${type}) names account ${JSON.stringify(accountId)}, which no earlier line holds`);
      account[fields.get(type)!]!.push(part);
    } else {
      throw new CopyRefused(`${where}: line ${n + 2} has an unknown type ${JSON.stringify(type)}`);
    }
  });
  const parsed = normalise(data, maxAuditEvents, where);
  const digest = exportDigest(recordLines(parsed));
  if (canonicalJson(end.counts) !== canonicalJson(countsOf(parsed)) || end.digest !== digest) {
    throw new CopyRefused(`${where}: its records do not match its end line (counts or digest): the export was changed or cut`);
  }
  return parsed;
}

// ---- Planning, writing, verifying ---------------------------------------------------------

export interface Plan {
  create: { owners: OwnerRecord[]; accounts: AccountData[] };
  /** Held otherwise by the target: written only with force. */
  differ: { owners: OwnerRecord[]; accounts: AccountData[] };
  same: { owners: number; accounts: number };
  /** Why the copy cannot be made even with force. */
  blocked: string[];
  /** One line per differing record, naming what differs. */
  conflicts: string[];
}

function lastAuditAt(account: AccountData | undefined): string {
  return account?.audit[account.audit.length - 1]?.at ?? 'none';
}

export function planCopy(source: DataFile, target: DataFile, targetName: string): Plan {
  const plan: Plan = { create: { owners: [], accounts: [] }, differ: { owners: [], accounts: [] }, same: { owners: 0, accounts: 0 }, blocked: [], conflicts: [] };
  const owners = new Map(target.owners.map((o) => [o.id, o]));
  const emails = new Map(target.owners.map((o) => [o.email.toLowerCase(), o.id]));
  for (const owner of source.owners) {
    const held = owners.get(owner.id);
    const emailHolder = emails.get(owner.email.toLowerCase());
    if (emailHolder !== undefined && emailHolder !== owner.id) plan.blocked.push(`owner ${owner.id}: ${targetName} has another owner (${emailHolder}) with the email ${owner.email}`);
    else if (held === undefined) plan.create.owners.push(owner);
    else if (digestOf(held) === digestOf(owner)) plan.same.owners++;
    else {
      plan.differ.owners.push(owner);
      plan.conflicts.push(`owner ${owner.id} (${owner.email}) differs in ${targetName}`);
    }
  }
  const accounts = new Map(target.accounts.map((a) => [a.id, a]));
  for (const account of source.accounts) {
    const held = accounts.get(account.id);
    if (held === undefined) plan.create.accounts.push(account);
    else if (digestOf(held) === digestOf(account)) plan.same.accounts++;
    else {
      plan.differ.accounts.push(account);
      const [there, here] = [held.audit.at(-1)?.at, account.audit.at(-1)?.at];
      const newer = there !== undefined && (here === undefined || Date.parse(there) > Date.parse(here)) ? ', with newer changes there' : '';
      plan.conflicts.push(`account ${account.id} differs in ${targetName}${newer} (its last audit event there: ${lastAuditAt(held)}; in the source: ${lastAuditAt(account)})`);
    }
  }
  return plan;
}

/** What a store is to a copy: read whole, written record by record. */
interface Target {
  name: string;
  read(): Promise<DataFile>;
  write(plan: Plan, force: boolean): Promise<void>;
}

export interface CopyResult {
  plan: Plan;
  written: { owners: number; accounts: number };
  counts: Counts;
  digest: string;
}

/**
 * Copies `source` (normalised) into `target` as the module's opening says; `ifEmpty` copies
 * only into a target that holds no account at all (a seed that must run once).
 */
async function copy(source: DataFile, target: Target, { force, ifEmpty, maxAuditEvents }: { force: boolean; ifEmpty: boolean; maxAuditEvents: number }): Promise<CopyResult | 'not_empty'> {
  const before = normalise(await target.read(), maxAuditEvents, target.name);
  if (ifEmpty && before.accounts.length > 0) return 'not_empty';
  const plan = planCopy(source, before, target.name);
  if (plan.blocked.length > 0) throw new CopyRefused(`refused, nothing written:\n${plan.blocked.map((b) => `  - ${b}`).join('\n')}`);
  if (plan.conflicts.length > 0 && !force) {
    throw new CopyRefused(`refused, nothing written: ${target.name} holds different data (changed since, or another deployment's):\n${plan.conflicts.map((c) => `  - ${c}`).join('\n')}\nRun again with --force to replace ${target.name}'s version with the source's.`);
  }
  const written = {
    owners: plan.create.owners.length + (force ? plan.differ.owners.length : 0),
    accounts: plan.create.accounts.length + (force ? plan.differ.accounts.length : 0),
  };
  if (written.owners + written.accounts > 0) await target.write(plan, force);
  // Read back: every record of the source must be there as the source has it.
  const after = normalise(await target.read(), maxAuditEvents, target.name);
  const forced = new Set(force ? plan.differ.accounts.map((a) => a.id) : []);
  const heldOwners = new Map(after.owners.map((o) => [o.id, o]));
  const heldAccounts = new Map(after.accounts.map((a) => [a.id, a]));
  const wrong: string[] = [];
  for (const owner of source.owners) if (digestOf(heldOwners.get(owner.id)) !== digestOf(owner)) wrong.push(`owner ${owner.id}`);
  for (const account of source.accounts) {
    const held = heldAccounts.get(account.id);
    // A forced account's audit stream keeps what it had: the source's events must be among it.
    const same = held !== undefined && (forced.has(account.id)
      ? digestOf({ ...held, audit: [] }) === digestOf({ ...account, audit: [] }) && account.audit.every((e) => held.audit.some((h) => digestOf(h) === digestOf(e)))
      : digestOf(held) === digestOf(account));
    if (!same) wrong.push(`account ${account.id}`);
  }
  if (wrong.length > 0) throw new CopyRefused(`copied, but ${target.name} does not read back as the source for: ${wrong.join(', ')}`);
  return { plan, written, counts: countsOf(source), digest: exportDigest(recordLines(source)) };
}

export function describeCopy(result: CopyResult | 'not_empty', from: string, to: string): string {
  if (result === 'not_empty') return `${to} already holds accounts: nothing copied (--if-empty).`;
  const { plan, written, counts, digest } = result;
  const head = written.owners + written.accounts === 0
    ? `Nothing to do: ${to} already holds every owner and account of ${from} as it has them.`
    : `Copied ${written.owners} owners and ${written.accounts} accounts from ${from} to ${to} (${plan.same.owners} owners and ${plan.same.accounts} accounts were there already).`;
  return `${head}\nVerified: ${describeCounts(counts)}; digest ${digest}.`;
}

// ---- The stores -------------------------------------------------------------------------

/**
 * The data file as the gateway reads it: the configured `data.file`, or, for the shipped demo
 * file, the file its owner changes were saved to (data.demoSaveFile) once there is one.
 */
export function configuredDataFile(config: Config): string {
  const saved = resolve(config.data.demoSaveFile);
  return isShippedDemoFile(config.data.file) && existsSync(saved) ? saved : config.data.file;
}

function warnDemoData(data: DataFile, file: string, config: Config, warn: (line: string) => void): void {
  const warning = checkDemoData(data, { file, isProduction: process.env.NODE_ENV === 'production', allowDemoData: config.data.allowDemoData });
  if (warning !== undefined) warn(`warning: ${warning}`);
}

function fileTarget(file: string): Target {
  return {
    name: `the data file ${file}`,
    read: async () => (existsSync(file) ? readDataFile(file) : { accounts: [], owners: [] }),
    async write(plan, force) {
      if (isShippedDemoFile(file)) throw new CopyRefused(`${file} is the shipped demo file, which is never written: give another file (--file)`);
      const current = existsSync(file) ? readDataFile(file) : { accounts: [], owners: [] };
      const replaced = (force ? plan.differ : { owners: [], accounts: [] });
      const appeared = [
        ...plan.create.owners.filter((o) => current.owners.some((c) => c.id === o.id)).map((o) => `owner ${o.id}`),
        ...plan.create.accounts.filter((a) => current.accounts.some((c) => c.id === a.id)).map((a) => `account ${a.id}`),
      ];
      if (appeared.length > 0) throw new CopyRefused(`refused, nothing written: ${appeared.join(', ')} appeared in ${file} while copying: run again to compare`);
      const owners = new Map(current.owners.map((o) => [o.id, o]));
      for (const o of [...plan.create.owners, ...replaced.owners]) owners.set(o.id, o);
      const accounts = new Map(current.accounts.map((a) => [a.id, a]));
      for (const a of [...plan.create.accounts, ...replaced.accounts]) accounts.set(a.id, a);
      await new DataFileWriter(file, { log: createLogger('warn', process.stderr) }).write({ owners: [...owners.values()], accounts: [...accounts.values()] });
    },
  };
}

function redisTarget(store: RedisOwnerStore): Target {
  return {
    name: 'Redis',
    read: () => store.exportData(),
    async write(plan, force) {
      // Owners first: an account's members name them. What the plan found missing must still be
      // missing (an owner may have made it meanwhile): only a forced copy replaces.
      const appeared: string[] = [];
      for (const owner of plan.create.owners) if (!(await store.createOwner(owner))) appeared.push(`owner ${owner.id}`);
      if (force) for (const owner of plan.differ.owners) await store.replaceOwner(owner);
      for (const account of plan.create.accounts) if (!(await store.replaceAccount(account, { createOnly: true }))) appeared.push(`account ${account.id}`);
      if (force) for (const account of plan.differ.accounts) await store.replaceAccount(account);
      if (appeared.length > 0) throw new CopyRefused(`stopped: ${appeared.join(', ')} appeared in Redis while copying (left as they are); the rest was copied: run again to compare`);
    },
  };
}

async function withRedisStore<T>(fn: (store: RedisOwnerStore, config: Config) => Promise<T>): Promise<T> {
  return withRedis((redis, config) => fn(new RedisOwnerStore(redis, {
    records: createRecordReader(config.directory.timeZone),
    log: createLogger('warn', process.stderr),
    maxAuditEvents: config.owner.auditMaxEventsPerAccount,
  }), config));
}

export interface CopyOptions {
  force: boolean;
  ifEmpty: boolean;
  warn: (line: string) => void;
}

/** `gatewayctl migrate`: the data file (`file`, default the configured one) into the configured Redis. */
export function migrate(file: string | undefined, { force, ifEmpty, warn }: CopyOptions): Promise<string> {
  return withRedisStore(async (store, config) => {
    const from = file ?? configuredDataFile(config);
    const raw = readDataFile(from);
    warnDemoData(raw, from, config, warn);
    const maxAuditEvents = config.owner.auditMaxEventsPerAccount;
    const source = normalise(raw, maxAuditEvents, from);
    const result = await copy(source, redisTarget(store), { force, ifEmpty, maxAuditEvents });
    return describeCopy(result, `the data file ${from}`, 'Redis');
  });
}

/** `gatewayctl export`: JSON lines of the owner data in `from`. */
export async function exportData(from: StoreName, file: string | undefined, config: Config, now: Date): Promise<{ text: string; counts: Counts }> {
  const maxAuditEvents = config.owner.auditMaxEventsPerAccount;
  const data = from === 'redis'
    ? normalise(await withRedisStore((store) => store.exportData()), maxAuditEvents, 'Redis')
    : normalise(readDataFile(file ?? configuredDataFile(config)), maxAuditEvents, file ?? configuredDataFile(config));
  return { text: toJsonLines(data, from, now), counts: countsOf(data) };
}

/** `gatewayctl import`: an export (`text`, read from `where`) into `to`. */
export async function importData(text: string, where: string, to: StoreName, file: string | undefined, config: Config, { force, ifEmpty, warn }: CopyOptions): Promise<string> {
  const maxAuditEvents = config.owner.auditMaxEventsPerAccount;
  const source = fromJsonLines(text, maxAuditEvents, where);
  warnDemoData(source, where, config, warn);
  if (to === 'redis') {
    return withRedisStore(async (store) => describeCopy(await copy(source, redisTarget(store), { force, ifEmpty, maxAuditEvents }), where, 'Redis'));
  }
  const target = file ?? configuredDataFile(config);
  return describeCopy(await copy(source, fileTarget(target), { force, ifEmpty, maxAuditEvents }), where, `the data file ${target}`);
}

/** The text of an export file, `-` for standard input. */
export function readExport(path: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${(err as Error).message}`);
  }
}
