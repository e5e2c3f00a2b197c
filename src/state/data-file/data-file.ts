/**
 * The data file of the embedded default (config/demo-data.json): accounts with their API keys,
 * roles and sign records. Validated as strictly as the config; a bad file stops start-up with
 * every problem listed by path.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync, type Stats } from 'node:fs';
import { z } from 'zod';
import { ADDRESS_PATTERN } from '../../domain/formats.js';
import type { Logger } from '../../telemetry/log.js';
import type { Timers } from '../../util/clock.js';
import type { SignRecord } from '../directory/store.js';
import type { ApiKeyRecord } from '../keys/store.js';
import { apiKeySchema, auditEventSchema, ID, inviteSchema, isoTime, memberSchema, ownerSchema, settingsTokenSchema, WEBHOOK_ENDPOINTS_MAX, webhookEndpointSchema } from '../owners/records.js';

const roleSchema = z.strictObject({
  id: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  slug: z.string().min(1).max(256),
  name: z.string().min(1).max(256),
  description: z.string().max(4096).default(''),
  public: z.boolean(),
});

const signRecordSchema = z.strictObject({
  address: z.string().regex(ADDRESS_PATTERN, 'expected 0x and 40 hex digits'),
  signedNonce: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  signedAt: z.iso.datetime({ offset: true }),
  signedExpiredAt: z.iso.datetime({ offset: true }),
});

/**
 * An account. Everything past `signRecords` is written by the owner API (src/owner/) and
 * optional, so a hand-written file needs none of it.
 */
const accountSchema = z.strictObject({
  id: ID,
  name: z.string().max(256).optional(),
  apiKeys: z.array(apiKeySchema).default([]),
  roles: z.array(roleSchema).default([]),
  signRecords: z.array(signRecordSchema).default([]),
  /** false: no key of the account signs in, and no token of it is accepted. */
  enabled: z.boolean().default(true),
  createdAt: isoTime.optional(),
  /** A deleted account keeps its id (never reused) and its audit events, nothing else. */
  deletedAt: isoTime.optional(),
  members: z.array(memberSchema).default([]),
  invites: z.array(inviteSchema).default([]),
  settingsTokens: z.array(settingsTokenSchema).default([]),
  /** Where the account's owner events are sent (owner/webhooks.ts). */
  webhooks: z.array(webhookEndpointSchema).max(WEBHOOK_ENDPOINTS_MAX).default([]),
  /** Every owner of the account must use a second factor (owner/second-factor.ts): those without one enroll first. */
  requireSecondFactor: z.boolean().optional(),
  /** Newest last; the owner store keeps the newest `owner.auditMaxEventsPerAccount`. */
  audit: z.array(auditEventSchema).default([]),
});

const dataFileObject = z.strictObject({
  accounts: z.array(accountSchema),
  /** People who manage accounts (members of them); global, since one may own several accounts. */
  owners: z.array(ownerSchema).default([]),
});

type CrossIssue = {
  code: 'custom';
  path: (string | number)[];
  message: string;
};

