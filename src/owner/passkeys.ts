/**
 * Passkeys (WebAuthn) with @simplewebauthn/server: an owner registers several (named), and uses
 * one after the password as a second factor, or alone to sign in without a password.
 *
 * Every ceremony's challenge is made here, kept server-side under a random ceremony id
 * (state/ceremonies/: memory, or Redis shared by every instance) for CEREMONY_MS, and taken
 * once: an answer to an unknown, used or expired ceremony is refused. The relying party is the
 * deployment's public origin (`owner.publicOrigin`, else the request's own): its host is the
 * RP ID, and a passkey answers only for it. Credentials are discoverable (resident keys) and
 * carry the owner's id as their user handle, so a sign-in needs no email first and a stranger
 * learns nothing of which emails have passkeys; the signature counter is checked and stored at
 * each use (a clone of an authenticator that counts shows as a counter that went back).
 * test/dashboard/passkeys.test.ts holds it, in Chromium with a virtual authenticator.
 */
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { Conflict, InvalidRequest, NotFound } from '../errors/errors.js';
import { ID_PATTERN } from '../domain/formats.js';
import { randomBase62 } from '../domain/random.js';
import type { CeremonyStore } from '../state/ceremonies/store.js';
import { PASSKEYS_MAX, type OwnerRecord, type PasskeyRecord } from '../state/owners/records.js';
import type { OwnerStore } from '../state/owners/store.js';
import type { Clock } from '../util/clock.js';

type WebAuthn = typeof import('@simplewebauthn/server');
let loading: Promise<WebAuthn> | undefined;
/**
 * @simplewebauthn/server, loaded at the first ceremony: with its CBOR, ASN.1 and COSE parts it
 * costs about 100 ms of CPU at every start, which a gateway whose owners use no passkey (and
 * every test's gateway) should not pay.
 */
function webAuthn(): Promise<WebAuthn> {
  loading ??= import('@simplewebauthn/server');
  return loading;
}

/** How long a ceremony's challenge may be answered (the browser's own timeout is the same). */
export const CEREMONY_MS = 5 * 60_000;
const CEREMONY_ID_LENGTH = 32;
/**
 * COSE algorithms offered and accepted: Ed25519, ES256, RS256 (WebAuthn L3 §5.8.5's list, what
 * every authenticator does). Not the library's post-quantum ML-DSA default: its signatures run to
 * kilobytes, and Node's support for it is still experimental.
 */
const ALGORITHMS = [-8, -7, -257];

/** The relying party a ceremony is for: the origin the browser shows and its host. */
export interface RelyingParty {
  origin: string;
}

export interface PasskeyView {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt?: string;
}

export function passkeyView(passkey: PasskeyRecord): PasskeyView {
  return { id: passkey.id, name: passkey.name, createdAt: passkey.createdAt, ...(passkey.lastUsedAt !== undefined ? { lastUsedAt: passkey.lastUsedAt } : {}) };
}

/** A browser's answer to a sign-in ceremony. */
export interface PasskeyAnswer {
  ceremonyId: string;
  response: AuthenticationResponseJSON;
}

const rpIdOf = ({ origin }: RelyingParty): string => new URL(origin).hostname;

export interface PasskeyCeremonies {
  startRegistration(owner: OwnerRecord, rp: RelyingParty): Promise<{ ceremonyId: string; options: PublicKeyCredentialCreationOptionsJSON }>;
  /** The verified new credential, not yet stored; InvalidRequest (field `response`) when the answer does not verify. */
  finishRegistration(owner: OwnerRecord, rp: RelyingParty, answer: { ceremonyId: string; response: RegistrationResponseJSON; name: string }): Promise<PasskeyRecord>;
  startSignIn(rp: RelyingParty): Promise<{ ceremonyId: string; options: PublicKeyCredentialRequestOptionsJSON }>;
  /** The owner the answer's user handle names (unchecked, a cheap read: what the sign-in limits count against), or undefined. */
  claimedOwner(answer: PasskeyAnswer): Promise<OwnerRecord | undefined>;
  /**
   * Verifies a sign-in answer for `owner` (its ceremony taken once, the signature against the
   * owner's stored credential, the counter) and stores the new counter and last use. False when
   * it does not verify.
   */
  verifySignIn(owner: OwnerRecord, rp: RelyingParty, answer: PasskeyAnswer): Promise<boolean>;
}

