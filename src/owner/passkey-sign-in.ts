/**
 * Signing in with a passkey alone (no password): the answer's user handle names the owner, the
 * attempt is counted by the owner sign-in limits against that owner's email (or the device
 * cookie's subject) before the signature is checked, and a verified answer starts a session as
 * a password sign-in does. An unknown or disabled owner, a wrong signature, and an unknown or
 * used ceremony get one answer (InvalidOwnerCredentials).
 */
import { InvalidOwnerCredentials } from '../errors/errors.js';
import type { OwnerRecord } from '../state/owners/records.js';
import type { OwnerDeps } from './deps.js';
import { newDeviceNotice } from './mail-notices.js';
import type { PasskeyAnswer, RelyingParty } from './passkeys.js';
import { countedFactor, type SecondFactorGate } from './second-factor.js';
import type { RequestMeta } from './types.js';

/** What the session service lends: its device cookies and the start of a session. */
export interface SessionStarter<N> {
  devices: { deviceOf(cookie: string | undefined, email: string): string | undefined; issue(email: string): string; readonly maxAgeSeconds: number };
  /** A sign-in's session (`capped`: the owner's oldest past owner.maxSessionsPerOwner end). */
  start(owner: OwnerRecord, meta: RequestMeta, options: { capped: boolean }): Promise<{ created: N }>;
}

/**
 * Starts a sign-in ceremony: a challenge kept server-side (owner/passkeys.ts). Public, so each
 * start is counted per address by the owner sign-in limits (`perAddress`: a flood of starts is
 * refused, and the ceremony store is bounded besides); it is no guess, so its failure units
 * are given back at once, under a name of the address's own that no email can share.
 */
export async function startPasskeySignIn({ limits }: Pick<OwnerDeps, 'limits'>, gate: SecondFactorGate, rp: RelyingParty, meta: RequestMeta) {
  const attempt = await limits.ownerSignIn(`passkey-ceremony:${meta.ip}`, meta.ip, undefined);
  await attempt.undecided();
  return gate.ceremonies.startSignIn(rp);
}

export function createPasskeySignIn<N extends object>({ limits, demoSecrets, mail, clock }: Pick<OwnerDeps, 'limits' | 'demoSecrets' | 'mail' | 'clock'>, { devices, start }: SessionStarter<N>, gate: SecondFactorGate) {
  return async function signInWithPasskey(answer: PasskeyAnswer & RelyingParty, meta: RequestMeta): Promise<N & { device: { cookie: string; maxAgeSeconds: number } }> {
    const claimed = await gate.ceremonies.claimedOwner(answer);
    // An unknown user handle is counted as an unknown email is: under a name of its own.
    const email = claimed?.email ?? `passkey:${answer.response.response.userHandle ?? ''}`.slice(0, 300);
    const device = claimed === undefined ? undefined : devices.deviceOf(meta.deviceCookie, claimed.email);
    const owner = await countedFactor(limits, { email, ip: meta.ip, device: device === undefined ? undefined : `${device}|2f` }, async () => {
      if (claimed === undefined || claimed.disabled || !(await gate.ceremonies.verifySignIn(claimed, answer, answer))) throw new InvalidOwnerCredentials();
      return claimed;
    });
    if (demoSecrets?.refusesOwner(owner) === true) throw new InvalidOwnerCredentials();
    const { created } = await start(owner, meta, { capped: true });
    // A browser without this owner's device cookie: the owner hears of it by mail, as after a password.
    if (device === undefined) await newDeviceNotice(mail, owner, meta, clock.now());
    return { ...created, device: { cookie: devices.issue(owner.email), maxAgeSeconds: devices.maxAgeSeconds } };
  };
}
