/**
 * The owner store held in process memory, as a whole data file. Changes run one at a time
 * (a promise queue): each takes a copy, changes it, checks it against the data file's schema,
 * hands it to `persist` (owner-store.file.ts writes the file there) and only then becomes the
 * state, so a failed write changes nothing. `reload` lets each change start from a newer
 * version read from elsewhere (a human's edit of the data file), so it is never overwritten.
 * `onCommit` tells the stores that serve sign-in, roles and sign records (MemoryKeyDirectory,
 * MemoryDirectory) about the new state.
 */
import { Conflict, NotFound } from '../errors/errors.js';
import { dataFileSchema, toSignRecord, type AccountData, type DataFile } from './data-file.js';
import type { DirectoryChange, Role, RolePage, RoleQuery, SignRecord } from './directory.js';
import type { AuditEvent, InviteRecord, OwnerRecord, SettingsTokenRecord } from './owner-records.js';
import { splitAccount, type AccountDoc, type AccountUpdate, type OwnerStore, type PutRoleOutcome, type PutSignRecordOutcome } from './owner-store.js';

export interface MemoryOwnerStoreOptions {
  /** Makes the next state durable before it is served; a throw leaves everything as it was. */
  persist?: (next: DataFile) => Promise<void>;
  /**
   * Called in turn before each change (and by `refresh`): a newer state to start from, or
   * undefined to keep the current one. Not persisted; a throw fails the change, nothing changed.
   */
  reload?: () => DataFile | undefined;
  /**
   * Called with every new state and what changed in the directory, after `persist`; `changes`
   * undefined: anything may have changed (a state from `reload` or `replace`).
   */
  onCommit?: (next: DataFile, changes: readonly DirectoryChange[] | undefined) => void;
  readOnly?: string;
  directoryReadOnly?: string;
  /** Audit events kept per account (the oldest go first). */
  maxAuditEvents: number;
}

export class MemoryOwnerStore implements OwnerStore {
  readonly readOnly: string | undefined;
  readonly directoryReadOnly: string | undefined;
  #data: DataFile;
  #queue: Promise<unknown> = Promise.resolve();
  readonly #options: MemoryOwnerStoreOptions;

  constructor(data: DataFile, options: MemoryOwnerStoreOptions) {
    this.#data = data;
    this.#options = options;
    this.readOnly = options.readOnly;
    this.directoryReadOnly = options.directoryReadOnly;
  }

  /** The current state (not to be changed by the caller). */
  get data(): DataFile {
    return this.#data;
  }

