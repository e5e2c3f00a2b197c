/**
 * What the owner API answers about accounts, owners, members and invites: stored records with
 * everything secret (password hashes, invite digests) and internal left out, and times as ISO
 * strings. Optional fields are omitted, never null.
 */
import type { AccountDoc } from '../state/owners/store.js';
import type { InviteRecord, MemberRecord, OwnerRecord } from '../state/owners/records.js';

export interface AccountView {
  id: string;
  /** "" for an account without one (hand-written in the data file). */
  name: string;
  enabled: boolean;
  /** Absent for hand-written accounts. */
  createdAt?: string;
}

export interface OwnerView {
  id: string;
  email: string;
  mustChangePassword: boolean;
  createdAt: string;
  /** When the owner followed a verification link (owner/email-verification.ts); absent: the email is not verified. */
  emailVerifiedAt?: string;
}

export interface MemberView {
  ownerId: string;
  email: string;
  addedAt: string;
}

export type InviteStatus = 'pending' | 'used' | 'revoked' | 'expired';

export interface InviteView {
  id: string;
  email: string;
  createdAt: string;
  expiresAt: string;
  status: InviteStatus;
}

export function accountView(doc: AccountDoc): AccountView {
  return { id: doc.id, name: doc.name ?? '', enabled: doc.enabled, ...(doc.createdAt !== undefined ? { createdAt: doc.createdAt } : {}) };
}

export function ownerView(owner: OwnerRecord): OwnerView {
  return { id: owner.id, email: owner.email, mustChangePassword: owner.mustChangePassword, createdAt: owner.createdAt, ...(owner.emailVerifiedAt !== undefined ? { emailVerifiedAt: owner.emailVerifiedAt } : {}) };
}

export function memberView(member: MemberRecord, owner: Pick<OwnerRecord, 'email'> | undefined): MemberView {
  return { ownerId: member.ownerId, email: owner?.email ?? '', addedAt: member.addedAt };
}

/** Used and revoked are for good; a pending invite past its end is expired. */
export function inviteStatus(invite: InviteRecord, now: number): InviteStatus {
  if (invite.usedAt !== undefined) return 'used';
  if (invite.revokedAt !== undefined) return 'revoked';
  return Date.parse(invite.expiresAt) <= now ? 'expired' : 'pending';
}

export function inviteView(invite: InviteRecord, now: number): InviteView {
  return { id: invite.id, email: invite.email, createdAt: invite.createdAt, expiresAt: invite.expiresAt, status: inviteStatus(invite, now) };
}
