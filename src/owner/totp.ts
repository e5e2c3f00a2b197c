/**
 * TOTP (RFC 6238) as an owner's second factor, with otpauth: SHA-1, 6 digits, 30-second steps
 * (what every authenticator app reads from an `otpauth://` URI), one step either side accepted
 * for clock drift. Enrollment is two calls: start keeps a new secret as pending and answers it
 * once (with its URI and a QR code of it); confirm takes a code of it, makes it the owner's
 * factor and answers ten recovery codes, once. After that the secret is never answered again
 * and never logged (the logger's redaction and audit.ts's allow-list keep it out of both).
 *
 * With `owner.secondFactorKey` the secret is stored sealed (owner/secret-box.ts).
 *
 * A code is accepted once: the step it was accepted for is stored with the owner, in the same
 * store change that accepts it (OwnerStore.updateOwner, atomic on every store), so a code seen
 * over a shoulder or replayed to another instance within its window is refused. Recovery codes
 * are stored as SHA-256 digests (each carries 50 random bits: no slow hash needed, no guessing
 * either past the sign-in limits) and removed in the change that uses one.
 * test/http/owner-totp.test.ts holds it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { Conflict, SecondFactorRequired } from '../errors/errors.js';
import type { OwnerRecord } from '../state/owners/records.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { SecretBox } from './secret-box.js';

export const TOTP_PERIOD_SECONDS = 30;
export const RECOVERY_CODE_COUNT = 10;
/** Steps either side of now a code may come from (RFC 6238 §5.2 recommends at most one). */
const WINDOW = 1;
/** RFC 4648 base32's letters, lowercase: no 0/1/8/9 that read like O/I/B/g. */
const RECOVERY_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** What startTotpEnrollment answers: the secret, its URI and the URI as a QR code (an SVG data URL). */
export interface TotpEnrollment {
  secret: string;
  uri: string;
  qrCode: string;
}

function totpOf(secret: string, label: string, issuer: string): TOTP {
  return new TOTP({ issuer, label, algorithm: 'SHA1', digits: 6, period: TOTP_PERIOD_SECONDS, secret: Secret.fromBase32(secret) });
}

/** A new secret, its `otpauth://` URI (issuer: the deployment's host) and a QR code of the URI. */
export async function newEnrollment(email: string, issuer: string): Promise<TotpEnrollment> {
  const secret = new Secret({ size: 20 }).base32;
  const uri = totpOf(secret, email, issuer).toString();
  // qrcode is loaded at the first enrollment, not at every start.
  const { default: QRCode } = await import('qrcode');
  const svg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
  return { secret, uri, qrCode: `data:image/svg+xml;base64,${Buffer.from(svg, 'utf8').toString('base64')}` };
}

/** The time step a 6-digit code of `secret` belongs to at `now`, or undefined when it is none of the window's. */
export function matchingStep(secret: string, code: string, now: number): number | undefined {
  if (!/^[0-9]{6}$/.test(code)) return undefined;
  const delta = TOTP.validate({ token: code, secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: TOTP_PERIOD_SECONDS, timestamp: now, window: WINDOW });
  return delta === null ? undefined : Math.floor(now / 1000 / TOTP_PERIOD_SECONDS) + delta;
}

/** Ten new recovery codes (`xxxxx-xxxxx`, 50 bits each) and their digests, as stored. */
export function newRecoveryCodes(): { codes: string[]; digests: string[] } {
  const codes = Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const chars = [...randomBytes(10)].map((byte) => RECOVERY_ALPHABET[byte % 32]).join('');
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
  return { codes, digests: codes.map(recoveryDigest) };
}

/** The stored form of a recovery code: case, spaces and dashes as typed make no difference. */
export function recoveryDigest(code: string): string {
  const normal = code.toLowerCase().replaceAll(/[\s-]/g, '');
  return `sha256:${createHash('sha256').update(`gw-recovery-v1|${normal}`, 'utf8').digest('hex')}`;
}

/** Whether `otp` is spelt like a recovery code rather than a TOTP code. */
export function isRecoveryCodeSpelling(otp: string): boolean {
  return /^[a-z2-7]{5}-?[a-z2-7]{5}$/i.test(otp.trim());
}

/**
 * Uses `otp` (a TOTP code or a recovery code) against the owner's confirmed TOTP factor, in one
 * store change: a TOTP code of a step after the last accepted one moves `lastStep` on; a
 * recovery code still unused is removed. Throws SecondFactorRequired for anything else (wrong,
 * replayed, used, or no TOTP factor at all).
 */
export async function useTotpOrRecoveryCode(store: OwnerStore, box: SecretBox, owner: OwnerRecord, otp: string, now: number): Promise<{ recoveryCode: boolean }> {
  const code = otp.trim();
  if (isRecoveryCodeSpelling(code)) {
    const wanted = recoveryDigest(code);
    const used = await store.updateOwner(owner.id, (current) => {
      const left = current.recoveryCodes ?? [];
      if (current.totp === undefined || !left.includes(wanted)) return { result: false };
      return { owner: { ...current, recoveryCodes: left.filter((d) => d !== wanted) }, result: true };
    });
    if (!used) throw new SecondFactorRequired();
    return { recoveryCode: true };
  }
  const stored = owner.totp?.secret;
  const secret = stored === undefined ? undefined : box.open(stored, owner.id);
  const step = secret === undefined ? undefined : matchingStep(secret, code, now);
  if (step === undefined) throw new SecondFactorRequired();
  const accepted = await store.updateOwner(owner.id, (current) => {
    // Another instance may have accepted this step (or a later one) since `owner` was read.
    if (current.totp === undefined || current.totp.secret !== stored || (current.totp.lastStep ?? -1) >= step) return { result: false };
    return { owner: { ...current, totp: { ...current.totp, lastStep: step } }, result: true };
  });
  if (!accepted) throw new SecondFactorRequired();
  return { recoveryCode: false };
}

/**
 * Confirms a pending enrollment with a code of its secret; answers the new recovery codes, or
 * undefined for a wrong code. Conflict when none is pending.
 */
export async function confirmPending(store: OwnerStore, box: SecretBox, ownerId: string, code: string, now: number): Promise<{ codes: string[]; before: OwnerRecord } | undefined> {
  const { codes, digests } = newRecoveryCodes();
  const before = await store.updateOwner(ownerId, (current) => {
    const pending = current.pendingTotp;
    if (pending === undefined) throw new Conflict('No TOTP enrollment is pending: start one first (startTotpEnrollment).');
    const secret = box.open(pending.secret, ownerId);
    const step = secret === undefined ? undefined : matchingStep(secret, code, now);
    if (step === undefined) return { result: undefined };
    const { pendingTotp: _pending, ...rest } = current;
    return { owner: { ...rest, totp: { secret: pending.secret, enabledAt: new Date(now).toISOString(), lastStep: step }, recoveryCodes: digests }, result: current };
  });
  return before === undefined ? undefined : { codes, before };
}