  /** Replaces the state with one read from elsewhere (a foreign edit of the file), in turn with changes; not persisted. */
  replace(next: DataFile): Promise<void> {
    return this.#commit(() => {
      this.#serve(next, undefined);
      return { next: undefined, changes: [], result: undefined };
    });
  }

  /** Runs `reload` in turn with changes, so a newer state found elsewhere is served without waiting for a change. */
  refresh(): Promise<void> {
    return this.#commit(() => ({ next: undefined, changes: [], result: undefined }));
  }

  async listAccounts(): Promise<AccountDoc[]> {
    return this.#data.accounts.map(splitAccount).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async readAccount(accountId: string): Promise<AccountDoc | undefined> {
    const account = this.#account(this.#data, accountId);
    return account === undefined ? undefined : structuredClone(splitAccount(account));
  }

  createAccount(doc: AccountDoc, events: readonly AuditEvent[]): Promise<boolean> {
    return this.#change((data) => {
      if (this.#account(data, doc.id) !== undefined) return { result: false };
      data.accounts.push({ ...structuredClone(doc), roles: [], signRecords: [], audit: [] });
      this.#audit(data, doc.id, events);
      return { result: true, changes: [{ kind: 'account', accountId: doc.id }] };
    });
  }

  updateAccount<T>(accountId: string, change: (doc: AccountDoc) => AccountUpdate<T>): Promise<T> {
    return this.#change((data) => {
      const account = this.#account(data, accountId);
      if (account === undefined) throw new NotFound();
      const { doc, events, result } = change(structuredClone(splitAccount(account)));
      if (doc === undefined) return { result, write: false };
      Object.assign(account, structuredClone(doc), { id: accountId });
      // A deleted account keeps its id and audit trail, nothing else (as on Redis).
      if (doc.deletedAt !== undefined) {
        account.roles = [];
        account.signRecords = [];
      }
      this.#audit(data, accountId, events);
      return { result, changes: [{ kind: 'account', accountId }] };
    });
  }

  async findOwner(ownerId: string): Promise<OwnerRecord | undefined> {
    return structuredClone(this.#data.owners.find((o) => o.id === ownerId));
  }

  async findOwnerByEmail(email: string): Promise<OwnerRecord | undefined> {
    const wanted = email.toLowerCase();
    return structuredClone(this.#data.owners.find((o) => o.email.toLowerCase() === wanted));
  }

  createOwner(owner: OwnerRecord): Promise<boolean> {
    return this.#change((data) => {
      const email = owner.email.toLowerCase();
      if (data.owners.some((o) => o.id === owner.id || o.email.toLowerCase() === email)) return { result: false };
      data.owners.push(structuredClone(owner));
      return { result: true };
    });
  }

  updateOwner<T>(ownerId: string, change: (owner: OwnerRecord) => { owner?: OwnerRecord; result: T }): Promise<T> {
    return this.#change((data) => {
      const index = data.owners.findIndex((o) => o.id === ownerId);
      if (index === -1) throw new NotFound();
      const { owner, result } = change(structuredClone(data.owners[index]!));
      if (owner === undefined) return { result, write: false };
      const email = owner.email.toLowerCase();
      if (data.owners.some((o) => o.id !== ownerId && o.email.toLowerCase() === email)) throw new Conflict('Another owner has this email.', 'email');
      data.owners[index] = { ...structuredClone(owner), id: ownerId };
      return { result };
    });
  }

  async accountsOf(ownerId: string): Promise<string[]> {
    return this.#data.accounts.filter((a) => a.deletedAt === undefined && a.members.some((m) => m.ownerId === ownerId)).map((a) => a.id);
  }

  async listRoles(accountId: string, { offset, limit, nameContains }: RoleQuery): Promise<RolePage> {
    let roles = [...(this.#account(this.#data, accountId)?.roles ?? [])].sort((a, b) => a.id - b.id);
    if (nameContains !== undefined) {
      const needle = nameContains.toLowerCase();
      roles = roles.filter((r) => r.name.toLowerCase().includes(needle));
    }
    return { items: roles.slice(offset, offset + limit).map((r) => ({ ...r })), total: roles.length };
  }

  async getRole(accountId: string, id: number): Promise<Role | undefined> {
    const role = this.#account(this.#data, accountId)?.roles.find((r) => r.id === id);
    return role === undefined ? undefined : { ...role };
  }

  putRole(accountId: string, role: Role, replaces: number | undefined, events: readonly AuditEvent[], member?: string): Promise<PutRoleOutcome> {
    return this.#change((data) => {
      const account = this.#liveAccount(data, accountId, member);
      if (account === undefined) return { result: 'not_found' as const };
      const others = account.roles.filter((r) => r.id !== replaces);
      if (replaces !== undefined && others.length === account.roles.length) return { result: 'not_found' as const };
      if (others.some((r) => r.id === role.id)) return { result: 'id_taken' as const };
      if (others.some((r) => r.slug === role.slug)) return { result: 'slug_taken' as const };
      account.roles = [...others, { ...role }].sort((a, b) => a.id - b.id);
      this.#audit(data, accountId, events);
      return { result: 'ok' as const, changes: [{ kind: 'roles', accountId }] };
    });
  }

  deleteRole(accountId: string, id: number, events: readonly AuditEvent[], member?: string): Promise<boolean> {
    return this.#change((data) => {
      const account = this.#liveAccount(data, accountId, member);
      const index = account?.roles.findIndex((r) => r.id === id) ?? -1;
      if (account === undefined || index === -1) return { result: false };
      account.roles.splice(index, 1);
      this.#audit(data, accountId, events);
      return { result: true, changes: [{ kind: 'roles', accountId }] };
    });
  }

  async getSignRecord(accountId: string, address: string): Promise<SignRecord | undefined> {
    const record = this.#account(this.#data, accountId)?.signRecords.find((s) => s.address.toLowerCase() === address);
    return record === undefined ? undefined : toSignRecord(record);
  }

  putSignRecord(accountId: string, record: SignRecord, mode: 'create' | 'replace', events: readonly AuditEvent[], member?: string): Promise<PutSignRecordOutcome> {
    return this.#change((data) => {
      const account = this.#liveAccount(data, accountId, member);
      if (account === undefined) return { result: 'not_found' as const };
      const index = account.signRecords.findIndex((s) => s.address.toLowerCase() === record.address);
      if (mode === 'create' && index !== -1) return { result: 'exists' as const };
      if (mode === 'replace' && index === -1) return { result: 'not_found' as const };
      const stored = {
        address: record.address,
        signedNonce: record.signedNonce,
        signedAt: new Date(record.signedAt).toISOString(),
        signedExpiredAt: new Date(record.signedExpiredAt).toISOString(),
      };
      if (index === -1) account.signRecords.push(stored);
      else account.signRecords[index] = stored;
      this.#audit(data, accountId, events);
      return { result: 'ok' as const, changes: [{ kind: 'sign', accountId, address: record.address }] };
    });
  }

  deleteSignRecord(accountId: string, address: string, events: readonly AuditEvent[], member?: string): Promise<boolean> {
    return this.#change((data) => {
      const account = this.#liveAccount(data, accountId, member);
      const index = account?.signRecords.findIndex((s) => s.address.toLowerCase() === address) ?? -1;
      if (account === undefined || index === -1) return { result: false };
      account.signRecords.splice(index, 1);
      this.#audit(data, accountId, events);
      return { result: true, changes: [{ kind: 'sign', accountId, address }] };
    });
  }

  appendAudit(accountId: string, events: readonly AuditEvent[]): Promise<void> {
    return this.#change((data) => {
      if (this.#account(data, accountId) === undefined) return { result: undefined, write: false };
      this.#audit(data, accountId, events);
      return { result: undefined };
    });
  }

  async listAudit(accountId: string, { before, limit }: { before?: string; limit: number }): Promise<AuditEvent[]> {
    const events = this.#account(this.#data, accountId)?.audit ?? [];
    // By position: events made in the same millisecond have ids in random order among themselves.
    const at = before === undefined ? -1 : events.findIndex((e) => e.id === before);
    const older = before === undefined ? events : at !== -1 ? events.slice(0, at) : events.filter((e) => e.id < before);
    return older.slice(-limit).reverse().map((e) => structuredClone(e));
  }

  async findSettingsToken(digest: string): Promise<{ accountId: string; token: SettingsTokenRecord } | undefined> {
    for (const account of this.#data.accounts) {
      const token = account.settingsTokens.find((t) => t.digest === digest);
      if (token !== undefined) return { accountId: account.id, token: structuredClone(token) };
    }
    return undefined;
  }

  async findInvite(digest: string): Promise<{ accountId: string; invite: InviteRecord } | undefined> {
    for (const account of this.#data.accounts) {
      const invite = account.invites.find((i) => i.digest === digest);
      if (invite !== undefined) return { accountId: account.id, invite: structuredClone(invite) };
    }
    return undefined;
  }

  #account(data: DataFile, accountId: string): AccountData | undefined {
    return data.accounts.find((a) => a.id === accountId);
  }

  /** The account unless it is deleted: a role or sign record written after the deletion would outlive it. */
  /** The account if it is not deleted and, with `member`, that owner is one of its members. */
  #liveAccount(data: DataFile, accountId: string, member?: string): AccountData | undefined {
    const account = this.#account(data, accountId);
    if (account?.deletedAt !== undefined) return undefined;
    return member === undefined || account?.members.some((m) => m.ownerId === member) ? account : undefined;
  }

  #audit(data: DataFile, accountId: string, events: readonly AuditEvent[]): void {
    const account = this.#account(data, accountId);
    if (account === undefined || events.length === 0) return;
    account.audit.push(...events.map((e) => structuredClone(e)));
    const excess = account.audit.length - this.#options.maxAuditEvents;
    if (excess > 0) account.audit.splice(0, excess);
  }

  /** One change, in turn: on a copy, checked, persisted, then served. */
  #change<T>(apply: (draft: DataFile) => { result: T; changes?: DirectoryChange[]; write?: boolean }): Promise<T> {
    return this.#commit((current) => {
      const draft = structuredClone(current);
      const { result, changes = [], write = true } = apply(draft);
      return { next: write ? draft : undefined, changes, result };
    });
  }

  #commit<T>(step: (current: DataFile) => { next: DataFile | undefined; changes: DirectoryChange[]; result: T }): Promise<T> {
    const run = this.#queue.then(async () => {
      const reloaded = this.#options.reload?.();
      if (reloaded !== undefined) this.#serve(reloaded, undefined);
      const { next, changes, result } = step(this.#data);
      if (next === undefined) return result;
      // A change the schema refuses is a bug of the caller's, never written.
      const checked = dataFileSchema.parse(next);
      await this.#options.persist?.(checked);
      this.#serve(checked, changes);
      return result;
    });
    this.#queue = run.catch(() => {});
    return run;
  }

  #serve(next: DataFile, changes: readonly DirectoryChange[] | undefined): void {
    this.#data = next;
    this.#options.onCommit?.(next, changes);
  }
}
