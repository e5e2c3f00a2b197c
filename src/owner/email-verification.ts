/**
 * Email verification: an owner whose email nobody verified gets a mail with a one-time link
 * (owner/one-time-tokens.ts, `gwver_`, 72 hours); following it sets `emailVerifiedAt` and audits
 * `owner.email_verify` in each account the owner manages. The pending token names the email it
 * was sent to: once the email changes, it verifies nothing. Sent when an owner joins an account
 * unverified (owner/mail-notices.ts); with mail off, nothing is sent and emails stay unverified.
 */
import { NotFound } from '../errors/errors.js';
import type { OwnerRecord } from '../state/owners/records.js';
import { requireWritable } from './access.js';
import type { OwnerDeps } from './deps.js';
import type { Mail } from './mail.js';
import { verifyEmailMail } from './mail-templates.js';
import { makeOneTimeToken, matchesKept, ownerOfToken } from './one-time-tokens.js';
import { createChangePipeline, type AuditTrail } from './pipeline.js';
import type { RequestMeta } from './types.js';

export const VERIFY_TOKEN_PREFIX = 'gwver_';
const VERIFY_HOURS = 72;

export interface EmailVerification {
  /** Mails a new verification link unless the owner's email is verified (a former link stops working). Never throws. */
  sendIfUnverified(ownerId: string): Promise<void>;
  /** Throws NotFound for a token that is malformed, unknown, used, replaced, for another email, or past its end. */
  verifyEmail(input: { token: string }, meta: RequestMeta): Promise<{ emailVerifiedAt: string }>;
}

export function createEmailVerification(deps: OwnerDeps, mail: Mail | undefined): EmailVerification {
  const { store, clock, log, limits } = deps;
  const change = createChangePipeline(deps);
  const iso = (ms: number): string => new Date(ms).toISOString();
  const gone = (): NotFound => new NotFound('No such verification link: it may have been used, replaced or have expired.');

  return {
    async sendIfUnverified(ownerId) {
      if (mail === undefined || store.readOnly !== undefined) return;
      try {
        const { token, digest } = makeOneTimeToken(VERIFY_TOKEN_PREFIX, ownerId);
        const expiresAt = iso(clock.now() + VERIFY_HOURS * 3_600_000);
        const to = await store.updateOwner(ownerId, (owner) => (owner.emailVerifiedAt !== undefined || owner.disabled
          ? { result: undefined }
          : { owner: { ...owner, emailVerification: { digest, expiresAt, email: owner.email } }, result: owner.email }));
        if (to === undefined) return;
        await mail.queue([{ to, kind: 'verify_email', ownerId, ...verifyEmailMail(mail, { token, hours: VERIFY_HOURS }) }]);
      } catch (err) {
        log.warn({ err, ownerId }, 'email verification could not be sent');
      }
    },

    async verifyEmail({ token }, meta) {
      await limits.ownerMail(undefined, meta.ip);
      // A store that takes no writes refuses before the token is even looked at.
      requireWritable(store);
      const ownerId = ownerOfToken(VERIFY_TOKEN_PREFIX, token);
      if (ownerId === undefined) throw gone();
      const valid = (owner: OwnerRecord | undefined, now: number): owner is OwnerRecord =>
        owner !== undefined && !owner.disabled && owner.emailVerification?.email === owner.email && matchesKept(token, owner.emailVerification, now);
      return change(undefined, {
        async load() {
          const owner = await store.findOwner(ownerId);
          if (!valid(owner, clock.now())) throw gone();
          return owner;
        },
        async persist({ now, event }) {
          const owner = await store.updateOwner(ownerId, (current) => {
            // One use: whoever commits first has it.
            if (!valid(current, now)) throw gone();
            const { emailVerification: _used, ...rest } = current;
            return { owner: { ...rest, emailVerifiedAt: iso(now) }, result: current };
          });
          const events = [event({ action: 'owner.email_verify', target: { type: 'owner', id: ownerId }, changes: { email: [null, owner.email] } }, { by: { caller: { kind: 'owner', ownerId, email: owner.email }, meta } })];
          const audited: AuditTrail[] = [];
          for (const accountId of await store.accountsOf(ownerId)) {
            await store.appendAudit(accountId, events);
            audited.push({ accountId, events });
          }
          return { audited, result: { emailVerifiedAt: iso(now) } };
        },
      });
    },
  };
}