/** What no single record can check: ids, keys, digests and emails unique, members that are owners. */
function checkAcrossRecords(data: z.infer<typeof dataFileObject>, ctx: { addIssue(issue: CrossIssue): void }): void {
  const owners = { id: new Set<string>(), email: new Set<string>() };
  data.owners.forEach((owner, o) => {
    if (owners.id.has(owner.id)) ctx.addIssue({ code: 'custom', path: ['owners', o, 'id'], message: `duplicate owner id "${owner.id}"` });
    const email = owner.email.toLowerCase();
    if (owners.email.has(email)) ctx.addIssue({ code: 'custom', path: ['owners', o, 'email'], message: 'duplicate email (emails compare case-insensitively)' });
    owners.id.add(owner.id);
    owners.email.add(email);
  });
  const seen = { account: new Set<string>(), apiKey: new Set<string>(), keyId: new Set<string>(), tokenId: new Set<string>(), tokenDigest: new Set<string>() };
  data.accounts.forEach((account, a) => {
    account.settingsTokens.forEach((token, t) => {
      if (seen.tokenId.has(token.id)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'settingsTokens', t, 'id'], message: `duplicate settings token id "${token.id}"` });
      if (seen.tokenDigest.has(token.digest)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'settingsTokens', t, 'digest'], message: 'duplicate settings token digest' });
      seen.tokenId.add(token.id);
      seen.tokenDigest.add(token.digest);
    });
    account.members.forEach((member, m) => {
      if (!owners.id.has(member.ownerId)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'members', m, 'ownerId'], message: `no owner has id "${member.ownerId}"` });
    });
    if (seen.account.has(account.id)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'id'], message: `duplicate account id "${account.id}"` });
    seen.account.add(account.id);
    account.apiKeys.forEach((key, k) => {
      if (seen.keyId.has(key.id)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'apiKeys', k, 'id'], message: `duplicate key id "${key.id}"` });
      if (seen.apiKey.has(key.apiKey)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'apiKeys', k, 'apiKey'], message: 'duplicate apiKey' });
      seen.keyId.add(key.id);
      seen.apiKey.add(key.apiKey);
    });
    const roleIds = new Set<number>();
    account.roles.forEach((role, r) => {
      if (roleIds.has(role.id)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'roles', r, 'id'], message: `duplicate role id ${role.id}` });
      roleIds.add(role.id);
    });
    const addresses = new Set<string>();
    account.signRecords.forEach((record, s) => {
      const address = record.address.toLowerCase();
      if (addresses.has(address)) ctx.addIssue({ code: 'custom', path: ['accounts', a, 'signRecords', s, 'address'], message: 'duplicate address (addresses compare case-insensitively)' });
      addresses.add(address);
    });
  });
}

export const dataFileSchema = dataFileObject.superRefine((data, ctx) => checkAcrossRecords(data, { addIssue: (issue) => ctx.addIssue(issue) }));

export type DataFile = z.infer<typeof dataFileSchema>;
export type AccountData = DataFile['accounts'][number];

/**
 * The same as `dataFileSchema.parse(next)` for a `next` whose accounts in `unchanged` are those
 * of a version that passed it (as they were): only the other accounts and the owners are
 * parsed again, and the checks across records run on the whole. What the owner store's group
 * commit checks each batch with, so that a batch costs what it changed, not the whole file.
 * Throws the ZodError the whole parse would.
 */
export function checkChangedDataFile(next: DataFile, unchanged: ReadonlySet<AccountData>): DataFile {
  const issues: z.core.$ZodIssue[] = [];
  const under = (prefix: (string | number)[], error: z.ZodError) => issues.push(...error.issues.map((i) => ({ ...i, path: [...prefix, ...i.path] })));
  const accounts = next.accounts.map((account, a) => {
    if (unchanged.has(account)) return account;
    const parsed = accountSchema.safeParse(account);
    if (parsed.success) return parsed.data;
    under(['accounts', a], parsed.error);
    return account;
  });
  const owners = z.array(ownerSchema).safeParse(next.owners);
  if (!owners.success) under(['owners'], owners.error);
  const data = { accounts, owners: owners.success ? owners.data : next.owners };
  if (issues.length === 0) checkAcrossRecords(data, { addIssue: (issue) => void issues.push({ ...issue, input: undefined }) });
  if (issues.length > 0) throw new z.ZodError(issues);
  return data;
}

/** A key of the data file as every key directory holds it. */
export function toApiKeyRecord(account: Pick<AccountData, 'id' | 'enabled' | 'deletedAt'>, key: AccountData['apiKeys'][number]): ApiKeyRecord {
  return Object.freeze({
    keyId: key.id,
    accountId: account.id,
    secretDigest: key.secretDigest,
    // A disabled or deleted account's keys sign no one in, whatever each key says.
    disabled: key.disabled || !account.enabled || account.deletedAt !== undefined,
    scopes: Object.freeze([...key.scopes]),
    ...(key.previousSecretDigest !== undefined && key.previousValidUntil !== undefined
      ? { previousSecretDigest: key.previousSecretDigest, previousValidUntil: Date.parse(key.previousValidUntil) }
      : {}),
    ...(key.certificateSha256 === undefined ? {} : { certificateSha256: key.certificateSha256 }),
    ...(key.requireDpop === true ? { requireDpop: true } : {}),
  });
}

