/** What every part of the owner service is built from (services.ts picks the implementations). */
import type { DemoSecretGuard } from '../auth/demo-secrets.js';
import type { Revocations } from '../auth/revocation.js';
import type { TokenRevocation } from '../auth/token-revocation.js';
import type { Config } from '../config/schema.js';
import type { RateLimits } from '../limits/rate-limits.js';
import type { CeremonyStore } from '../state/ceremonies/store.js';
import type { KeyUseStore } from '../state/key-use/store.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { SessionStore } from '../state/sessions/store.js';
import type { UsageCounters } from '../state/usage/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import type { DeviceCookies } from './devices.js';
import type { Mail } from './mail.js';
import type { ChangeListener } from './pipeline.js';
import type { WebhookParts } from './webhook-notices.js';

export interface OwnerDeps {
  store: OwnerStore;
  sessions: SessionStore;
  /** Token resets (auth/revocation.ts): a disabled or deleted key, a revoked settings token, an account reset. */
  revocations: Revocations;
  clock: Clock;
  /** Owner sign-in and every other password check count as sign-in attempts (limits/rate-limits.ts). */
  limits: RateLimits;
  log: Logger;
  config: Pick<Config, 'owner' | 'tokens'>;
  /** The per-key usage counts (state/usage/store.ts); absent while counting is off (`usage.enabled`). */
  usage?: UsageCounters;
  /** When each key last signed in (state/key-use/store.ts); absent: the key views show none. */
  keyUse?: KeyUseStore;
  /** Refuses the demo owners' published passwords at sign-in on a production gateway (auth/demo-secrets.ts). */
  demoSecrets?: DemoSecretGuard;
  /** WebAuthn ceremonies in flight (owner/passkeys.ts); absent: this process's memory. */
  ceremonies?: CeremonyStore;
  /** Hear every owner change once it is written and logged (owner/pipeline.ts, the notify step); none by default. */
  listeners?: readonly ChangeListener[];
  /** Mail to owners (owner/mail.ts); absent while mail is off (`mail.smtpUrl` unset): nothing is sent. */
  mail?: Mail;
  /**
   * The device cookies (owner/devices.ts), made once by createOwnerServices so that every part
   * knows the cookies sign-in sets (without `owner.deviceCookieSecret` their key is random).
   */
  devices?: DeviceCookies;
  /** Ends a refresh token's family (auth/token-revocation.ts): a leak report of one (owner/leaks.ts); absent: such reports are false positives. */
  tokenRevocation?: Pick<TokenRevocation, 'revoke'>;
  /** Webhooks (owner/webhooks.ts): the address rules, the queue, the sender and the delivery logs; absent: no webhook operation works (tests of other parts). */
  webhooks?: WebhookParts;
}
