/**
 * The owner service: everything an owner or an operator can do, one part per kind of object.
 * Each part checks who may reach what (owner/access.ts), validates what the HTTP layer cannot
 * (uniqueness, state), writes through the owner store with an audit event (owner/audit.ts),
 * and, where tokens already issued must stop, resets them (auth/revocation.ts): every change
 * in those steps, through one pipeline (owner/pipeline.ts).
 */
import { createAccountService, type AccountService } from './accounts.js';
import type { OwnerDeps } from './deps.js';
import { createDeviceCookies } from './devices.js';
import { createDirectoryService, type DirectoryService } from './directory.js';
import { createEmailVerification, type EmailVerification } from './email-verification.js';
import { createMailNotices } from './mail-notices.js';
import { createPasswordResets, type PasswordResets } from './password-reset.js';
import { createFactorService, type FactorService } from './factors.js';
import { createKeyService, type KeyService } from './keys.js';
import { createLeakService, type LeakService } from './leaks.js';
import { createSessionListService, type SessionListService } from './session-list.js';
import { createSessionService, type SessionService } from './sessions.js';
import { createSettingsTokenService, type SettingsTokenService } from './settings-tokens.js';
import { createSsoService, type SsoService } from './sso.js';
import { createUsageService, type UsageService } from './usage.js';
import { createWebhookNotices } from './webhook-notices.js';
import { createWebhookService, type WebhookService } from './webhooks.js';

export interface OwnerServices {
  /** Owner sign-in, sessions, password changes (and the session check of http/owner/caller.ts). */
  sessions: SessionService;
  /** An owner's own sessions: list them, end one. */
  sessionList: SessionListService;
  /** Single sign-on through an OpenID provider: absent unless `owner.sso.issuer` is set. */
  sso: SsoService | undefined;
  /** Accounts, members, owners, invites, account resets, the audit log. */
  accounts: AccountService;
  /** API keys: create, change, roll, disable, delete, reset. */
  keys: KeyService;
  /** API settings tokens: create, list, revoke. */
  settingsTokens: SettingsTokenService;
  /** Roles and sign records. */
  directory: DirectoryService;
  /** Per-key usage from the gateway's own counters. */
  usage: UsageService;
  /** Password reset by mail (owner/password-reset.ts). */
  resets: PasswordResets;
  /** Email verification (owner/email-verification.ts). */
  verification: EmailVerification;
  /** The owner's second factors: TOTP, recovery codes, passkeys, an account's requirement. */
  factors: FactorService;
  /** Secret-scanning reports (owner/leaks.ts): the secrets they name ended, their owners told. */
  leaks: LeakService;
  /** Webhook endpoints, their delivery logs and test sends (owner/webhooks.ts); absent without OwnerDeps.webhooks. */
  webhooks: WebhookService | undefined;
}

export function createOwnerServices(given: OwnerDeps): OwnerServices {
  const { mail, config, clock } = given;
  const devices = given.devices ?? createDeviceCookies({ secret: config.owner.deviceCookieSecret, days: config.owner.deviceCookieDays, clock });
  const verification = createEmailVerification(given, mail);
  // Every change's audit events also decide its security notices (owner/mail-notices.ts, with
  // mail on) and its webhook events (owner/webhook-notices.ts).
  const listeners = [
    ...(given.listeners ?? []),
    ...(mail === undefined ? [] : [createMailNotices({ store: given.store, mail, log: given.log, verification })]),
    ...(given.webhooks === undefined ? [] : [webhookListener(given, given.webhooks)]),
  ];
  const deps: OwnerDeps = { ...given, devices, listeners };
  const sessions = createSessionService(deps);
  return {
    sessions,
    sso: createSsoService(deps, (owner, meta) => sessions.startVerified(owner, meta)),
    sessionList: createSessionListService(deps),
    accounts: createAccountService(deps),
    keys: createKeyService(deps),
    settingsTokens: createSettingsTokenService(deps),
    directory: createDirectoryService(deps),
    usage: createUsageService({ store: deps.store, clock: deps.clock, usage: deps.usage }),
    resets: createPasswordResets(deps, mail),
    verification,
    factors: createFactorService(deps, sessions.secondFactors),
    leaks: createLeakService(deps),
    webhooks: given.webhooks === undefined ? undefined : createWebhookService(deps, given.webhooks),
  };
}

function webhookListener({ store, clock, log }: OwnerDeps, { queue, maxQueued, sender, count }: NonNullable<OwnerDeps['webhooks']>) {
  return createWebhookNotices({
    endpointsOf: async (accountId) => (await store.readAccount(accountId))?.webhooks ?? [],
    queue, maxQueued, clock, log, wake: () => sender.wake(), ...(count !== undefined ? { count } : {}),
  });
}
