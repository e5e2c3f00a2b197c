/**
 * The owner store in Redis, for `data.keySource` "redis": every instance reads and writes the
 * same accounts. The layout (docs/redis.md lists every key):
 *
 *   <prefix>:acct:{<a>}      hash: `doc` (the AccountDoc as JSON), `v` (its version) and
 *                            `keysInSlot` (its keys' sign-in records live in its slot)
 *   <prefix>:audit:{<a>}     stream of the account's audit events, newest MAXLEN kept
 *   <prefix>:roles:{<a>}, <prefix>:role:{<a>}, <prefix>:sign:{<a>}   roles and sign records,
 *                            in directory.redis.ts's layout, so RedisDirectory serves them
 *   <prefix>:akey:{<a>}:<keyId>  hash: a key's sign-in record (key-directory.redis.ts)
 *   <prefix>:acct-keys:{<a>} set: names of sign-in records an older version wrote outside the
 *                            slot (read once, by the account's first change, then deleted)
 *   <prefix>:accounts        sorted set of account ids
 *   <prefix>:owner:<id>      hash: `doc` (OwnerRecord JSON) and `v`
 *   <prefix>:email:<email>, <prefix>:owner-accts:<ownerId>, <prefix>:stoken:<digest>,
 *   <prefix>:invite:<digest> indexes; <prefix>:key:<keyId>, <prefix>:apikey:<apiKey> pointers
 *                            (`home`: the account) to the keys' sign-in records
 *
 * What is atomic: everything in an account's slot changes in one script with its audit events
 * and its notices: the account, and the sign-in records of the keys the change touched (so a
 * gateway dying at any point never leaves a disabled or deleted key signing in). `updateAccount`
 * reads the doc, lets the caller decide in JS, and the script stores the result only if the
 * version is still the one read (else it reads again). Changes from one process to one account
 * also wait for each other, so only other instances can race it.
 *
 * What is written in order around it, one command at a time (other slots on a Cluster):
 * indexes that lead to the account (account list, owner's accounts, settings-token and invite
 * digests, key pointers) BEFORE the change, so nothing committed is ever unfindable; index
 * entries of things the change removed AFTER it. Readers trust an index only when the account
 * (or, for a key, its record in the account's slot) agrees, so an entry left by a failed or
 * raced change is never believed.
 */
import { z } from 'zod';
import { BadStoreData, Conflict, NotFound, StoreUnavailable } from '../../errors/errors.js';
import type { Logger } from '../../telemetry/log.js';
import { dataFileSchema, toApiKeyRecord, toSignRecord, type AccountData, type DataFile } from '../data-file/data-file.js';
import type { RecordReader } from '../directory/records.js';
import type { DirectoryChange, Role, RolePage, RoleQuery, SignRecord } from '../directory/store.js';
import { RedisDirectory } from '../directory/redis.js';
import { keyChangeNotice, keyRecordFields } from '../keys/redis.js';
import { auditEventSchema, ownerSchema, type AuditEvent, type InviteRecord, type OwnerRecord, type SettingsTokenRecord } from './records.js';
import type { AccountDoc, AccountUpdate, OwnerStore, PutRoleOutcome, PutSignRecordOutcome } from './store.js';
import type { RedisConnection } from '../redis/client.js';

const accountDocSchema = dataFileSchema.shape.accounts.element.omit({ roles: true, signRecords: true, audit: true });

/** The fields of a sign-in record an older version wrote beside what is now a pointer. */
const LEGACY_FIELDS = ['accountId', 'secretDigest', 'disabled', 'scopes', 'previousSecretDigest', 'previousValidUntil', 'v'];
/** Attempts of one change against other instances' changes to the same account or owner. */
const MAX_ATTEMPTS = 50;
/** Audit events read per round trip while paging. */
const AUDIT_CHUNK = 200;

export interface RedisOwnerStoreOptions {
  records: RecordReader;
  log: Logger;
  /** Audit events kept per account (the oldest go first). */
  maxAuditEvents: number;
  readOnly?: string;
  directoryReadOnly?: string;
  /**
   * Called once this instance has written an account's key records: its own cached copies
   * (key-directory.cache.ts) go at once, before the change's answer, rather than when its own
   * notice comes back a moment later.
   */
  onKeysWritten?: () => void;
}

