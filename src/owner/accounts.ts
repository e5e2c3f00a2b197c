/**
 * Accounts, their members (owners), invites and the audit listing.
 *
 * Operators create, disable and delete accounts and add owners with an initial password the
 * owner must change; owners see and rename their own accounts, list and remove members, and
 * invite people (owner/members.ts, owner/invites.ts). Every change goes through the owner
 * change pipeline (owner/pipeline.ts).
 *
 * A disabled or deleted account stops its tokens at once on every instance (an account-wide
 * reset after the write). A deleted account stays as a tombstone: its id is never given again,
 * its audit events stay, everything else goes.
 */
import { Conflict } from '../errors/errors.js';
import { randomBase62 } from '../domain/random.js';
import type { AccountDoc } from '../state/owners/store.js';
import { loadAccount, requireOperator } from './access.js';
import type { AuditEventView } from './audit.js';
import type { OwnerDeps } from './deps.js';
import { createInviteOperations, type InviteOperations } from './invites.js';
import { revokeSettingsTokens } from './keys.js';
import { createMemberOperations, signOutIfHomeless, type MemberOperations } from './members.js';
import { pageAfter } from './pages.js';
import { createChangePipeline, editAccount, trail, type Change } from './pipeline.js';
import type { Actor, Caller, Page, PageQuery } from './types.js';
import { accountView, type AccountView } from './views.js';

export interface AccountService extends MemberOperations, InviteOperations {
  listAccounts(caller: Caller, page: PageQuery): Promise<Page<AccountView>>;
  createAccount(actor: Actor, input: { id?: string; name: string }): Promise<AccountView>;
  getAccount(caller: Caller, accountId: string): Promise<AccountView>;
  /** `enabled` is the operator's; disabling resets every token of the account and revokes its settings tokens for good. */
  updateAccount(actor: Actor, accountId: string, input: { name?: string; enabled?: boolean }): Promise<AccountView>;
  deleteAccount(actor: Actor, accountId: string): Promise<{ id: string; deleted: true }>;

  /** Newest first; the cursor is the last event id of the page before. Owners are named by email too. */
  listAudit(caller: Caller, accountId: string, page: PageQuery): Promise<Page<AuditEventView>>;
}

type AccountOperations = Omit<AccountService, keyof MemberOperations | keyof InviteOperations | 'listAudit'>;

function byId<T extends { id: string }>(a: T, b: T): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export function createAccountService(deps: OwnerDeps): AccountService {
  const change = createChangePipeline(deps);
  return {
    ...createAccountOperations(deps, change),
    ...createMemberOperations(deps, change),
    ...createInviteOperations(deps, change),
    listAudit: (caller, accountId, page) => listAudit(deps, caller, accountId, page),
  };
}

function createAccountOperations({ store, sessions, revocations }: OwnerDeps, change: Change): AccountOperations {
  const iso = (ms: number): string => new Date(ms).toISOString();

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

    createAccount: (actor, { id = `acct_${randomBase62(16)}`, name }) => change(actor, {
      load: async () => undefined,
      authorize: () => requireOperator(actor.caller),
      async persist({ now, event }) {
        const doc: AccountDoc = { id, name, enabled: true, createdAt: iso(now), apiKeys: [], members: [], invites: [], settingsTokens: [], webhooks: [] };
        const made = [event({ action: 'account.create', target: { type: 'account', id }, changes: { name: [null, name] } })];
        if (!(await store.createAccount(doc, made))) throw new Conflict(`An account with id "${id}" exists or existed.`, 'id');
        return trail(id, made, accountView(doc));
      },
    }),

    async getAccount(caller, accountId) {
      return accountView(await loadAccount(store, caller, accountId));
    },

    updateAccount: (actor, accountId, { name, enabled }) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      authorize: () => (enabled === undefined ? undefined : requireOperator(actor.caller)),
      persist: ({ now, event }) => editAccount(store, actor.caller, accountId, (current) => {
        const changed = { ...current, ...(name !== undefined ? { name } : {}), ...(enabled !== undefined ? { enabled } : {}) };
        const changes = { name: [current.name ?? '', changed.name ?? ''], enabled: [current.enabled, changed.enabled] } satisfies Record<string, [unknown, unknown]>;
        if (changed.name === current.name && changed.enabled === current.enabled) return { events: [], result: { doc: current, disabled: false } };
        const disabled = current.enabled && !changed.enabled;
        // Disabling is an account reset, which revokes the settings tokens for good (keys.ts
        // resetAccount): the reset below is remembered for a while only, a settings token lives on.
        const next = disabled ? revokeSettingsTokens(changed, now) : changed;
        return { doc: next, events: [event({ action: 'account.update', target: { type: 'account', id: accountId }, changes })], result: { doc: next, disabled } };
      }),
      async notify({ doc, disabled }) {
        // After the write: a token checked between the reset and the write would otherwise pass.
        // Also when it was disabled already: a retry after a failed reset must still make it.
        if (disabled || enabled === false) await revocations.reset({ accountId });
        return accountView(doc);
      },
    }),

    deleteAccount: (actor, accountId) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      authorize: () => requireOperator(actor.caller),
      persist: ({ now, event }) => editAccount(store, actor.caller, accountId, (current) => {
        const made = [event({ action: 'account.delete', target: { type: 'account', id: accountId } })];
        const tombstone: AccountDoc = { ...current, enabled: false, deletedAt: iso(now), apiKeys: [], members: [], invites: [], settingsTokens: [], webhooks: [] };
        return { doc: tombstone, events: made, result: current.members.map((m) => m.ownerId) };
      }),
      async notify(formerMembers) {
        await revocations.reset({ accountId });
        await signOutIfHomeless({ store, sessions }, formerMembers);
        return { id: accountId, deleted: true as const };
      },
    }),
  };
}

async function listAudit({ store }: OwnerDeps, caller: Caller, accountId: string, { limit, cursor }: PageQuery): Promise<Page<AuditEventView>> {
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
}
