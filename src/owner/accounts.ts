/**
 * Accounts, their members (owners), invites and the audit listing.
 *
 * Operators create, disable and delete accounts and add owners with an initial password the
 * owner must change; owners see and rename their own accounts, list and remove members, and
 * invite people. An invite is a one-time token (`gwinv_` + 43 base62) stored as its SHA-256,
 * valid owner.inviteTtlHours. Accepting it with a password either creates the owner with that
 * password or, when an owner with the invited email already exists, proves to be that owner:
 * the password must then be the owner's own (a counted password check, like a sign-in), so an
 * invite link alone never lets anyone into another owner's name.
 *
 * A disabled or deleted account stops its tokens at once on every instance (an account-wide
 * reset after the write). A deleted account stays as a tombstone: its id is never given again,
 * its audit events stay, everything else goes.
 */
import { Conflict, InvalidRequest, NotFound } from '../errors/errors.js';
import { randomBase62 } from '../domain/random.js';
import { secretDigest } from '../domain/secrets.js';
import type { AuditEvent, InviteRecord, OwnerRecord } from '../state/owners/records.js';
import type { AccountDoc } from '../state/owners/store.js';
import { loadAccount, requireOperator, requireReachable, requireWritable } from './access.js';
import { logEvents, makeEvent, type AuditEventView, type EventInput } from './audit.js';
import type { OwnerDeps } from './deps.js';
import { revokeSettingsTokens } from './keys.js';
import { hashPassword } from './passwords.js';
import { checkOwnerPassword } from './sessions.js';
import type { Actor, Caller, Page, PageQuery, RequestMeta } from './types.js';
import { accountView, inviteStatus, inviteView, memberView, type AccountView, type InviteView, type MemberView } from './views.js';

export const INVITE_TOKEN_PREFIX = 'gwinv_';
const INVITE_TOKEN_LENGTH = 43;
/** Invites that ended longer ago than this are dropped when a new one is made. */
const ENDED_INVITE_KEPT_MS = 30 * 86_400_000;
/** Invites an account holds at most (ended ones within ENDED_INVITE_KEPT_MS included). */
const MAX_INVITES = 100;

export interface AccountService {
  listAccounts(caller: Caller, page: PageQuery): Promise<Page<AccountView>>;
  createAccount(actor: Actor, input: { id?: string; name: string }): Promise<AccountView>;
  getAccount(caller: Caller, accountId: string): Promise<AccountView>;
  /** `enabled` is the operator's; disabling resets every token of the account and revokes its settings tokens for good. */
  updateAccount(actor: Actor, accountId: string, input: { name?: string; enabled?: boolean }): Promise<AccountView>;
  deleteAccount(actor: Actor, accountId: string): Promise<{ id: string; deleted: true }>;

  listMembers(caller: Caller, accountId: string, page: PageQuery): Promise<Page<MemberView>>;
  /** Conflict when the owner is the last one; an owner left without accounts is signed out. */
  removeMember(actor: Actor, accountId: string, ownerId: string): Promise<{ ownerId: string; removed: true }>;
  /** Operator: a new owner gets `initialPassword` and must change it; an existing owner is only added. */
  addOwner(actor: Actor, accountId: string, input: { email: string; initialPassword: string }): Promise<MemberView>;

  listInvites(caller: Caller, accountId: string, page: PageQuery): Promise<Page<InviteView>>;
  /** The token is in this answer only. */
  createInvite(actor: Actor, accountId: string, input: { email: string }): Promise<{ invite: InviteView; token: string }>;
  revokeInvite(actor: Actor, accountId: string, inviteId: string): Promise<InviteView>;
  /** One NotFound for an unknown, used, revoked or expired invite (or a deleted account). */
  acceptInvite(input: { token: string; password: string }, meta: RequestMeta): Promise<{ ownerId: string; accountId: string }>;

