/**
 * Second factors: what sign-in asks of an owner who has one (owner/totp.ts, owner/passkeys.ts),
 * the requirement that owners have one (an account's `requireSecondFactor`, the deployment's
 * `owner.requireSecondFactor`), and the owner's own operations on theirs.
 *
 * Every code or passkey presented is an attempt counted by the owner sign-in limits
 * (`limits.ownerSignIn`) before it is checked, as a password is: from a browser with the
 * owner's device cookie (owner/devices.ts) against that device, else per address and per email,
 * so guessing is bounded and a stranger's wrong codes never lock the owner's own browsers out.
 * The device's code attempts have a subject of their own (`<device>|2f`): the password's
 * success, which ends the device's run of failures, must not end the codes' run too. A signed-in
 * owner's code checks (confirm, turn off, new recovery codes) count against the owner's own
 * subject, which no stranger can reach without their session.
 *
 * Changes are audited in each account the owner manages, as a password change is:
 * owner.totp_enable, owner.totp_disable, owner.recovery_codes_regenerate, owner.passkey_add,
 * owner.passkey_remove (the mail part sends security notices for them).
 */
import { GatewayError, InvalidRequest, SecondFactorRequired } from '../errors/errors.js';
import type { RateLimits } from '../limits/rate-limits.js';
import { MemoryCeremonyStore } from '../state/ceremonies/memory.js';
import type { OwnerRecord } from '../state/owners/records.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { OwnerDeps } from './deps.js';
import { createPasskeyCeremonies, type PasskeyAnswer, type PasskeyCeremonies, type RelyingParty } from './passkeys.js';
import type { RequestMeta } from './types.js';
import { createSecretBox, type SecretBox } from './secret-box.js';
import { useTotpOrRecoveryCode } from './totp.js';

/** What a sign-in presents besides the password: `otp` (a TOTP code or a recovery code) or a passkey's answer. */
export interface PresentedFactors {
  otp?: string | undefined;
  passkey?: (PasskeyAnswer & RelyingParty) | undefined;
}

export function hasSecondFactor(owner: OwnerRecord): boolean {
  return owner.totp !== undefined || (owner.passkeys ?? []).length > 0;
}

/** The name TOTP apps and passkey prompts show for the deployment: its public host. */
export function issuerName(publicOrigin: string | undefined): string {
  return publicOrigin === undefined ? 'auth-gateway' : new URL(publicOrigin).host;
}

/**
 * Runs one counted check: the limits first (TooManyRequests while locked out), then `check`; a
 * wrong factor (SecondFactorRequired, or the InvalidRequest a signed-in check answers) keeps its
 * failure unit, a store failure gives it back.
 */
export async function countedFactor<T>(limits: RateLimits, subject: { email: string; ip: string; device: string | undefined }, check: () => Promise<T>): Promise<T> {
  const attempt = await limits.ownerSignIn(subject.email.toLowerCase(), subject.ip, subject.device);
  let result: T;
  try {
    result = await check();
  } catch (err) {
    // A wrong factor answers 401 (mfa_required, invalid_credentials) or, signed in, 400 on the field.
    const wrong = err instanceof GatewayError && (err.status === 401 || err.code === 'invalid_request');
    if (!wrong) await attempt.undecided();
    throw err;
  }
  await attempt.succeeded();
  return result;
}

export interface SecondFactorGate {
  ceremonies: PasskeyCeremonies;
  /** Seals and opens TOTP secrets at rest (`owner.secondFactorKey`). */
  box: SecretBox;
  /**
   * After the password: nothing for an owner without a second factor; else a counted check of
   * the factor presented, SecondFactorRequired (401 mfa_required) when none is or it is wrong.
   * `device`: the id of the request's valid device cookie for this owner's email.
   */
  check(owner: OwnerRecord, presented: PresentedFactors, meta: RequestMeta, device: string | undefined): Promise<void>;
  /** A second factor is required of the owner: by the deployment, or by an account they manage. */
  isRequired(owner: OwnerRecord): Promise<boolean>;
  /** The owner must use a second factor and has none. */
  mustEnroll(owner: OwnerRecord): Promise<boolean>;
}

export function createSecondFactorGate(deps: Pick<OwnerDeps, 'store' | 'limits' | 'clock' | 'config' | 'ceremonies'>): SecondFactorGate {
  const { store, limits, clock, config } = deps;
  const ceremonies = createPasskeyCeremonies({
    store,
    ceremonies: deps.ceremonies ?? new MemoryCeremonyStore({ clock }),
    clock,
    rpName: issuerName(config.owner.publicOrigin),
  });
  const box = createSecretBox(config.owner.secondFactorKey);
  return {
    ceremonies,
    box,
    async check(owner, { otp, passkey }, meta, device) {
      if (!hasSecondFactor(owner)) return;
      if ((otp === undefined || otp === '') && passkey === undefined) throw new SecondFactorRequired();
      await countedFactor(limits, { email: owner.email, ip: meta.ip, device: device === undefined ? undefined : `${device}|2f` }, async () => {
        if (passkey !== undefined) {
          if (!(await ceremonies.verifySignIn(owner, passkey, passkey))) throw new SecondFactorRequired();
          return;
        }
        await useTotpOrRecoveryCode(store, box, owner, otp ?? '', clock.now());
      });
    },
    isRequired: (owner) => isRequired(store, config.owner.requireSecondFactor, owner),
    // Only an owner without one pays for the accounts' reads (resume asks at every call).
    mustEnroll: async (owner) => !hasSecondFactor(owner) && await isRequired(store, config.owner.requireSecondFactor, owner),
  };
}

async function isRequired(store: OwnerStore, deploymentRequires: boolean, owner: OwnerRecord): Promise<boolean> {
  if (deploymentRequires) return true;
  for (const id of await store.accountsOf(owner.id)) {
    if ((await store.readAccount(id))?.requireSecondFactor === true) return true;
  }
  return false;
}

/** A signed-in owner's code (confirm, turn off, new recovery codes): a wrong one is a 400 on the field, not a 401 that reads as signed out. */
export function wrongCode(): InvalidRequest {
  return new InvalidRequest('The code is not valid: enter the current code from the authenticator app, or an unused recovery code.', { field: 'code' });
}
