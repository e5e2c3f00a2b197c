/**
 * The owner store held in process memory, as a whole data file. Changes run one at a time, in
 * batches (group commit: those that arrive while a write is under way go together in the next
 * one): a batch takes one copy (copied on write, account by account), applies each change to
 * it in turn, checks it against the data file's schema, hands it to `persist`
 * (owner-store.file.ts writes the file there) and only then becomes the state and answers each change, so a failed write changes nothing and no
 * change is acknowledged before it is durable. `reload` lets each batch start from a newer
 * version read from elsewhere (a human's edit of the data file), so it is never overwritten.
 * `onCommit` tells the stores that serve sign-in, roles and sign records (MemoryKeyDirectory,
 * MemoryDirectory) about the new state.
 */
import { Conflict, NotFound } from '../../errors/errors.js';
import { checkChangedDataFile, dataFileSchema, toSignRecord, type AccountData, type DataFile } from '../data-file/data-file.js';
import type { DirectoryChange, Role, RolePage, RoleQuery, SignRecord } from '../directory/store.js';
import type { AuditEvent, InviteRecord, OwnerRecord, SettingsTokenRecord } from './records.js';
import { splitAccount, type AccountDoc, type AccountUpdate, type OwnerStore, type PutRoleOutcome, type PutSignRecordOutcome } from './store.js';

export interface MemoryOwnerStoreOptions {
  /** Makes the next state durable before it is served (`changes`: how many it carries); a throw leaves everything as it was. */
  persist?: (next: DataFile, changes: number) => Promise<void>;
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

/**
 * One change as the batch runs it: changes `draft` (or not) and says what changed in the
 * directory; `changes` undefined: nothing to write.
 */
type Step<T> = (draft: DataFile) => { changes: DirectoryChange[] | undefined; result: T };

interface Pending {
  step: Step<unknown>;
  resolve: (result: unknown) => void;
  reject: (err: unknown) => void;
  isBarrier: boolean;
}

export class MemoryOwnerStore implements OwnerStore {
  readonly readOnly: string | undefined;
  readonly directoryReadOnly: string | undefined;
  #data: DataFile;
  /** Changes waiting for the write under way to end (group commit). */
  #pending: Pending[] = [];
  #isFlushing = false;
  /** The copy the running batch changes, and the accounts already copied into it (#account). */
  #draft: DataFile | undefined;
  #copied = new WeakSet<AccountData>();
  /**
   * The state served passed dataFileSchema whole: true after the first write, whose check is
   * whole (the state given to the constructor may come from anywhere); states from `replace`
   * and `reload` are read from the file, which parses them.
   */
  #isStateChecked = false;
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
    // Served between two batches: the changes of the next batch apply to it.
    return this.#commit(() => {
      this.#serve(next, undefined);
      return { changes: undefined, result: undefined };
    }, true);
  }

  /** Runs `reload` in turn with changes, so a newer state found elsewhere is served without waiting for a change. */
  refresh(): Promise<void> {
    return this.#commit(() => ({ changes: undefined, result: undefined }));
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
    const index = data.accounts.findIndex((a) => a.id === accountId);
    if (index === -1) return undefined;
    const account = data.accounts[index]!;
    if (data !== this.#draft || this.#copied.has(account)) return account;
    // Copy on write: the batch's copy shares every account with the served state until a change
    // reaches one, which then gets its own copy; the served state is never changed in place.
    const copy = structuredClone(account);
    this.#copied.add(copy);
    data.accounts[index] = copy;
    return copy;
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

  /** One change, in turn with the others: applied to the batch's copy, checked, persisted with the batch, then served. */
  #change<T>(apply: (draft: DataFile) => { result: T; changes?: DirectoryChange[]; write?: boolean }): Promise<T> {
    return this.#commit((draft) => {
      const { result, changes = [], write = true } = apply(draft);
      return { changes: write ? changes : undefined, result };
    });
  }

  #commit<T>(step: Step<T>, isBarrier = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({ step, resolve: resolve as (result: unknown) => void, reject, isBarrier });
      if (!this.#isFlushing) void this.#flush();
    });
  }

  /**
   * Group commit: the changes that arrive while a write is under way wait for it, and then go
   * to disk together in one write, each acknowledged only once that write (and its fsync) is
   * done. A change arriving at an idle store is written at once, so nothing waits for a batch
   * to fill; under a burst, one write of the whole file carries many changes instead of one.
   */
  async #flush(): Promise<void> {
    this.#isFlushing = true;
    try {
      while (this.#pending.length > 0) {
        // A replaced state is served on its own, between two batches, so no copy made before it is written over it.
        const barrier = this.#pending.findIndex((p) => p.isBarrier);
        const batch = this.#pending.splice(0, barrier === 0 ? 1 : barrier === -1 ? this.#pending.length : barrier);
        try {
          await this.#commitBatch(batch);
        } catch (err) {
          // Serving the new state failed (an onCommit listener threw): whoever is still waiting hears it, as before batching.
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.#isFlushing = false;
    }
  }

  /**
   * Applies each change in turn to one copy of the state, as if alone: a change sees those
   * before it, and one that throws (before touching the copy: each step decides first, then
   * changes) fails alone. Then the copy is checked and persisted once, and served.
   */
  async #commitBatch(batch: Pending[]): Promise<void> {
    let reloaded: DataFile | undefined;
    try {
      reloaded = this.#options.reload?.();
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    if (reloaded !== undefined) this.#serve(reloaded, undefined);
    let draft: DataFile | undefined;
    const changes: DirectoryChange[] = [];
    let writing = 0;
    const done: { pending: Pending; result: unknown }[] = [];
    for (const pending of batch) {
      try {
        // The batch's copy: the lists copied, each account only when a change reaches it
        // (#account), so a batch costs what it changes, not the whole state. Kept from the
        // first change that writes on; one that writes nothing leaves its copy behind.
        const target = draft ?? { ...this.#data, accounts: [...this.#data.accounts], owners: [...this.#data.owners] };
        this.#draft = target;
        const { changes: made, result } = pending.step(target);
        if (made !== undefined) {
          draft = target;
          changes.push(...made);
          writing++;
        }
        done.push({ pending, result });
      } catch (err) {
        pending.reject(err);
      }
    }
    this.#draft = undefined;
    this.#copied = new WeakSet();
    if (draft !== undefined) {
      let checked: DataFile;
      try {
        // A change the schema refuses is a bug of the caller's, never written. Once the state
        // served has been checked whole, a batch checks what it changed (and the checks across
        // records): the accounts it shares with the state served passed already.
        checked = this.#isStateChecked ? checkChangedDataFile(draft, new Set(this.#data.accounts)) : dataFileSchema.parse(draft);
      } catch (err) {
        // Whose? Each change again on its own, so the others are still written. (The batch's
        // state is what is checked: a refused value a later change of the batch replaced is
        // never written either, though its change is answered. The owner API validates every
        // field before it reaches the store, so only a bug gets here.)
        if (done.length === 1) done[0]!.pending.reject(err);
        else for (const { pending } of done) await this.#commitBatch([pending]);
        return;
      }
      try {
        await this.#options.persist?.(checked, writing);
      } catch (err) {
        for (const { pending } of done) pending.reject(err);
        return;
      }
      this.#serve(checked, changes);
      this.#isStateChecked = true;
    }
    for (const { pending, result } of done) pending.resolve(result);
  }

  #serve(next: DataFile, changes: readonly DirectoryChange[] | undefined): void {
    this.#data = next;
    this.#options.onCommit?.(next, changes);
  }
}
