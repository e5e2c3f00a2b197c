/**
 * Who may reach which account. One answer, 404, for an account that does not exist, was
 * deleted, or is not the caller's: an owner cannot tell another account's ids from made-up
 * ones. Every object is then looked up within the account the caller reached, so another
 * account's key, token, invite, role or record is a 404 too.
 */
import { Forbidden, NotFound, ReadOnlyStore } from '../errors/errors.js';
import type { AccountDoc, OwnerStore } from '../state/owners/store.js';
import type { Caller } from './types.js';

export async function loadAccount(store: OwnerStore, caller: Caller, accountId: string): Promise<AccountDoc> {
  return requireReachable(caller, await store.readAccount(accountId));
}

/**
 * The account if the caller may reach it, else NotFound. Called again inside each store change
 * (on the account as the change reads it): a deletion, or the caller's removal from the
 * members, may have come between loadAccount and the write.
 */
export function requireReachable(caller: Caller, account: AccountDoc | undefined): AccountDoc {
  if (account === undefined || account.deletedAt !== undefined) throw new NotFound('No such account.');
  if (caller.kind === 'owner' && !account.members.some((m) => m.ownerId === caller.ownerId)) throw new NotFound('No such account.');
  return account;
}

export function requireOperator(caller: Caller): void {
  if (caller.kind !== 'operator') throw new Forbidden('Only an operator (admin token) may do this.');
}

/** Refuses a write up front when the store takes none, before any work or hashing. */
export function requireWritable(store: OwnerStore, { directory = false } = {}): void {
  if (store.readOnly !== undefined) throw new ReadOnlyStore(store.readOnly);
  if (directory && store.directoryReadOnly !== undefined) throw new ReadOnlyStore(store.directoryReadOnly);
}