export function createPasskeyCeremonies({ store, ceremonies, clock, rpName }: { store: OwnerStore; ceremonies: CeremonyStore; clock: Clock; rpName: string }): PasskeyCeremonies {
  async function begin(kind: 'registration' | 'authentication', challenge: string, ownerId?: string): Promise<string> {
    const ceremonyId = randomBase62(CEREMONY_ID_LENGTH);
    await ceremonies.put(ceremonyId, { kind, challenge, expiresAt: clock.now() + CEREMONY_MS, ...(ownerId !== undefined ? { ownerId } : {}) });
    return ceremonyId;
  }

  return {
    async startRegistration(owner, rp) {
      if ((owner.passkeys ?? []).length >= PASSKEYS_MAX) throw new Conflict(`An owner may register at most ${PASSKEYS_MAX} passkeys: remove one first.`);
      const options = await (await webAuthn()).generateRegistrationOptions({
        rpName,
        rpID: rpIdOf(rp),
        userName: owner.email,
        userID: new TextEncoder().encode(owner.id),
        attestationType: 'none',
        timeout: CEREMONY_MS,
        supportedAlgorithmIDs: ALGORITHMS,
        excludeCredentials: (owner.passkeys ?? []).map((p) => ({ id: p.id, ...(p.transports !== undefined ? { transports: p.transports } : {}) })),
        // Discoverable: the passkey alone says whose it is (passwordless sign-in with no email typed).
        authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
      });
      return { ceremonyId: await begin('registration', options.challenge, owner.id), options };
    },

    async finishRegistration(owner, rp, { ceremonyId, response, name }) {
      const ceremony = await ceremonies.take(ceremonyId);
      if (ceremony === undefined || ceremony.kind !== 'registration' || ceremony.ownerId !== owner.id) throw new InvalidRequest('This passkey ceremony is unknown, used or expired: start again.', { field: 'ceremonyId' });
      const verified = await (await webAuthn()).verifyRegistrationResponse({ response, expectedChallenge: ceremony.challenge, expectedOrigin: rp.origin, expectedRPID: rpIdOf(rp), requireUserVerification: false, supportedAlgorithmIDs: ALGORITHMS })
        .catch(() => ({ verified: false as const }));
      if (!verified.verified) throw new InvalidRequest('The passkey\'s answer does not verify.', { field: 'response' });
      const { credential } = verified.registrationInfo;
      return {
        id: credential.id,
        publicKey: Buffer.from(credential.publicKey).toString('base64url'),
        counter: credential.counter,
        ...(credential.transports !== undefined ? { transports: credential.transports.slice(0, 8) } : {}),
        name,
        createdAt: new Date(clock.now()).toISOString(),
      };
    },

    async startSignIn(rp) {
      // No allowCredentials: the authenticator offers whichever discoverable passkey it holds for this RP.
      const options = await (await webAuthn()).generateAuthenticationOptions({ rpID: rpIdOf(rp), userVerification: 'preferred', timeout: CEREMONY_MS });
      return { ceremonyId: await begin('authentication', options.challenge), options };
    },

    async claimedOwner({ response }) {
      const handle = response.response.userHandle;
      if (handle === undefined || !/^[A-Za-z0-9_-]{1,512}$/.test(handle)) return undefined;
      // Only an id as owner ids are spelt reaches the store (a made-up handle is a guess's text).
      const ownerId = Buffer.from(handle, 'base64url').toString('utf8');
      return ID_PATTERN.test(ownerId) ? store.findOwner(ownerId) : undefined;
    },

    async verifySignIn(owner, rp, { ceremonyId, response }) {
      const ceremony = await ceremonies.take(ceremonyId);
      if (ceremony === undefined || ceremony.kind !== 'authentication') return false;
      const passkey = (owner.passkeys ?? []).find((p) => p.id === response.id);
      if (passkey === undefined) return false;
      const credential = { id: passkey.id, publicKey: new Uint8Array(Buffer.from(passkey.publicKey, 'base64url')), counter: passkey.counter, ...(passkey.transports !== undefined ? { transports: passkey.transports } : {}) };
      const verified = await (await webAuthn()).verifyAuthenticationResponse({ response, expectedChallenge: ceremony.challenge, expectedOrigin: rp.origin, expectedRPID: rpIdOf(rp), credential, requireUserVerification: false })
        .catch(() => undefined);
      if (verified?.verified !== true) return false;
      const { newCounter } = verified.authenticationInfo;
      const lastUsedAt = new Date(clock.now()).toISOString();
      return store.updateOwner(owner.id, (current) => {
        const stored = (current.passkeys ?? []).find((p) => p.id === passkey.id);
        // Removed meanwhile, or a counter that did not move on (a counting authenticator's clone, or a replay raced with this one).
        if (stored === undefined || (newCounter !== 0 && newCounter <= stored.counter)) return { result: false };
        const passkeys = (current.passkeys ?? []).map((p) => (p.id === passkey.id ? { ...p, counter: newCounter, lastUsedAt } : p));
        return { owner: { ...current, passkeys }, result: true };
      });
    },
  };
}

/** Removes a passkey by id; NotFound when the owner has none of that id. Answers the removed one. */
export async function removePasskey(store: OwnerStore, ownerId: string, passkeyId: string): Promise<PasskeyRecord> {
  return store.updateOwner(ownerId, (current) => {
    const found = (current.passkeys ?? []).find((p) => p.id === passkeyId);
    if (found === undefined) throw new NotFound('No such passkey.');
    return { owner: { ...current, passkeys: (current.passkeys ?? []).filter((p) => p.id !== passkeyId) }, result: found };
  });
}
