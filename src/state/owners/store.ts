/**
 * What the owner API (src/owner/) stores: accounts with their members, invites, API keys and
 * API settings tokens; owners; roles and sign records written object by object; and the audit
 * events that go with every change. Two implementations pass test/contracts/owners.contract.ts:
 * the data file (owner-store.file.ts, on MemoryOwnerStore) and Redis (owner-store.redis.ts).
 *
 * Atomicity is the store's job: `updateAccount` reads, lets the caller decide, and writes the
 * new account with its audit events as one change, so two concurrent changes never lose one
 * another. What an account is written as also decides sign-in (its keys) on every instance:
 * each store keeps the key directory it serves in step.
 */
import type { AccountData } from '../data-file/data-file.js';
import type { Role, RolePage, RoleQuery, SignRecord } from '../directory/store.js';
import type { AuditEvent, InviteRecord, OwnerRecord, SettingsTokenRecord } from './records.js';

/** An account as `updateAccount` hands it over: everything but roles, sign records and audit events. */
export type AccountDoc = Omit<AccountData, 'roles' | 'signRecords' | 'audit'>;

export interface AccountUpdate<T> {
  /** The account as it is to be stored; absent: nothing is written (and `events` are dropped). */
  doc?: AccountDoc;
  events: readonly AuditEvent[];
  result: T;
}

export type PutRoleOutcome = 'ok' | 'id_taken' | 'slug_taken' | 'not_found';
export type PutSignRecordOutcome = 'ok' | 'exists' | 'not_found';

export interface OwnerStore {
  /** Why every write is refused (answered 409 read_only_store), or undefined when writes are allowed. */
  readonly readOnly: string | undefined;
  /** Why role and sign-record writes are refused (they belong to another store), or undefined. */
  readonly directoryReadOnly: string | undefined;

  /** Every account, deleted ones included, in id order (the operator's listing pages over it). */
  listAccounts(): Promise<AccountDoc[]>;
  readAccount(accountId: string): Promise<AccountDoc | undefined>;
  /** Adds an account with its events; false when the id is taken (a deleted account's too). */
  createAccount(doc: AccountDoc, events: readonly AuditEvent[]): Promise<boolean>;
  /**
   * Reads the account, hands it to `change`, and stores what `change` returns together with its
   * events, as one change that no concurrent one can come between (retried when one does: so
   * `change` must be free of side effects). A GatewayError thrown by `change` writes nothing and
   * reaches the caller. Throws NotFound when there is no such account.
   */
  updateAccount<T>(accountId: string, change: (doc: AccountDoc) => AccountUpdate<T>): Promise<T>;

  findOwner(ownerId: string): Promise<OwnerRecord | undefined>;
  /** By email, lowercase. */
  findOwnerByEmail(email: string): Promise<OwnerRecord | undefined>;
  /** Adds an owner; false when the email (or id) is taken. */
  createOwner(owner: OwnerRecord): Promise<boolean>;
  /** As updateAccount, for one owner; `owner` absent writes nothing. Throws NotFound when there is none, Conflict (field email) when another owner has the new email. */
  updateOwner<T>(ownerId: string, change: (owner: OwnerRecord) => { owner?: OwnerRecord; result: T }): Promise<T>;
  /** Ids of the accounts whose member list holds the owner (deleted accounts left out). */
  accountsOf(ownerId: string): Promise<string[]>;

  listRoles(accountId: string, query: RoleQuery): Promise<RolePage>;
  getRole(accountId: string, id: number): Promise<Role | undefined>;
  /**
   * Creates a role (`replaces` absent: its id must be free) or replaces role `replaces` (which
   * must exist; `role.id` may differ: that moves it). Slugs are unique within the account.
   * Announced to every instance's directory cache. A deleted account (as an unknown one) takes
   * no role or sign record: not_found, or false for the deletes. `member`: the owner the write is
   * made for; it takes effect only while they are a member of the account, checked in the same
   * step as the write (a removal from the members may come between the caller's check and it),
   * else not_found (false); absent for an operator's write.
   */
  putRole(accountId: string, role: Role, replaces: number | undefined, events: readonly AuditEvent[], member?: string): Promise<PutRoleOutcome>;
  deleteRole(accountId: string, id: number, events: readonly AuditEvent[], member?: string): Promise<boolean>;
  /** `address` lowercase. */
  getSignRecord(accountId: string, address: string): Promise<SignRecord | undefined>;
  /** `mode` create: the address must have no record yet; replace: it must have one. */
  putSignRecord(accountId: string, record: SignRecord, mode: 'create' | 'replace', events: readonly AuditEvent[], member?: string): Promise<PutSignRecordOutcome>;
  deleteSignRecord(accountId: string, address: string, events: readonly AuditEvent[], member?: string): Promise<boolean>;

  /** Records events that change nothing stored in the account (a reset, an owner's password change). */
  appendAudit(accountId: string, events: readonly AuditEvent[]): Promise<void>;
  /** Newest first; `before` is an event id: only older events. */
  listAudit(accountId: string, page: { before?: string; limit: number }): Promise<AuditEvent[]>;

  /** The settings token with this digest, wherever it is (revoked and expired ones too). */
  findSettingsToken(digest: string): Promise<{ accountId: string; token: SettingsTokenRecord } | undefined>;
  /** The invite with this digest (used, revoked and expired ones too). */
  findInvite(digest: string): Promise<{ accountId: string; invite: InviteRecord } | undefined>;
}

/** The roles, sign records and audit events an AccountDoc leaves out. */
export function splitAccount(account: AccountData): AccountDoc {
  const { roles: _roles, signRecords: _signRecords, audit: _audit, ...doc } = account;
  return doc;
}
