/**
 * Password reset by mail. Asking (`requestPasswordReset`) is counted per address (429 past
 * `limits.ownerMail.perAddress`) and per email (past `perEmail` nothing is sent), then answered
 * at once, whatever the email: the lookup, the token and the mail happen after the answer, so an
 * unknown email gets the same answer after the same work, and its timing tells nothing. Nothing
 * here counts against sign-in: no one locks an owner out by asking for their reset; and a
 * browser with the owner's device cookie (owner/devices.ts) is not held to the per-email share.
 *
 * The mail holds a one-time link (owner/one-time-tokens.ts, `gwrst_`, 30 minutes, a new one
 * replacing the last) whose token is in the fragment. Completing it (`completePasswordReset`)
 * sets the new password (argon2, owner/passwords.ts), proves the mailbox (the email counts as
 * verified), ends every session of the owner, and audits `owner.password_reset` in each account
 * the owner manages, which mails the owner a notice (owner/mail-notices.ts).
 */
import { InvalidRequest, NotFound } from '../errors/errors.js';
import type { OwnerRecord } from '../state/owners/records.js';
import { requireWritable } from './access.js';
import type { OwnerDeps } from './deps.js';
import type { Mail } from './mail.js';
import { passwordResetMail } from './mail-templates.js';
import { makeOneTimeToken, matchesKept, ownerOfToken } from './one-time-tokens.js';
import { hashPassword, PASSWORD_MAX, PASSWORD_MIN } from './passwords.js';
import { createChangePipeline, type AuditTrail } from './pipeline.js';
import type { RequestMeta } from './types.js';

export const RESET_TOKEN_PREFIX = 'gwrst_';
export const RESET_MINUTES = 30;

export interface PasswordResets {
  /** Throws TooManyRequests past the per-address limit; otherwise resolves the same way for every email. */
  requestPasswordReset(email: string, meta: RequestMeta): Promise<void>;
  /** Throws NotFound for a token that is malformed, unknown, used, replaced or past its end. */
  completePasswordReset(input: { token: string; password: string }, meta: RequestMeta): Promise<void>;
}

export function createPasswordResets(deps: OwnerDeps, mail: Mail | undefined): PasswordResets {
  const { store, sessions, clock, log, limits } = deps;
  const change = createChangePipeline(deps);
  const iso = (ms: number): string => new Date(ms).toISOString();
  const gone = (): NotFound => new NotFound('No such reset link: it may have been used, replaced or have expired.');

  /** After the answer: the same answer went out whether anything is sent. */
  async function issue(email: string): Promise<void> {
    const found = await store.findOwnerByEmail(email);
    if (found === undefined || found.disabled || mail === undefined || store.readOnly !== undefined) return;
    const { token, digest } = makeOneTimeToken(RESET_TOKEN_PREFIX, found.id);
    const expiresAt = iso(clock.now() + RESET_MINUTES * 60_000);
    const to = await store.updateOwner(found.id, (owner) => (owner.disabled ? { result: undefined } : { owner: { ...owner, passwordReset: { digest, expiresAt } }, result: owner.email }));
    if (to === undefined) return;
    await mail.queue([{ to, kind: 'password_reset', ownerId: found.id, ...passwordResetMail(mail, { token, minutes: RESET_MINUTES }) }]);
  }

  return {
    async requestPasswordReset(email, meta) {
      const wanted = email.toLowerCase();
      // A browser the owner signed in from (its device cookie for this email) is not held to the
      // email's share, which strangers may have spent: no one keeps an owner from their own reset.
      const fromOwnDevice = deps.devices?.deviceOf(meta.deviceCookie, wanted) !== undefined;
      if (!(await limits.ownerMail(fromOwnDevice ? undefined : wanted, meta.ip))) return;
      void issue(wanted).catch((err: unknown) => log.warn({ err }, 'password reset could not be issued'));
    },

    async completePasswordReset({ token, password }, meta) {
      await limits.ownerMail(undefined, meta.ip);
      // A store that takes no writes refuses before the token is even looked at.
      requireWritable(store);
      if (password.length < PASSWORD_MIN || password.length > PASSWORD_MAX) {
        throw new InvalidRequest(`The new password must have ${PASSWORD_MIN} to ${PASSWORD_MAX} characters.`, { field: 'password' });
      }
      const ownerId = ownerOfToken(RESET_TOKEN_PREFIX, token);
      if (ownerId === undefined) throw gone();
      const valid = (owner: OwnerRecord | undefined, now: number): owner is OwnerRecord => owner !== undefined && !owner.disabled && matchesKept(token, owner.passwordReset, now);
      await change(undefined, {
        async load() {
          const owner = await store.findOwner(ownerId);
          if (!valid(owner, clock.now())) throw gone();
          return owner;
        },
        apply: () => hashPassword(password),
        async persist({ prepared: passwordHash, now, event }) {
          const before = await store.updateOwner(ownerId, (current) => {
            // One use: whoever commits first has it.
            if (!valid(current, now)) throw gone();
            const { passwordReset: _used, ...rest } = current;
            const at = iso(now);
            return { owner: { ...rest, passwordHash, mustChangePassword: false, passwordChangedAt: at, emailVerifiedAt: current.emailVerifiedAt ?? at }, result: current };
          });
          // Whoever learnt the old password is out: every session ends, on every instance.
          await sessions.deleteOwnerSessions(ownerId);
          const by = { caller: { kind: 'owner' as const, ownerId, email: before.email }, meta };
          const events = [event({ action: 'owner.password_reset', target: { type: 'owner', id: ownerId }, changes: { mustChangePassword: [before.mustChangePassword, false] } }, { by })];
          const audited: AuditTrail[] = [];
          for (const accountId of await store.accountsOf(ownerId)) {
            await store.appendAudit(accountId, events);
            audited.push({ accountId, events });
          }
          return { audited, result: undefined };
        },
      });
    },
  };
}
