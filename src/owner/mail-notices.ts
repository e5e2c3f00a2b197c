/**
 * Security notices by mail, driven by the audit trail: every owner change that writes an event
 * with one of NOTICE_ACTIONS reaches `createMailNotices`' listener (owner/pipeline.ts, the notify
 * step), which mails the people concerned: an account's owners for a change to the account (a
 * key made or reset, an API settings token made), the owner themselves for a change to their
 * sign-in (a password changed or reset, a second factor added or removed, a session ended by
 * someone else or pushed out). Another part of the owner service sends a notice just by auditing
 * with one of these actions; nothing here needs to know it.
 *
 * The same listener sends the email verification to an owner who joined an account with an
 * email nobody has verified (`member.add`: an owner an operator made, or an invite accepted), or
 * whose email changed (`owner.email_change`).
 * A sign-in from a device the owner never signed in from before is no change: sessions.ts tells
 * `newDeviceNotice` directly.
 */
import type { AuditEvent } from '../state/owners/records.js';
import type { AccountDoc, OwnerStore } from '../state/owners/store.js';
import type { Logger } from '../telemetry/log.js';
import type { EmailVerification } from './email-verification.js';
import type { Mail, MailDraft } from './mail.js';
import { securityNoticeMail } from './mail-templates.js';
import type { ChangeListener } from './pipeline.js';
import type { RequestMeta } from './types.js';

/** Audit actions that mail a notice, and what the mail says happened. */
export const NOTICE_ACTIONS: Readonly<Record<string, { what: string; to: 'account' | 'owner'; advice?: string }>> = {
  'key.create': { what: 'An API key was created', to: 'account' },
  'key.reset': { what: 'An API key\'s tokens were reset', to: 'account' },
  'settings_token.create': { what: 'An API settings token was created', to: 'account' },
  // An endpoint receives the account's events from now on: an owner should know where they go.
  'webhook.create': { what: 'A webhook endpoint was added: the account\'s owner events are sent to it', to: 'account' },
  'key.leak_reported': {
    what: 'A secret scanner reported a secret of one of your API keys (an API secret or a refresh token) found in public; it was revoked', to: 'account',
    advice: 'The audit log names the key and where the secret was found. A leaked API secret signs in no more: roll the key\'s secret, give the new one to its clients, and remove the old one from where it was published.',
  },
  'settings_token.leak_reported': {
    what: 'A secret scanner reported one of your API settings tokens found in public; it was revoked', to: 'account',
    advice: 'The audit log names the token and where it was found. Make a new token if it is still needed, and remove the old one from where it was published.',
  },
  'owner.password_change': { what: 'Your password was changed', to: 'owner' },
  'owner.password_reset': { what: 'Your password was reset by mail', to: 'owner' },
  'owner.totp_enable': { what: 'An authenticator app was set up as your second factor', to: 'owner' },
  'owner.totp_disable': { what: 'Your authenticator app was removed as a second factor', to: 'owner' },
  'owner.recovery_codes_regenerate': { what: 'New recovery codes were made for your account (the old ones no longer work)', to: 'owner' },
  'owner.passkey_add': { what: 'A passkey was added to your account', to: 'owner' },
  'owner.passkey_remove': { what: 'A passkey was removed from your account', to: 'owner' },
  'owner.session_end': { what: 'One of your sessions was ended', to: 'owner' },
  'owner.session_evict': { what: 'Your oldest session was ended because a new sign-in went past the sessions an owner may have', to: 'owner' },
};

/**
 * Audit actions after which an owner's email may be unverified: joining an account, and an email
 * change (no operation changes an owner's email yet; the one that does audits `owner.email_change`
 * and drops `emailVerifiedAt` in the same write).
 */
const VERIFY_ACTIONS = new Set(['member.add', 'owner.email_change']);

export interface MailNoticeDeps {
  store: OwnerStore;
  mail: Mail;
  log: Logger;
  verification: EmailVerification;
}

export function createMailNotices({ store, mail, verification }: MailNoticeDeps): ChangeListener {
  return async ({ audited }) => {
    const drafts: MailDraft[] = [];
    // One event may be written to several accounts (an owner's own change, in each account they
    // manage): one mail per event and person.
    const done = new Set<string>();
    for (const { accountId, events } of audited) {
      // Read once per account, and only for a change that mails its owners.
      let account: Promise<AccountDoc | undefined> | undefined;
      const accountOnce = () => (account ??= store.readAccount(accountId));
      for (const event of events) {
        if (VERIFY_ACTIONS.has(event.action) && event.target.type === 'owner') {
          await verification.sendIfUnverified(event.target.id);
          continue;
        }
        const notice = NOTICE_ACTIONS[event.action];
        if (notice === undefined) continue;
        const doc = notice.to === 'account' ? await accountOnce() : undefined;
        const ownerIds = notice.to === 'account' ? (doc?.members ?? []).map((m) => m.ownerId) : [subjectOf(event)].filter((id) => id !== undefined);
        for (const ownerId of ownerIds.filter((id) => !done.has(`${event.id} ${id}`))) {
          done.add(`${event.id} ${ownerId}`);
          const owner = await store.findOwner(ownerId);
          if (owner === undefined || owner.disabled) continue;
          const accountName = notice.to === 'account' ? doc?.name || accountId : undefined;
          drafts.push({
            to: owner.email, kind: 'notice', accountId,
            ...securityNoticeMail(mail, { what: notice.what, ...(notice.advice !== undefined ? { advice: notice.advice } : {}), at: event.at, ...(event.ip !== undefined ? { ip: event.ip } : {}), ...(accountName !== undefined ? { accountName } : {}) }),
          });
        }
      }
    }
    await mail.queue(drafts);
  };
}

/** The owner an owner-level event is about: its target, else whoever made it. */
function subjectOf(event: AuditEvent): string | undefined {
  return event.target.type === 'owner' ? event.target.id : event.actor.type === 'owner' ? event.actor.id : undefined;
}

/** A sign-in from a browser without the owner's device cookie (owner/devices.ts): a notice to the owner. */
export async function newDeviceNotice(mail: Mail | undefined, owner: { id: string; email: string }, meta: RequestMeta, now: number): Promise<void> {
  if (mail === undefined) return;
  await mail.queue([{
    to: owner.email, kind: 'notice', ownerId: owner.id,
    ...securityNoticeMail(mail, { what: 'You signed in from a browser or device not seen before', at: new Date(now).toISOString(), ip: meta.ip }),
  }]);
}
