/**
 * Schemas the owner API's operations share: what they take (emails, passwords, ids, paging) and
 * the views they answer. Answers are strict objects too: the OpenAPI document is made from them
 * and real answers are checked against it, so a field answered but not described is a failure.
 */
import { z } from 'zod';
import { ID_PATTERN, ID_SPELLING, isSafeName, isSafeText, SAFE_NAME_SPELLING, SAFE_TEXT_SPELLING } from '../../../domain/formats.js';
import { PASSWORD_MAX, PASSWORD_MIN } from '../../../owner/passwords.js';
import type { Actor, Caller, RequestMeta } from '../../../owner/types.js';
import { auditEventSchema, EMAIL_MAX, NAME_MAX } from '../../../state/owners/records.js';

export const idField = z.string().regex(ID_PATTERN, `expected ${ID_SPELLING}`);
export const emailField = z.email().max(EMAIL_MAX).refine(isSafeName, `expected ${SAFE_NAME_SPELLING}`);
/**
 * A password being set: NIST SP 800-63B rev 4 lengths, no composition rules; any Unicode but
 * what safeText refuses (a lone surrogate would be hashed as U+FFFD, the same as another).
 */
export const newPasswordField = z.string().min(PASSWORD_MIN).max(PASSWORD_MAX).refine(isSafeText, `expected ${SAFE_TEXT_SPELLING}`);
/** A password being checked: any length up to the maximum (a short one simply does not match). */
export const presentedPasswordField = z.string().min(1).max(PASSWORD_MAX).refine(isSafeText, `expected ${SAFE_TEXT_SPELLING}`);
/**
 * Every text field of the owner API passes one of these two, so what the stores keep is text
 * every reader can decode (src/domain/formats.ts says what each refuses and why): a refusal is
 * a 400 naming the field, like any other.
 */
export function safeText(max: number) {
  return z.string().max(max).refine(isSafeText, `expected ${SAFE_TEXT_SPELLING}`);
}

/** One line of printable text, 1 (or `min`) to `max` characters: a name. */
export function safeName(max: number, min = 1) {
  return z.string().min(min).max(max).refine(isSafeName, `expected ${SAFE_NAME_SPELLING}`);
}

export const nameField = safeName(NAME_MAX);

export const accountParams = z.strictObject({ accountId: idField });

/**
 * The caller of a `caller` or `session` operation: http/owner/register.ts sets it before any
 * handler runs, so its absence is a bug of the router's, not the client's.
 */
export function callerOf(caller: Caller | undefined): Caller {
  if (caller === undefined) throw new TypeError('a caller operation ran without a caller');
  return caller;
}

/** The actor of a change: who, and where the request came from. */
export function actorOf({ caller, meta }: { caller: Caller | undefined; meta: RequestMeta }): Actor {
  return { caller: callerOf(caller), meta };
}

/** A listing's `limit`: 1 to 100 in plain decimal digits (not `1e2` or `0x10`, as Number() would read). */
export const limitField = z.string().regex(/^[0-9]{1,3}$/, 'expected a whole number from 1 to 100').transform(Number).pipe(z.number().int().min(1).max(100));

/** `limit` 1–100 (50 if absent) and the `nextCursor` of the page before. */
export const pageQuery = z.strictObject({
  limit: limitField.default(50),
  cursor: z.string().min(1).max(512).refine(isSafeName, `expected ${SAFE_NAME_SPELLING}`).optional(),
});

export function pageOf<T extends z.ZodType>(item: T) {
  return z.strictObject({ items: z.array(item), nextCursor: z.string().optional() });
}

export const accountSchema = z.strictObject({
  id: z.string(),
  /** "" when the account has none. */
  name: z.string(),
  enabled: z.boolean(),
  /** Absent for accounts written by hand in the data file. */
  createdAt: z.iso.datetime().optional(),
});

export const ownerSchema = z.strictObject({
  id: z.string(),
  email: z.string(),
  /** Set by an operator's initial password: only the session routes and the password change work. */
  mustChangePassword: z.boolean(),
  createdAt: z.iso.datetime(),
  /** When the owner verified their email by mail; absent: not verified. */
  emailVerifiedAt: z.iso.datetime().optional(),
});

export const memberSchema = z.strictObject({
  ownerId: z.string(),
  email: z.string(),
  addedAt: z.iso.datetime(),
});

export const inviteSchema = z.strictObject({
  id: z.string(),
  email: z.string(),
  createdAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
  status: z.enum(['pending', 'used', 'revoked', 'expired']),
});

export const sessionSchema = z.strictObject({
  owner: ownerSchema,
  accounts: z.array(accountSchema),
  /** To send as X-CSRF-Token with every change made with this session. */
  csrfToken: z.string(),
  idleExpiresAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
});

export { auditEventSchema };

/** An audit event as stored, its owner actor also named by email (owner/audit.ts). */
export const auditEventView = auditEventSchema.extend({
  actor: auditEventSchema.shape.actor.extend({
    email: z.string().optional().describe('The owner\'s email, for an owner who still exists.'),
  }),
});