interface Versioned<T> {
  doc: T;
  v: string;
}

export class RedisOwnerStore implements OwnerStore {
  readonly readOnly: string | undefined;
  readonly directoryReadOnly: string | undefined;
  readonly #redis: RedisConnection;
  readonly #directory: RedisDirectory;
  readonly #records: RecordReader;
  readonly #maxAudit: number;
  readonly #onKeysWritten: (() => void) | undefined;
  /** The last change queued per account or owner in this process. */
  readonly #turns = new Map<string, Promise<unknown>>();

  constructor(redis: RedisConnection, options: RedisOwnerStoreOptions) {
    this.#redis = redis;
    this.#records = options.records;
    this.#directory = new RedisDirectory(redis, { records: options.records, log: options.log });
    this.#maxAudit = options.maxAuditEvents;
    this.readOnly = options.readOnly;
    this.directoryReadOnly = options.directoryReadOnly;
    this.#onKeysWritten = options.onKeysWritten;
  }

  async listAccounts(): Promise<AccountDoc[]> {
    const ids = await this.#redis.run((c) => c.zrange(this.#redis.keys.accountIndex, 0, -1));
    const docs = await Promise.all(ids.map((id) => this.readAccount(id)));
    return docs.filter((d): d is AccountDoc => d !== undefined);
  }

