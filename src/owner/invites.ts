/**
 * Invites to own an account. An invite is a one-time token (`gwinv_` + 43 base62) stored as its
 * SHA-256, valid owner.inviteTtlHours. Accepting it with a password either creates the owner
 * with that password or, when an owner with the invited email already exists, proves to be that
 * owner: the password must then be the owner's own (a counted password check, like a sign-in),
 * so an invite link alone never lets anyone into another owner's name. Part of the account
 * service (owner/accounts.ts).
 */
import { Conflict, InvalidRequest, NotFound } from '../errors/errors.js';
import { randomBase62 } from '../domain/random.js';
import { secretDigest } from '../domain/secrets.js';
import type { InviteRecord, OwnerRecord } from '../state/owners/records.js';
import { loadAccount } from './access.js';
import type { OwnerDeps } from './deps.js';
import { inviteMail } from './mail-templates.js';
import { hashPassword } from './passwords.js';
import { editAccount, type Change } from './pipeline.js';
import { checkOwnerPassword } from './sessions.js';
import type { Actor, Caller, Page, PageQuery, RequestMeta } from './types.js';
import { inviteStatus, inviteView, type InviteView } from './views.js';

export const INVITE_TOKEN_PREFIX = 'gwinv_';
const INVITE_TOKEN_LENGTH = 43;
/** Invites that ended longer ago than this are dropped when a new one is made. */
const ENDED_INVITE_KEPT_MS = 30 * 86_400_000;
/** Invites an account holds at most (ended ones within ENDED_INVITE_KEPT_MS included). */
const MAX_INVITES = 100;

export interface InviteOperations {
  listInvites(caller: Caller, accountId: string, page: PageQuery): Promise<Page<InviteView>>;
  /** The token is in this answer only. */
  createInvite(actor: Actor, accountId: string, input: { email: string }): Promise<{ invite: InviteView; token: string }>;
  revokeInvite(actor: Actor, accountId: string, inviteId: string): Promise<InviteView>;
  /** One NotFound for an unknown, used, revoked or expired invite (or a deleted account). */
  acceptInvite(input: { token: string; password: string }, meta: RequestMeta): Promise<{ ownerId: string; accountId: string }>;
}

/** The invite's key in the store: the SHA-256 of the whole token. */
export function inviteDigest(token: string): string {
  return secretDigest(Buffer.from(token, 'utf8'));
}

/** When an invite stopped being usable (or will). */
function endOf(invite: InviteRecord): number {
  return Date.parse(invite.usedAt ?? invite.revokedAt ?? invite.expiresAt);
}

export function createInviteOperations(deps: OwnerDeps, change: Change): InviteOperations {
  const { store, clock, config, mail } = deps;
  const iso = (ms: number): string => new Date(ms).toISOString();

  return {
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

    createInvite(actor, accountId, { email }) {
      const wanted = email.toLowerCase();
      return change(actor, {
        load: () => loadAccount(store, actor.caller, accountId),
        async apply(doc) {
          const existing = await store.findOwnerByEmail(wanted);
          if (existing !== undefined && doc.members.some((m) => m.ownerId === existing.id)) throw new Conflict('This owner is already a member of the account.', 'email');
        },
        async persist({ loaded, now, event }) {
          const token = `${INVITE_TOKEN_PREFIX}${randomBase62(INVITE_TOKEN_LENGTH)}`;
          const invite: InviteRecord = {
            id: `inv_${randomBase62(16)}`,
            email: wanted,
            digest: inviteDigest(token),
            createdAt: iso(now),
            expiresAt: iso(now + config.owner.inviteTtlHours * 3_600_000),
          };
          const saved = await editAccount(store, actor.caller, accountId, (current) => {
            const kept = current.invites.filter((i) => inviteStatus(i, now) === 'pending' || endOf(i) > now - ENDED_INVITE_KEPT_MS);
            if (kept.length >= MAX_INVITES) throw new Conflict(`An account holds at most ${MAX_INVITES} invites: revoke some first.`);
            const made = [event({ action: 'invite.create', target: { type: 'invite', id: invite.id }, changes: { email: [null, wanted], expiresAt: [null, invite.expiresAt] } })];
            return { doc: { ...current, invites: [...kept, invite] }, events: made, result: undefined };
          });
          return { ...saved, result: { invite: inviteView(invite, now), token, accountName: loaded.name ?? accountId } };
        },
        // With mail on, the gateway sends the link too; the inviter still gets it in the answer.
        async notify({ invite, token, accountName }) {
          await mail?.queue([{ to: invite.email, kind: 'invite', accountId, ...inviteMail(mail, { accountName, token, hours: config.owner.inviteTtlHours }) }]);
          return { invite, token };
        },
      });
    },

    revokeInvite: (actor, accountId, inviteId) => change(actor, {
      load: () => loadAccount(store, actor.caller, accountId),
      persist: ({ now, event }) => editAccount(store, actor.caller, accountId, (current) => {
        const invite = current.invites.find((i) => i.id === inviteId);
        if (invite === undefined) throw new NotFound('No such invite.');
        const status = inviteStatus(invite, now);
        if (status === 'revoked') return { events: [], result: inviteView(invite, now) };
        if (status !== 'pending') throw new Conflict(`This invite is ${status}: only a pending invite can be revoked.`);
        const revoked = { ...invite, revokedAt: iso(now) };
        const made = [event({ action: 'invite.revoke', target: { type: 'invite', id: inviteId } })];
        return { doc: { ...current, invites: current.invites.map((i) => (i.id === inviteId ? revoked : i)) }, events: made, result: inviteView(revoked, now) };
      }),
    }),

    acceptInvite: createInviteAcceptance(deps, change),
  };
}

