/**
 * The members (owners) of an account: listed by anyone who reaches it, removed by its owners
 * (never the last one), added with an initial password by an operator. An owner left without
 * an account is signed out. Part of the account service (owner/accounts.ts).
 */
import { Conflict, NotFound } from '../errors/errors.js';
import { randomBase62 } from '../domain/random.js';
import type { OwnerRecord } from '../state/owners/records.js';
import type { AccountDoc, OwnerStore } from '../state/owners/store.js';
import type { SessionStore } from '../state/sessions/store.js';
import { loadAccount, requireOperator } from './access.js';
import type { OwnerDeps } from './deps.js';
import { pageAfter } from './pages.js';
import { hashPassword } from './passwords.js';
import { editAccount, type Change } from './pipeline.js';
import type { Actor, Caller, Page, PageQuery } from './types.js';
import { memberView, type MemberView } from './views.js';

export interface MemberOperations {
  listMembers(caller: Caller, accountId: string, page: PageQuery): Promise<Page<MemberView>>;
  /** Conflict when the owner is the last one; an owner left without accounts is signed out. */
  removeMember(actor: Actor, accountId: string, ownerId: string): Promise<{ ownerId: string; removed: true }>;
  /** Operator: a new owner gets `initialPassword` and must change it; an existing owner is only added. */
  addOwner(actor: Actor, accountId: string, input: { email: string; initialPassword: string }): Promise<MemberView>;
}

/** Owners who belong to no account any more lose their sessions. */
export async function signOutIfHomeless({ store, sessions }: { store: OwnerStore; sessions: SessionStore }, ownerIds: readonly string[]): Promise<void> {
  for (const ownerId of ownerIds) {
    if ((await store.accountsOf(ownerId)).length === 0) await sessions.deleteOwnerSessions(ownerId);
  }
}

export function createMemberOperations({ store, sessions }: OwnerDeps, change: Change): MemberOperations {
  const iso = (ms: number): string => new Date(ms).toISOString();

  async function membersOf(doc: AccountDoc): Promise<MemberView[]> {
    const members = [...doc.members].sort((a, b) => (a.ownerId < b.ownerId ? -1 : a.ownerId > b.ownerId ? 1 : 0));
    return Promise.all(members.map(async (m) => memberView(m, await store.findOwner(m.ownerId))));
  }

  return {
    async listMembers(caller, accountId, page) {
      const doc = await loadAccount(store, caller, accountId);
      return pageAfter(await membersOf(doc), (m) => m.ownerId, page);
    },

    removeMember: (actor, accountId, ownerId) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      persist: ({ event }) => editAccount(store, actor.caller, accountId, (current) => {
        if (!current.members.some((m) => m.ownerId === ownerId)) throw new NotFound('No such member.');
        if (current.members.length === 1) throw new Conflict('An account keeps at least one owner: add another before removing this one.', 'ownerId');
        const made = [event({ action: 'member.remove', target: { type: 'owner', id: ownerId } })];
        return { doc: { ...current, members: current.members.filter((m) => m.ownerId !== ownerId) }, events: made, result: undefined };
      }),
      async notify() {
        await signOutIfHomeless({ store, sessions }, [ownerId]);
        return { ownerId, removed: true as const };
      },
    }),

    addOwner(actor, accountId, { email, initialPassword }) {
      const wanted = email.toLowerCase();
      const taken = 'An owner with this email exists already: invite them instead (accepting needs their password).';
      return change(actor, {
        load: () => loadAccount(store, actor.caller, accountId),
        authorize: () => requireOperator(actor.caller),
        // Emails are not verified (an invite's token goes to whoever asked for it), so an owner's
        // email proves nothing: whoever made that owner may have chosen someone else's address.
        // An existing owner joins another account only by an invite, whose acceptance needs both
        // the token and that owner's password; adding them here would hand the account to them.
        async apply(doc) {
          const existing = await store.findOwnerByEmail(wanted);
          if (existing !== undefined) {
            throw new Conflict(doc.members.some((m) => m.ownerId === existing.id) ? 'This owner is already a member of the account.' : taken, 'email');
          }
          return hashPassword(initialPassword);
        },
        async persist({ prepared: passwordHash, now, event }) {
          const owner: OwnerRecord = { id: `own_${randomBase62(16)}`, email: wanted, passwordHash, mustChangePassword: true, disabled: false, createdAt: iso(now) };
          // Lost a race with another creation of the same email: as if it had existed before.
          if (!(await store.createOwner(owner))) throw new Conflict(taken, 'email');
          const member = { ownerId: owner.id, addedAt: iso(now) };
          const saved = await editAccount(store, actor.caller, accountId, (current) => {
            if (current.members.some((m) => m.ownerId === member.ownerId)) throw new Conflict('This owner is already a member of the account.', 'email');
            const made = [event({ action: 'member.add', target: { type: 'owner', id: member.ownerId }, changes: { email: [null, wanted], mustChangePassword: [null, true] } })];
            return { doc: { ...current, members: [...current.members, member] }, events: made, result: undefined };
          });
          return { ...saved, result: memberView(member, owner) };
        },
      });
    },
  };
}