  /** Newest first; the cursor is the last event id of the page before. Owners are named by email too. */
  listAudit(caller: Caller, accountId: string, page: PageQuery): Promise<Page<AuditEventView>>;
}

/** The invite's key in the store: the SHA-256 of the whole token. */
export function inviteDigest(token: string): string {
  return secretDigest(Buffer.from(token, 'utf8'));
}

/** A page of `items` (sorted by `keyOf`, ascending): those after the cursor. */
function pageAfter<T>(items: readonly T[], keyOf: (item: T) => string, { limit, cursor }: PageQuery): Page<T> {
  const rest = cursor === undefined ? items : items.filter((item) => keyOf(item) > cursor);
  const page = rest.slice(0, limit);
  return rest.length > limit ? { items: page, nextCursor: keyOf(page.at(-1)!) } : { items: page };
}

function byId<T extends { id: string }>(a: T, b: T): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export function createAccountService({ store, sessions, revocations, clock, limits, log, config }: OwnerDeps): AccountService {
  const iso = (ms: number): string => new Date(ms).toISOString();

  /** Builds the events of one change, all at one time. */
  function events(actor: Actor, now: number, ...inputs: EventInput[]): AuditEvent[] {
    return inputs.map((input) => makeEvent(actor, now, input));
  }

  /** Owners who belong to no account any more lose their sessions. */
  async function signOutIfHomeless(ownerIds: readonly string[]): Promise<void> {
    for (const ownerId of ownerIds) {
      if ((await store.accountsOf(ownerId)).length === 0) await sessions.deleteOwnerSessions(ownerId);
    }
  }

  async function membersOf(doc: AccountDoc): Promise<MemberView[]> {
    const members = [...doc.members].sort((a, b) => (a.ownerId < b.ownerId ? -1 : a.ownerId > b.ownerId ? 1 : 0));
    return Promise.all(members.map(async (m) => memberView(m, await store.findOwner(m.ownerId))));
  }

  return {
    async listAccounts(caller, page) {
      let docs: AccountDoc[];
      if (caller.kind === 'operator') {
        docs = (await store.listAccounts()).filter((d) => d.deletedAt === undefined);
      } else {
        const found = await Promise.all((await store.accountsOf(caller.ownerId)).map((id) => store.readAccount(id)));
        docs = found.filter((d): d is AccountDoc => d !== undefined && d.deletedAt === undefined).sort(byId);
      }
      return pageAfter(docs.map(accountView), (a) => a.id, page);
    },

    async createAccount(actor, { id = `acct_${randomBase62(16)}`, name }) {
      requireOperator(actor.caller);
      requireWritable(store);
      const now = clock.now();
      const doc: AccountDoc = { id, name, enabled: true, createdAt: iso(now), apiKeys: [], members: [], invites: [], settingsTokens: [] };
      const made = events(actor, now, { action: 'account.create', target: { type: 'account', id }, changes: { name: [null, name] } });
      if (!(await store.createAccount(doc, made))) throw new Conflict(`An account with id "${id}" exists or existed.`, 'id');
      logEvents(log, id, made);
      return accountView(doc);
    },

    async getAccount(caller, accountId) {
      return accountView(await loadAccount(store, caller, accountId));
    },

    async updateAccount(actor, accountId, { name, enabled }) {
      if (enabled !== undefined) requireOperator(actor.caller);
      await loadAccount(store, actor.caller, accountId);
      requireWritable(store);
      const now = clock.now();
      const { doc, made, disabled } = await store.updateAccount(accountId, (current) => {
        requireReachable(actor.caller, current);
        const changed = { ...current, ...(name !== undefined ? { name } : {}), ...(enabled !== undefined ? { enabled } : {}) };
        const changes = { name: [current.name ?? '', changed.name ?? ''], enabled: [current.enabled, changed.enabled] } satisfies Record<string, [unknown, unknown]>;
        if (changed.name === current.name && changed.enabled === current.enabled) return { events: [], result: { doc: current, made: [], disabled: false } };
        const disabled = current.enabled && !changed.enabled;
        // Disabling is an account reset, which revokes the settings tokens for good (keys.ts
        // resetAccount): the reset below is remembered for a while only, a settings token lives on.
        const next = disabled ? revokeSettingsTokens(changed, now) : changed;
        const made = events(actor, now, { action: 'account.update', target: { type: 'account', id: accountId }, changes });
        return { doc: next, events: made, result: { doc: next, made, disabled } };
      });
      logEvents(log, accountId, made);
      // After the write: a token checked between the reset and the write would otherwise pass.
      // Also when it was disabled already: a retry after a failed reset must still make it.
      if (disabled || enabled === false) await revocations.reset({ accountId });
      return accountView(doc);
    },

    async deleteAccount(actor, accountId) {
      requireOperator(actor.caller);
      await loadAccount(store, actor.caller, accountId);
      requireWritable(store);
      const now = clock.now();
      const { made, formerMembers } = await store.updateAccount(accountId, (current) => {
        requireReachable(actor.caller, current);
        const made = events(actor, now, { action: 'account.delete', target: { type: 'account', id: accountId } });
        const tombstone: AccountDoc = { ...current, enabled: false, deletedAt: iso(now), apiKeys: [], members: [], invites: [], settingsTokens: [] };
        return { doc: tombstone, events: made, result: { made, formerMembers: current.members.map((m) => m.ownerId) } };
      });
      logEvents(log, accountId, made);
      await revocations.reset({ accountId });
      await signOutIfHomeless(formerMembers);
      return { id: accountId, deleted: true };
    },

    async listMembers(caller, accountId, page) {
      const doc = await loadAccount(store, caller, accountId);
      return pageAfter(await membersOf(doc), (m) => m.ownerId, page);
    },

    async removeMember(actor, accountId, ownerId) {
      await loadAccount(store, actor.caller, accountId);
      requireWritable(store);
      const now = clock.now();
      const made = await store.updateAccount(accountId, (current) => {
        requireReachable(actor.caller, current);
        if (!current.members.some((m) => m.ownerId === ownerId)) throw new NotFound('No such member.');
        if (current.members.length === 1) throw new Conflict('An account keeps at least one owner: add another before removing this one.', 'ownerId');
        const made = events(actor, now, { action: 'member.remove', target: { type: 'owner', id: ownerId } });
        return { doc: { ...current, members: current.members.filter((m) => m.ownerId !== ownerId) }, events: made, result: made };
      });
      logEvents(log, accountId, made);
      await signOutIfHomeless([ownerId]);
      return { ownerId, removed: true };
    },

    async addOwner(actor, accountId, { email, initialPassword }) {
      requireOperator(actor.caller);
      const doc = await loadAccount(store, actor.caller, accountId);
      requireWritable(store);
      const wanted = email.toLowerCase();
      // Emails are not verified (an invite's token goes to whoever asked for it), so an owner's
      // email proves nothing: whoever made that owner may have chosen someone else's address.
      // An existing owner joins another account only by an invite, whose acceptance needs both
      // the token and that owner's password; adding them here would hand the account to them.
      const existing = await store.findOwnerByEmail(wanted);
      if (existing !== undefined) {
        const member = doc.members.some((m) => m.ownerId === existing.id);
        throw new Conflict(member ? 'This owner is already a member of the account.' : 'An owner with this email exists already: invite them instead (accepting needs their password).', 'email');
      }
      let owner: OwnerRecord | undefined;
      let created = false;
      {
        const fresh: OwnerRecord = {
          id: `own_${randomBase62(16)}`,
          email: wanted,
          passwordHash: await hashPassword(initialPassword),
          mustChangePassword: true,
          disabled: false,
          createdAt: iso(clock.now()),
        };
        created = await store.createOwner(fresh);
        // Lost a race with another creation of the same email: as if it had existed before.
        if (!created) throw new Conflict('An owner with this email exists already: invite them instead (accepting needs their password).', 'email');
        owner = fresh;
      }
      const member = { ownerId: owner.id, addedAt: iso(clock.now()) };
      const now = clock.now();
      const made = await store.updateAccount(accountId, (current) => {
        requireReachable(actor.caller, current);
        if (current.members.some((m) => m.ownerId === member.ownerId)) throw new Conflict('This owner is already a member of the account.', 'email');
        const made = events(actor, now, {
          action: 'member.add',
          target: { type: 'owner', id: member.ownerId },
          changes: { email: [null, wanted], ...(created ? { mustChangePassword: [null, true] } : {}) },
        });
        return { doc: { ...current, members: [...current.members, member] }, events: made, result: made };
      });
      logEvents(log, accountId, made);
      return memberView(member, owner);
    },

    async listInvites(caller, accountId, { limit, cursor }) {
      const doc = await loadAccount(store, caller, accountId);
      const now = clock.now();
      const newestFirst = [...doc.invites].reverse();
      let start = 0;
      if (cursor !== undefined) {
        start = newestFirst.findIndex((i) => i.id === cursor) + 1;
        if (start === 0) throw new InvalidRequest('This cursor is from no page of this listing: start again without it.', { field: 'cursor' });
      }
      const page = newestFirst.slice(start, start + limit).map((i) => inviteView(i, now));
      return start + limit < newestFirst.length ? { items: page, nextCursor: page.at(-1)!.id } : { items: page };
    },

    async createInvite(actor, accountId, { email }) {
      const doc = await loadAccount(store, actor.caller, accountId);
      requireWritable(store);
      const wanted = email.toLowerCase();
      const existing = await store.findOwnerByEmail(wanted);
      if (existing !== undefined && doc.members.some((m) => m.ownerId === existing.id)) throw new Conflict('This owner is already a member of the account.', 'email');
      const token = `${INVITE_TOKEN_PREFIX}${randomBase62(INVITE_TOKEN_LENGTH)}`;
      const now = clock.now();
      const invite: InviteRecord = {
        id: `inv_${randomBase62(16)}`,
        email: wanted,
        digest: inviteDigest(token),
        createdAt: iso(now),
        expiresAt: iso(now + config.owner.inviteTtlHours * 3_600_000),
      };
      const made = await store.updateAccount(accountId, (current) => {
        requireReachable(actor.caller, current);
        const kept = current.invites.filter((i) => inviteStatus(i, now) === 'pending' || endOf(i) > now - ENDED_INVITE_KEPT_MS);
        if (kept.length >= MAX_INVITES) throw new Conflict(`An account holds at most ${MAX_INVITES} invites: revoke some first.`);
        const made = events(actor, now, { action: 'invite.create', target: { type: 'invite', id: invite.id }, changes: { email: [null, wanted], expiresAt: [null, invite.expiresAt] } });
        return { doc: { ...current, invites: [...kept, invite] }, events: made, result: made };
      });
      logEvents(log, accountId, made);
      return { invite: inviteView(invite, now), token };
    },

    async revokeInvite(actor, accountId, inviteId) {
      await loadAccount(store, actor.caller, accountId);
      requireWritable(store);
      const now = clock.now();
      const { invite, made } = await store.updateAccount(accountId, (current) => {
        requireReachable(actor.caller, current);
        const invite = current.invites.find((i) => i.id === inviteId);
        if (invite === undefined) throw new NotFound('No such invite.');
        const status = inviteStatus(invite, now);
        if (status === 'revoked') return { events: [], result: { invite, made: [] as AuditEvent[] } };
        if (status !== 'pending') throw new Conflict(`This invite is ${status}: only a pending invite can be revoked.`);
        const revoked = { ...invite, revokedAt: iso(now) };
        const made = events(actor, now, { action: 'invite.revoke', target: { type: 'invite', id: inviteId } });
        return { doc: { ...current, invites: current.invites.map((i) => (i.id === inviteId ? revoked : i)) }, events: made, result: { invite: revoked, made } };
      });
      logEvents(log, accountId, made);
      return inviteView(invite, now);
    },

    async acceptInvite({ token, password }, meta) {
      const gone = (): NotFound => new NotFound('No such invite: it may have been used, revoked or have expired.');
      const found = token.startsWith(INVITE_TOKEN_PREFIX) ? await store.findInvite(inviteDigest(token)) : undefined;
      if (found === undefined || inviteStatus(found.invite, clock.now()) !== 'pending') throw gone();
      const { accountId, invite } = found;
      const account = await store.readAccount(accountId);
      if (account === undefined || account.deletedAt !== undefined) throw gone();
      requireWritable(store);

      let owner = await store.findOwnerByEmail(invite.email);
      if (owner !== undefined) {
        if (account.members.some((m) => m.ownerId === owner!.id)) throw new Conflict('This owner is already a member of the account.', 'token');
        // The invited email has an owner: only that owner's password accepts for them.
        await checkOwnerPassword(limits, invite.email, owner, password, meta);
      } else {
        const fresh: OwnerRecord = {
          id: `own_${randomBase62(16)}`,
          email: invite.email,
          passwordHash: await hashPassword(password),
          mustChangePassword: false,
          disabled: false,
          createdAt: iso(clock.now()),
        };
        if (!(await store.createOwner(fresh))) throw new Conflict('An owner with this email was created meanwhile: accept again with their password.', 'token');
        owner = fresh;
      }

      const ownerId = owner.id;
      const now = clock.now();
      const actor: Actor = { caller: { kind: 'owner', ownerId, email: owner.email }, meta };
      const made = await store.updateAccount(accountId, (current) => {
        if (current.deletedAt !== undefined) throw gone();
        const index = current.invites.findIndex((i) => i.id === invite.id);
        // One use: whoever commits first has it.
        if (index === -1 || inviteStatus(current.invites[index]!, now) !== 'pending') throw gone();
        if (current.members.some((m) => m.ownerId === ownerId)) throw new Conflict('This owner is already a member of the account.', 'token');
        const invites = current.invites.map((i, n) => (n === index ? { ...i, usedAt: iso(now) } : i));
        const made = events(actor, now,
          { action: 'invite.accept', target: { type: 'invite', id: invite.id } },
          { action: 'member.add', target: { type: 'owner', id: ownerId }, changes: { email: [null, invite.email] } });
        return { doc: { ...current, invites, members: [...current.members, { ownerId, addedAt: iso(now) }] }, events: made, result: made };
      });
      logEvents(log, accountId, made);
      return { ownerId, accountId };
    },

    async listAudit(caller, accountId, { limit, cursor }) {
      await loadAccount(store, caller, accountId);
      const found = await store.listAudit(accountId, { limit: limit + 1, ...(cursor !== undefined ? { before: cursor } : {}) });
      const listed = found.slice(0, limit);
      // One read per owner on the page (at most `limit`, usually one or two), not per event.
      const ownerIds = new Set(listed.flatMap(({ actor }) => (actor.type === 'owner' && actor.id !== undefined ? [actor.id] : [])));
      const emails = new Map(await Promise.all([...ownerIds].map(async (id) => [id, (await store.findOwner(id))?.email] as const)));
      const items = listed.map((event): AuditEventView => {
        const email = event.actor.id === undefined ? undefined : emails.get(event.actor.id);
        return email === undefined ? event : { ...event, actor: { ...event.actor, email } };
      });
      return found.length > limit ? { items, nextCursor: items.at(-1)!.id } : { items };
    },
  };
}

/** When an invite stopped being usable (or will). */
function endOf(invite: InviteRecord): number {
  return Date.parse(invite.usedAt ?? invite.revokedAt ?? invite.expiresAt);
}