/** Accepting an invite: a public change, whose caller (the owner it makes or proves) is known only once applied. */
function createInviteAcceptance({ store, clock, limits }: OwnerDeps, change: Change): InviteOperations['acceptInvite'] {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return ({ token, password }, meta) => {
    const gone = (): NotFound => new NotFound('No such invite: it may have been used, revoked or have expired.');
    return change(undefined, {
      async load() {
        const found = token.startsWith(INVITE_TOKEN_PREFIX) ? await store.findInvite(inviteDigest(token)) : undefined;
        if (found === undefined || inviteStatus(found.invite, clock.now()) !== 'pending') throw gone();
        const account = await store.readAccount(found.accountId);
        if (account === undefined || account.deletedAt !== undefined) throw gone();
        return { ...found, account };
      },
      // The invited email has an owner: only that owner's password accepts for them.
      async apply({ invite, account }): Promise<{ owner: OwnerRecord } | { passwordHash: string }> {
        const owner = await store.findOwnerByEmail(invite.email);
        if (owner === undefined) return { passwordHash: await hashPassword(password) };
        if (account.members.some((m) => m.ownerId === owner.id)) throw new Conflict('This owner is already a member of the account.', 'token');
        return { owner: await checkOwnerPassword(limits, invite.email, owner, password, meta) };
      },
      async persist({ loaded: { accountId, invite }, prepared, now, event }) {
        let owner: OwnerRecord;
        if ('owner' in prepared) owner = prepared.owner;
        else {
          owner = { id: `own_${randomBase62(16)}`, email: invite.email, passwordHash: prepared.passwordHash, mustChangePassword: false, disabled: false, createdAt: iso(now) };
          if (!(await store.createOwner(owner))) throw new Conflict('An owner with this email was created meanwhile: accept again with their password.', 'token');
        }
        const ownerId = owner.id;
        const by: Actor = { caller: { kind: 'owner', ownerId, email: owner.email }, meta };
        return editAccount(store, undefined, accountId, (current) => {
          if (current.deletedAt !== undefined) throw gone();
          const index = current.invites.findIndex((i) => i.id === invite.id);
          // One use: whoever commits first has it.
          if (index === -1 || inviteStatus(current.invites[index]!, now) !== 'pending') throw gone();
          if (current.members.some((m) => m.ownerId === ownerId)) throw new Conflict('This owner is already a member of the account.', 'token');
          const invites = current.invites.map((i, n) => (n === index ? { ...i, usedAt: iso(now) } : i));
          const made = [
            event({ action: 'invite.accept', target: { type: 'invite', id: invite.id } }, { by }),
            event({ action: 'member.add', target: { type: 'owner', id: ownerId }, changes: { email: [null, invite.email] } }, { by }),
          ];
          return { doc: { ...current, invites, members: [...current.members, { ownerId, addedAt: iso(now) }] }, events: made, result: { ownerId, accountId } };
        });
      },
    });
  };
}