  async readAccount(accountId: string): Promise<AccountDoc | undefined> {
    return (await this.#readAccount(accountId))?.doc;
  }

  async createAccount(doc: AccountDoc, events: readonly AuditEvent[]): Promise<boolean> {
    const k = this.#redis.keys;
    const next = accountDocSchema.parse(doc);
    return this.#inTurn(`acct:${next.id}`, async () => {
      // A taken id is the common refusal: answered before index entries are written for nothing.
      if ((await this.#redis.run((c) => c.exists(k.account(next.id)))) === 1) return false;
      const records = keyRecordWrites(undefined, next, true);
      await this.#indexBefore(undefined, next, records);
      const created = await this.#redis.run((c) => c.gwOwnerCreateAccount(
        2 + records.length, k.account(next.id), k.audit(next.id), ...records.map((r) => k.accountKey(next.id, r.keyId)),
        JSON.stringify(next), this.#maxAudit, k.directoryChannel, notice({ kind: 'account', accountId: next.id }),
        k.keysChannel, keyChangeNotice(next.id), ...records.map((r) => r.fields), ...events.map(eventJson),
      ));
      if (created !== 1) return false;
      if (records.length > 0) this.#onKeysWritten?.();
      return true;
    });
  }

  updateAccount<T>(accountId: string, change: (doc: AccountDoc) => AccountUpdate<T>): Promise<T> {
    const k = this.#redis.keys;
    return this.#inTurn(`acct:${accountId}`, async () => {
      for (let attempt = 1; ; attempt++) {
        const current = await this.#readAccount(accountId);
        if (current === undefined) throw new NotFound();
        const { doc, events, result } = change(structuredClone(current.doc));
        if (doc === undefined) return result;
        const next = accountDocSchema.parse({ ...doc, id: accountId });
        const deletes = next.deletedAt !== undefined && current.doc.deletedAt === undefined;
        // The account's first change since the records moved into its slot writes every key's.
        const moving = !current.keysInSlot;
        const records = keyRecordWrites(current.doc, next, moving);
        await this.#indexBefore(current.doc, next, records);
        if (moving) await this.#retireLegacy(current.doc, next);
        const version = await this.#redis.run((c) => c.gwOwnerUpdateAccount(
          5 + records.length, k.account(accountId), k.audit(accountId), k.roleIndex(accountId), k.roles(accountId), k.signRecords(accountId),
          ...records.map((r) => k.accountKey(accountId, r.keyId)),
          current.v, JSON.stringify(next), deletes ? '1' : '0', this.#maxAudit, k.directoryChannel,
          notice({ kind: 'account', accountId }), k.keysChannel, keyChangeNotice(accountId), moving ? '1' : '0',
          ...records.map((r) => r.fields), ...events.map(eventJson),
        ));
        if (version === 0) throw new NotFound();
        if (version > 0) {
          if (records.length > 0) this.#onKeysWritten?.();
          await this.#tidyAfter(current.doc, next, moving);
          return result;
        }
        await raced(attempt, `account ${accountId}`);
      }
    });
  }

  async findOwner(ownerId: string): Promise<OwnerRecord | undefined> {
    return (await this.#readOwner(ownerId))?.doc;
  }

  async findOwnerByEmail(email: string): Promise<OwnerRecord | undefined> {
    const wanted = email.toLowerCase();
    const ownerId = await this.#redis.run((c) => c.get(this.#redis.keys.ownerEmail(wanted)));
    if (ownerId === null) return undefined;
    const owner = await this.findOwner(ownerId);
    return owner?.email.toLowerCase() === wanted ? owner : undefined;
  }

  async createOwner(owner: OwnerRecord): Promise<boolean> {
    const record = ownerSchema.parse(owner);
    const email = record.email.toLowerCase();
    return this.#inTurn(`owner:${record.id}`, async () => {
      if (!(await this.#claimEmail(email, record.id))) return false;
      const written = await this.#redis.run((c) => c.gwPutVersioned(this.#redis.keys.owner(record.id), '0', JSON.stringify(record)));
      if (written > 0) {
        await this.#redis.run((c) => c.sadd(this.#redis.keys.ownerIndex, record.id));
        return true;
      }
      // The id was taken: the email goes back to whoever may want it.
      await this.#redis.run((c) => c.gwSwapIndex(this.#redis.keys.ownerEmail(email), record.id, ''));
      return false;
    });
  }

  updateOwner<T>(ownerId: string, change: (owner: OwnerRecord) => { owner?: OwnerRecord; result: T }): Promise<T> {
    const k = this.#redis.keys;
    return this.#inTurn(`owner:${ownerId}`, async () => {
      for (let attempt = 1; ; attempt++) {
        const current = await this.#readOwner(ownerId);
        if (current === undefined) throw new NotFound();
        const { owner, result } = change(structuredClone(current.doc));
        if (owner === undefined) return result;
        const next = ownerSchema.parse({ ...owner, id: ownerId });
        const [before, after] = [current.doc.email.toLowerCase(), next.email.toLowerCase()];
        if (before !== after && !(await this.#claimEmail(after, ownerId))) throw new Conflict('Another owner has this email.', 'email');
        const version = await this.#redis.run((c) => c.gwPutVersioned(k.owner(ownerId), current.v, JSON.stringify(next)));
        if (version > 0) {
          if (before !== after) await this.#redis.run((c) => c.gwSwapIndex(k.ownerEmail(before), ownerId, ''));
          return result;
        }
        await raced(attempt, `owner ${ownerId}`);
      }
    });
  }

  async accountsOf(ownerId: string): Promise<string[]> {
    const ids = await this.#redis.run((c) => c.smembers(this.#redis.keys.ownerAccounts(ownerId)));
    const docs = await Promise.all(ids.sort().map((id) => this.readAccount(id)));
    // The set only grows: the account decides.
    return docs.filter((d) => d !== undefined && d.deletedAt === undefined && d.members.some((m) => m.ownerId === ownerId)).map((d) => d!.id);
  }

  listRoles(accountId: string, query: RoleQuery): Promise<RolePage> {
    return this.#directory.listRoles(accountId, query);
  }

  async getRole(accountId: string, id: number): Promise<Role | undefined> {
    const json = await this.#redis.run((c) => c.hget(this.#redis.keys.roles(accountId), String(id)));
    if (json === null) return undefined;
    const where = `role ${id}`;
    const value = parseJson(json, where);
    return this.#records.role(typeof value === 'object' && value !== null && !('id' in value) ? { ...value, id } : value, where);
  }

  async putRole(accountId: string, role: Role, replaces: number | undefined, events: readonly AuditEvent[], member = ''): Promise<PutRoleOutcome> {
    const k = this.#redis.keys;
    const { id, slug, name, description } = role;
    const json = JSON.stringify({ id, slug, name, description, public: role.public });
    const outcome = await this.#redis.run((c) => c.gwOwnerPutRole(
      k.account(accountId), k.roleIndex(accountId), k.roles(accountId), k.audit(accountId),
      String(id), slug, json, replaces === undefined ? '' : String(replaces), this.#maxAudit, k.directoryChannel,
      notice({ kind: 'roles', accountId }), member, ...events.map(eventJson),
    ));
    if (outcome !== 'ok' && outcome !== 'id_taken' && outcome !== 'slug_taken' && outcome !== 'not_found') throw new BadStoreData(new Error(`putRole answered ${String(outcome)}`));
    return outcome;
  }

  async deleteRole(accountId: string, id: number, events: readonly AuditEvent[], member = ''): Promise<boolean> {
    const k = this.#redis.keys;
    return 1 === await this.#redis.run((c) => c.gwOwnerDeleteRole(
      k.account(accountId), k.roleIndex(accountId), k.roles(accountId), k.audit(accountId),
      String(id), this.#maxAudit, k.directoryChannel, notice({ kind: 'roles', accountId }), member, ...events.map(eventJson),
    ));
  }

  getSignRecord(accountId: string, address: string): Promise<SignRecord | undefined> {
    return this.#directory.findSignRecord(accountId, address);
  }

  async putSignRecord(accountId: string, record: SignRecord, mode: 'create' | 'replace', events: readonly AuditEvent[], member = ''): Promise<PutSignRecordOutcome> {
    const k = this.#redis.keys;
    const address = record.address.toLowerCase();
    const outcome = await this.#redis.run((c) => c.gwOwnerPutSign(
      k.account(accountId), k.signRecords(accountId), k.audit(accountId),
      address, signJson(record), mode, this.#maxAudit, k.directoryChannel,
      notice({ kind: 'sign', accountId, address }), member, ...events.map(eventJson),
    ));
    if (outcome !== 'ok' && outcome !== 'exists' && outcome !== 'not_found') throw new BadStoreData(new Error(`putSignRecord answered ${String(outcome)}`));
    return outcome;
  }

  async deleteSignRecord(accountId: string, address: string, events: readonly AuditEvent[], member = ''): Promise<boolean> {
    const k = this.#redis.keys;
    const lower = address.toLowerCase();
    return 1 === await this.#redis.run((c) => c.gwOwnerDeleteSign(
      k.account(accountId), k.signRecords(accountId), k.audit(accountId),
      lower, this.#maxAudit, k.directoryChannel, notice({ kind: 'sign', accountId, address: lower }), member, ...events.map(eventJson),
    ));
  }

  async appendAudit(accountId: string, events: readonly AuditEvent[]): Promise<void> {
    if (events.length === 0) return;
    const k = this.#redis.keys;
    await this.#redis.run((c) => c.gwOwnerAppendAudit(k.account(accountId), k.audit(accountId), this.#maxAudit, ...events.map(eventJson)));
  }

  /**
   * Walks the stream from its newest entry in chunks. The cursor is found by position, as the
   * memory store finds it: events of one millisecond have ids in random order among themselves,
   * so comparing ids would skip or repeat some. A cursor no longer stored (trimmed away) pages
   * by id instead, which needs the whole stream read (at most the cap); a stored one costs a
   * read of what lies before it.
   */
  async listAudit(accountId: string, { before, limit }: { before?: string; limit: number }): Promise<AuditEvent[]> {
    const key = this.#redis.keys.audit(accountId);
    const after: AuditEvent[] = [];
    const older: AuditEvent[] = [];
    let passed = before === undefined;
    let end = '+';
    for (;;) {
      const entries = await this.#redis.run((c) => c.xrevrange(key, end, '-', 'COUNT', AUDIT_CHUNK));
      for (const [streamId, fields] of entries) {
        const event = readEvent(streamId, fields);
        if (passed) {
          after.push(event);
          if (after.length === limit) return after;
        } else if (event.id === before) {
          passed = true;
        } else if (older.length < limit && event.id < before!) {
          older.push(event);
        }
      }
      if (entries.length < AUDIT_CHUNK) break;
      end = `(${entries[entries.length - 1]![0]}`;
    }
    return passed ? after : older;
  }

  async findSettingsToken(digest: string): Promise<{ accountId: string; token: SettingsTokenRecord } | undefined> {
    const accountId = await this.#redis.run((c) => c.get(this.#redis.keys.settingsToken(digest)));
    if (accountId === null) return undefined;
    const token = (await this.readAccount(accountId))?.settingsTokens.find((t) => t.digest === digest);
    return token === undefined ? undefined : { accountId, token };
  }

  async findInvite(digest: string): Promise<{ accountId: string; invite: InviteRecord } | undefined> {
    const accountId = await this.#redis.run((c) => c.get(this.#redis.keys.invite(digest)));
    if (accountId === null) return undefined;
    const invite = (await this.readAccount(accountId))?.invites.find((i) => i.digest === digest);
    return invite === undefined ? undefined : { accountId, invite };
  }

  /**
   * Writes a data file's owners and accounts (with their roles, sign records and audit events)
   * into Redis, leaving every owner or account that already exists as it is. For a move from
   * the data file to Redis, and for tests. Returns how many of each were written.
   */
  async importData(data: DataFile): Promise<{ owners: number; accounts: number }> {
    const counts = { owners: 0, accounts: 0 };
    for (const owner of data.owners) {
      if (await this.createOwner(owner)) counts.owners++;
    }
    for (const account of data.accounts) {
      const { roles, signRecords, audit, ...doc } = account;
      if (!(await this.createAccount(doc, audit))) continue;
      counts.accounts++;
      if (roles.length > 0) await this.#directory.putRoles(account.id, roles);
      for (const record of signRecords) await this.#directory.putSignRecord(account.id, toSignRecord(record));
    }
    return counts;
  }

  /**
   * Everything `importData` writes, read back as a data file would hold it (accounts in id
   * order with their roles, sign records and audit events, oldest first; owners in id order):
   * what `gatewayctl export` writes and `gatewayctl migrate` checks its copy against. Owners
   * are those of the owner index and every account's members (owners written before the index
   * existed are found through their accounts).
   */
  async exportData(): Promise<DataFile> {
    const k = this.#redis.keys;
    const accounts: DataFile['accounts'] = [];
    const ownerIds = new Set(await this.#redis.run((c) => c.smembers(k.ownerIndex)));
    for (const doc of await this.listAccounts()) {
      const [roleJson, signJson, entries] = await Promise.all([
        this.#redis.run((c) => c.hgetall(k.roles(doc.id))),
        this.#redis.run((c) => c.hgetall(k.signRecords(doc.id))),
        this.#redis.run((c) => c.xrange(k.audit(doc.id), '-', '+')),
      ]);
      const roles = Object.entries(roleJson).map(([id, json]) => {
        const value = parseJson(json, `role ${id}`);
        return this.#records.role(typeof value === 'object' && value !== null && !('id' in value) ? { ...value, id: Number(id) } : value, `role ${id}`);
      }).sort((a, b) => a.id - b.id);
      const signRecords = Object.entries(signJson).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([address, json]) => {
        const record = this.#records.signRecord(parseJson(json, `sign record ${address}`), address, `sign record ${address}`);
        return { address: record.address, signedNonce: record.signedNonce, signedAt: new Date(record.signedAt).toISOString(), signedExpiredAt: new Date(record.signedExpiredAt).toISOString() };
      });
      for (const m of doc.members) ownerIds.add(m.ownerId);
      accounts.push({ ...doc, roles, signRecords, audit: entries.map(([id, fields]) => readEvent(id, fields)) });
    }
    const owners = (await Promise.all([...ownerIds].sort().map((id) => this.findOwner(id)))).filter((o): o is OwnerRecord => o !== undefined);
    return { accounts: accounts.sort((a, b) => (a.id < b.id ? -1 : 1)), owners };
  }

  /**
   * Makes the stored account what `account` says, as `gatewayctl migrate --force` asks: its
   * document (one change, keys projected as for any change), its roles and sign records (those
   * it lacks deleted), and the audit events it holds that Redis lacks appended (the stream is
   * only ever appended to). Creates the account when there is none.
   */
  async replaceAccount(account: AccountData, { createOnly = false }: { createOnly?: boolean } = {}): Promise<boolean> {
    const { roles, signRecords, audit, ...doc } = account;
    if (!(await this.createAccount(doc, audit))) {
      // Created meanwhile by someone else: only a forced copy may replace it.
      if (createOnly) return false;
      const stored = new Set((await this.listAudit(account.id, { limit: this.#maxAudit })).map((e) => e.id));
      await this.updateAccount(account.id, () => ({ doc, events: [], result: undefined }));
      await this.appendAudit(account.id, audit.filter((e) => !stored.has(e.id)));
    }
    const k = this.#redis.keys;
    const [roleIds, addresses] = await Promise.all([
      this.#redis.run((c) => c.hkeys(k.roles(account.id))),
      this.#redis.run((c) => c.hkeys(k.signRecords(account.id))),
    ]);
    const keptRoles = new Set(roles.map((r) => String(r.id)));
    const goneRoles = roleIds.filter((id) => !keptRoles.has(id)).map(Number);
    if (goneRoles.length > 0) await this.#directory.deleteRoles(account.id, goneRoles);
    if (roles.length > 0) await this.#directory.putRoles(account.id, roles);
    const keptSigns = new Set(signRecords.map((r) => r.address.toLowerCase()));
    for (const address of addresses) if (!keptSigns.has(address)) await this.#directory.deleteSignRecord(account.id, address);
    for (const record of signRecords) await this.#directory.putSignRecord(account.id, toSignRecord(record));
    return true;
  }

  /** Makes the stored owner `owner` (created when there is none); Conflict when another owner has its email. */
  async replaceOwner(owner: OwnerRecord): Promise<void> {
    if (await this.createOwner(owner)) return;
    await this.updateOwner(owner.id, () => ({ owner, result: undefined }));
  }

  async #readAccount(accountId: string): Promise<(Versioned<AccountDoc> & { keysInSlot: boolean }) | undefined> {
    const stored = await this.#redis.run((c) => c.hgetall(this.#redis.keys.account(accountId)));
    const read = readVersioned(stored, accountDocSchema, `account ${accountId}`);
    return read === undefined ? undefined : { ...read, keysInSlot: stored.keysInSlot === '1' };
  }

  async #readOwner(ownerId: string): Promise<Versioned<OwnerRecord> | undefined> {
    const stored = await this.#redis.run((c) => c.hgetall(this.#redis.keys.owner(ownerId)));
    return readVersioned(stored, ownerSchema, `owner ${ownerId}`);
  }

  /**
   * Takes `email` for `ownerId`: free, already ours, or held by an entry its owner disowns (a
   * claim whose owner was never written, or who moved to another email). False when another
   * owner has it.
   */
  async #claimEmail(email: string, ownerId: string): Promise<boolean> {
    const key = this.#redis.keys.ownerEmail(email);
    if ((await this.#redis.run((c) => c.set(key, ownerId, 'NX'))) === 'OK') return true;
    const holder = await this.#redis.run((c) => c.get(key));
    if (holder === ownerId) return true;
    if (holder !== null && (await this.findOwner(holder))?.email.toLowerCase() === email) return false;
    return 1 === await this.#redis.run((c) => c.gwSwapIndex(key, holder ?? '', ownerId));
  }

  /**
   * The index entries that lead to what `next` adds, written before it is; among them the
   * pointers (`home`, `keyId`) of the keys whose records the change writes in the account's slot
   * (deleted keys' too: theirs lead to the tombstone). A pointer never changes its mind (a key
   * stays in its account), so one written for a change that then fails leads to no record, which
   * reads as no key. Added to a record an older version wrote, it keeps that record's fields,
   * served until the change writes the key's own record.
   */
  async #indexBefore(previous: AccountDoc | undefined, next: AccountDoc, records: readonly KeyRecordWrite[]): Promise<void> {
    const k = this.#redis.keys;
    const writes: Promise<unknown>[] = [];
    if (previous === undefined) writes.push(this.#redis.run((c) => c.zadd(k.accountIndex, 'NX', 0, next.id)));
    for (const { keyId, apiKey } of records) {
      for (const name of [k.keyId(keyId), k.apiKey(apiKey)]) writes.push(this.#redis.run((c) => c.hset(name, 'home', next.id, 'keyId', keyId)));
    }
    const had = {
      members: new Set(previous?.members.map((m) => m.ownerId)),
      tokens: new Set(previous?.settingsTokens.map((t) => t.digest)),
      invites: new Set(previous?.invites.map((i) => i.digest)),
    };
    for (const m of next.members) if (!had.members.has(m.ownerId)) writes.push(this.#redis.run((c) => c.sadd(k.ownerAccounts(m.ownerId), next.id)));
    for (const t of next.settingsTokens) if (!had.tokens.has(t.digest)) writes.push(this.#redis.run((c) => c.set(k.settingsToken(t.digest), next.id)));
    for (const i of next.invites) if (!had.invites.has(i.digest)) writes.push(this.#redis.run((c) => c.set(k.invite(i.digest), next.id)));
    await Promise.all(writes);
  }

  /**
   * Before an account's first change since its keys' records moved into its slot: the records an
   * older version wrote outside it, named in its `acct-keys` set, of keys neither the account
   * nor the change holds (left by a gateway that died before retiring them; they could still
   * sign in).
   */
  async #retireLegacy(previous: AccountDoc, next: AccountDoc): Promise<void> {
    const k = this.#redis.keys;
    const held = new Set([...previous.apiKeys, ...next.apiKeys].flatMap((key) => [k.keyId(key.id), k.apiKey(key.apiKey)]));
    const named = await this.#redis.run((c) => c.smembers(k.accountKeys(next.id)));
    const stray = named.filter((name) => !held.has(name));
    await Promise.all(stray.map((name) => this.#redis.run((c) => c.gwRetireLegacyKey(name, k.keysChannel, keyChangeNotice(next.id)))));
  }

  /**
   * After a change is stored: the pointers of the keys it deleted (their records in the slot are
   * tombstones until then, so a pointer left by a gateway dying here still leads to no key), then
   * those tombstones; the index entries of tokens and invites that went; after the account's
   * first change since its records moved into its slot, what older versions left: the old
   * records' fields beside the pointers, and the set that named them.
   * Members that went stay in their owner's set: readers check the account, and taking them
   * out here could undo a later change that added them back.
   */
  async #tidyAfter(previous: AccountDoc, next: AccountDoc, moved: boolean): Promise<void> {
    const k = this.#redis.keys;
    const kept = new Set(next.apiKeys.map((key) => key.id));
    const deleted = previous.apiKeys.filter((key) => !kept.has(key.id));
    if (deleted.length > 0) {
      await Promise.all(deleted.flatMap((key) => [k.keyId(key.id), k.apiKey(key.apiKey)]).map((name) => this.#redis.run((c) => c.del(name))));
      await this.#redis.run((c) => c.del(...deleted.map((key) => k.accountKey(next.id, key.id))));
    }
    if (moved) {
      const names = next.apiKeys.flatMap((key) => [k.keyId(key.id), k.apiKey(key.apiKey)]);
      await Promise.all(names.map((name) => this.#redis.run((c) => c.hdel(name, ...LEGACY_FIELDS))));
      await this.#redis.run((c) => c.del(k.accountKeys(next.id)));
    }
    const tokens = new Set(next.settingsTokens.map((t) => t.digest));
    const invites = new Set(next.invites.map((i) => i.digest));
    const stale = [
      ...previous.settingsTokens.filter((t) => !tokens.has(t.digest)).map((t) => k.settingsToken(t.digest)),
      ...previous.invites.filter((i) => !invites.has(i.digest)).map((i) => k.invite(i.digest)),
    ];
    await Promise.all(stale.map((key) => this.#redis.run((c) => c.del(key))));
  }

  /** Runs changes to one account (or owner) of this process one after the other. */
  #inTurn<T>(name: string, step: () => Promise<T>): Promise<T> {
    const run = (this.#turns.get(name) ?? Promise.resolve()).then(step);
    const settled = run.catch(() => {});
    this.#turns.set(name, settled);
    void settled.then(() => {
      if (this.#turns.get(name) === settled) this.#turns.delete(name);
    });
    return run;
  }
}

/** A key's sign-in record that a change writes in its account's slot. */
interface KeyRecordWrite {
  keyId: string;
  apiKey: string;
  /** The record's fields as a JSON array of field, value, … ('' for a tombstone): KEY_RECORDS_FN's form. */
  fields: string;
}

/**
 * The key records a change from `previous` to `next` writes: those of keys it added or whose
 * record it changed (a disabled account changes every key's), and tombstones for the keys it
 * deleted; with `every`, every key's. Only what changed, so that adding a key to a large account
 * writes one record, not all of them.
 */
function keyRecordWrites(previous: AccountDoc | undefined, next: AccountDoc, every: boolean): KeyRecordWrite[] {
  const fieldsOf = (doc: AccountDoc, key: AccountDoc['apiKeys'][number]) => JSON.stringify(Object.entries({ ...keyRecordFields(toApiKeyRecord(doc, key)), apiKey: key.apiKey }).flat());
  const before = new Map(previous?.apiKeys.map((key) => [key.id, { apiKey: key.apiKey, fields: fieldsOf(previous, key) }]));
  const writes: KeyRecordWrite[] = [];
  for (const key of next.apiKeys) {
    const fields = fieldsOf(next, key);
    if (every || before.get(key.id)?.fields !== fields) writes.push({ keyId: key.id, apiKey: key.apiKey, fields });
    before.delete(key.id);
  }
  for (const [keyId, { apiKey }] of before) writes.push({ keyId, apiKey, fields: '' });
  return writes;
}

/** After a lost race: try again soon, spread out so that racing instances do not meet again. */
async function raced(attempt: number, what: string): Promise<void> {
  if (attempt >= MAX_ATTEMPTS) throw new StoreUnavailable(new Error(`${what}: ${attempt} attempts lost to concurrent changes`));
  await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 * attempt)));
}

function readVersioned<T>(stored: Record<string, string>, schema: z.ZodType<T>, where: string): Versioned<T> | undefined {
  if (stored.doc === undefined && stored.v === undefined) return undefined;
  if (stored.doc === undefined || stored.v === undefined) throw new BadStoreData(new Error(`${where}: a document and its version are expected`));
  const parsed = schema.safeParse(parseJson(stored.doc, where));
  if (!parsed.success) throw new BadStoreData(new Error(`${where}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(record)'}: ${i.message}`).join('; ')}`));
  return { doc: parsed.data, v: stored.v };
}

function readEvent(streamId: string, fields: string[]): AuditEvent {
  const json = fields[fields.indexOf('e') + 1];
  const where = `audit event ${streamId}`;
  if (fields.indexOf('e') === -1 || json === undefined) throw new BadStoreData(new Error(`${where}: no event`));
  const parsed = auditEventSchema.safeParse(parseJson(json, where));
  if (!parsed.success) throw new BadStoreData(new Error(`${where}: not an audit event`));
  return parsed.data;
}

function parseJson(json: string, where: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    throw new BadStoreData(new Error(`${where}: not JSON`));
  }
}

function eventJson(event: AuditEvent): string {
  return JSON.stringify(auditEventSchema.parse(event));
}

function notice(change: DirectoryChange): string {
  return JSON.stringify(change);
}

/** A sign record as directory.redis.ts writes it: the address is the field, times ISO 8601. */
function signJson({ signedNonce, signedAt, signedExpiredAt }: SignRecord): string {
  return JSON.stringify({ signedNonce, signedAt: new Date(signedAt).toISOString(), signedExpiredAt: new Date(signedExpiredAt).toISOString() });
}
