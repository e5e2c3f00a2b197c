/**
 * The owner service: everything an owner or an operator can do, one part per kind of object.
 * Each part checks who may reach what (owner/access.ts), validates what the HTTP layer cannot
 * (uniqueness, state), writes through the owner store with an audit event (owner/audit.ts),
 * and, where tokens already issued must stop, resets them (auth/revocation.ts): every change
 * in those steps, through one pipeline (owner/pipeline.ts).
 */
import { createAccountService, type AccountService } from './accounts.js';
import type { OwnerDeps } from './deps.js';
import { createDirectoryService, type DirectoryService } from './directory.js';
import { createFactorService, type FactorService } from './factors.js';
import { createKeyService, type KeyService } from './keys.js';
import { createSessionService, type SessionService } from './sessions.js';
import { createSettingsTokenService, type SettingsTokenService } from './settings-tokens.js';
import { createUsageService, type UsageService } from './usage.js';

export interface OwnerServices {
  /** Owner sign-in, sessions, password changes (and the session check of http/owner/caller.ts). */
  sessions: SessionService;
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
  /** The owner's second factors: TOTP, recovery codes, passkeys, an account's requirement. */
  factors: FactorService;
}

export function createOwnerServices(deps: OwnerDeps): OwnerServices {
  const sessions = createSessionService(deps);
  return {
    sessions,
    accounts: createAccountService(deps),
    keys: createKeyService(deps),
    settingsTokens: createSettingsTokenService(deps),
    directory: createDirectoryService(deps),
    usage: createUsageService({ store: deps.store, clock: deps.clock, usage: deps.usage }),
    factors: createFactorService(deps, sessions.secondFactors),
  };
}