/** A sign record of the data file as every directory holds it: address lowercase, times in epoch ms. */
export function toSignRecord(record: AccountData['signRecords'][number]): SignRecord {
  return Object.freeze({
    address: record.address.toLowerCase(),
    signedNonce: record.signedNonce,
    signedAt: Date.parse(record.signedAt),
    signedExpiredAt: Date.parse(record.signedExpiredAt),
  });
}

export class DataFileError extends Error {
  constructor(file: string, problems: string[]) {
    super(`invalid data file ${file}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'DataFileError';
  }
}

export function readDataFile(file: string): DataFile {
  return parseDataFile(file, readDataFileText(file));
}

function readDataFileText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new DataFileError(file, [`cannot be read: ${(err as Error).message}`]);
  }
}

/** `text` as the data file `file` holds it; throws DataFileError listing every problem. */
export function parseDataFile(file: string, text: string): DataFile {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    // V8 quotes the text around a JSON syntax error, and this file holds API keys: only the
    // position is kept.
    throw new DataFileError(file, [`not valid JSON${/ at position \d+.*$|$/.exec((err as Error).message)![0]}`]);
  }
  const parsed = dataFileSchema.safeParse(value);
  if (!parsed.success) {
    throw new DataFileError(file, parsed.error.issues.map((i) => `${i.path.join('.') || '(top level)'}: ${i.message}`));
  }
  return parsed.data;
}

export interface WatchOptions {
  /** True for a version this process wrote itself (owner-store.file.ts): it is already served, so it is skipped silently. */
  isOwnVersion?: (text: string) => boolean;
  /** What waits between looks: real time unless a test drives it (test/state/owners-file.test.ts). */
  timers?: Timers;
}

/** Real time, unref'd: a watched file never keeps the process alive. */
const unrefTimers: Timers = {
  setTimer(ms, fire) {
    const timeout = setTimeout(fire, ms).unref();
    return { cancel: () => clearTimeout(timeout), refresh: () => void timeout.refresh() };
  },
};

function statOf(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch {
    return undefined; // removed (or mid-rename): nothing to compare yet
  }
}

/**
 * Checks the file every `intervalMs` (a stat poll, which also sees an editor's save-by-rename
 * and a mounted ConfigMap's symlink swap, where fs.watch loses track) and hands each changed,
 * valid version to `onChange`. An invalid version (or one `onChange` refuses by throwing) is
 * logged and changes nothing: the gateway keeps serving the last good one. Returns the
 * function that stops watching.
 *
 * The poll is ours rather than fs.watchFile's: fs.watchFile takes its first stat later, on the
 * thread pool, so an edit made just after the watch began could become the baseline and never
 * be seen; here the baseline is taken before this function returns.
 */
export function watchDataFile(file: string, intervalMs: number, log: Logger, onChange: (data: DataFile) => void, { isOwnVersion, timers = unrefTimers }: WatchOptions = {}): () => void {
  if (intervalMs === 0) return () => {};
  let previous = statOf(file);
  // A poll can stat the file between an editor's truncate and its write, then read the whole
  // new text; the next poll sees the write's mtime and reads the same text again. The digest of
  // the last version handled makes that second sight a no-op instead of a second reload.
  let lastDigest = '';
  const look = () => {
    try {
      const text = readDataFileText(file);
      if (isOwnVersion?.(text) === true) {
        lastDigest = ''; // a foreign edit back to the version before this one is news again
        log.debug('data file changed by this process: already served');
        return;
      }
      const digest = createHash('sha256').update(text).digest('base64');
      if (digest === lastDigest) return;
      lastDigest = digest;
      // onChange may refuse a version too (services.ts: demo keys in production), by throwing.
      onChange(parseDataFile(file, text));
    } catch (err) {
      log.warn({ problems: (err as Error).message }, 'data file changed but is not valid: still serving the previous version');
      return;
    }
    log.info('data file reloaded');
  };
  const timer = timers.setTimer(intervalMs, () => {
    const current = statOf(file);
    const changed = current !== undefined && (previous === undefined || current.mtimeMs !== previous.mtimeMs || current.size !== previous.size || current.ino !== previous.ino);
    // A missing file keeps its last baseline: the version written back is compared with it.
    if (current !== undefined) previous = current;
    if (changed) look();
    timer.refresh();
  });
  return () => timer.cancel();
}
