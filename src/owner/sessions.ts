/**
 * Owner sign-in and sessions. A session id is 43 base62 characters (256 bits) that only the
 * cookie carries; the session store keeps it by its SHA-256, with the CSRF token every change
 * must echo, an idle deadline (owner.sessionIdleSeconds, moved on by use) and an absolute one
 * (owner.sessionMaxSeconds, never moved).
 *
 * Every password check is an attempt counted by the owner sign-in limits (`limits.ownerSignIn`,
 * apart from the API keys'), before the hash is computed, so a throttled attempt costs no
 * argon2 work: with the device cookie of an earlier sign-in for that email (owner/devices.ts)
 * against that device only, without one per address and per email. An unknown email, a wrong
 * password and a disabled owner get one answer, after the same argon2 work (owner/passwords.ts).
 */
import { InvalidOwnerCredentials, InvalidRequest } from '../errors/errors.js';
import { randomBase62 } from '../domain/random.js';
import { secretDigest } from '../domain/secrets.js';
import type { RateLimits } from '../limits/rate-limits.js';
import type { OwnerRecord } from '../state/owners/records.js';
import { SESSION_IP_MAX, SESSION_USER_AGENT_MAX, type OwnerSession } from '../state/sessions/store.js';
import type { OwnerDeps } from './deps.js';
import { createDeviceCookies, type DeviceCookies } from './devices.js';
import { newDeviceNotice } from './mail-notices.js';
import { hashPassword, limitHashing, needsRehash, PASSWORD_MAX, PASSWORD_MIN, prepareDummyHash, verifyNobody, verifyPassword } from './passwords.js';
import { createPasskeySignIn, startPasskeySignIn } from './passkey-sign-in.js';
import type { PasskeyAnswer, RelyingParty } from './passkeys.js';
import { createChangePipeline, type AuditTrail } from './pipeline.js';
import { createEvictionRecorder } from './session-events.js';
import { createSecondFactorGate, type PresentedFactors, type SecondFactorGate } from './second-factor.js';
import type { Caller, RequestMeta, ResumedSession, SessionResolver } from './types.js';
import { accountView, ownerView, type AccountView, type OwnerView } from './views.js';

/** What the session routes answer: who is signed in, to which accounts, and the session's deadlines. */
export interface SessionView {
  owner: OwnerView;
  accounts: AccountView[];
  csrfToken: string;
  idleExpiresAt: string;
  expiresAt: string;
}

/** A new session: the id for the cookie (shown once), and what it is. */
export interface NewSession {
  token: string;
  session: SessionView;
  /** Seconds until the absolute end: the cookie's Max-Age. */
  maxAgeSeconds: number;
  /** A sign-in's new device cookie for this browser (owner/devices.ts), and its Max-Age. */
  device?: { cookie: string; maxAgeSeconds: number };
}

export interface SessionService extends SessionResolver {
  /**
   * Throws InvalidOwnerCredentials (one answer for every failure) or TooManyRequests; for an
   * owner with a second factor, SecondFactorRequired unless `factors` holds a right one.
   */
  signIn(email: string, password: string, meta: RequestMeta, factors?: PresentedFactors): Promise<NewSession>;
  /** A passkey sign-in ceremony's options (counted per address). */
  startPasskeySignIn(rp: RelyingParty, meta: RequestMeta): ReturnType<SecondFactorGate['ceremonies']['startSignIn']>;
  /** Signs in with a passkey alone (owner/passkey-sign-in.ts). */
  signInWithPasskey(answer: PasskeyAnswer & RelyingParty, meta: RequestMeta): Promise<NewSession>;
  /** Second factors at sign-in, and the requirement (owner/second-factor.ts). */
  readonly secondFactors: SecondFactorGate;
  /** The session of this token (already resumed by the caller check); SessionRequired-worthy: undefined. */
  describe(token: string): Promise<SessionView | undefined>;
  signOut(token: string): Promise<void>;
  /** A session for an owner another proof let in (single sign-on, owner/sso.ts): the same kind as a sign-in's, capped alike. */
  startVerified(owner: OwnerRecord, meta: RequestMeta): Promise<NewSession>;
  /**
   * Checks the current password (counted like a sign-in), stores the new one, ends every
   * session of the owner and starts a new one; clears mustChangePassword.
   */
  changePassword(caller: Extract<Caller, { kind: 'owner' }>, token: string, passwords: { currentPassword: string; newPassword: string }, meta: RequestMeta): Promise<NewSession>;
}

/** The id the cookie carries: 43 base62 characters, 256 bits. */
const SESSION_ID_LENGTH = 43;
/** The idle deadline is moved at most this often (each move is a store write), or at a quarter of the idle time if shorter. */
const TOUCH_EVERY_MS = 60_000;

/** The key of a session in the store: the SHA-256 of its id, so the store holds nothing a browser could present. */
export function sessionDigest(token: string): string {
  return secretDigest(Buffer.from(token, 'utf8'));
}

/**
 * The password check of a sign-in, a password change and an invite accepted as an existing
 * owner: counted by the owner sign-in limits before any hashing (`device`: the id of a valid
 * device cookie for this email), the same argon2 work for an unknown email, and one answer
 * (InvalidOwnerCredentials) for every failure.
 */
export async function checkOwnerPassword(limits: RateLimits, email: string, owner: OwnerRecord | undefined, password: string, meta: RequestMeta, device?: string, signedIn = false): Promise<OwnerRecord> {
  const attempt = await limits.ownerSignIn(email.toLowerCase(), meta.ip, device);
  // A browser the owner signed in from before, or a session's own password change, is never
  // refused by the hashing budget (passwords.ts): only strangers' sign-ins are.
  const share = device === undefined && !signedIn ? 'budgeted' : 'reserved';
  let matched: boolean;
  try {
    matched = owner === undefined ? await verifyNobody(password, share) : await verifyPassword(owner.passwordHash, password, share);
  } catch (err) {
    await attempt.undecided();
    throw err;
  }
  if (!matched || owner === undefined || owner.disabled) throw new InvalidOwnerCredentials();
  await attempt.succeeded();
  return owner;
}

/** What sign-ins and password changes share: the counted password check and the start of a session. */
interface SessionKit {
  devices: DeviceCookies;
  /** A counted password check; throws InvalidOwnerCredentials on any failure. */
  checkPassword(email: string, owner: OwnerRecord | undefined, password: string, meta: RequestMeta, signedIn?: boolean): Promise<OwnerRecord>;
  view(owner: OwnerRecord, session: OwnerSession): Promise<SessionView>;
  /**
   * Starts a session made from `meta`'s request. A sign-in's (`capped`) ends the owner's oldest
   * past owner.maxSessionsPerOwner, audited `owner.session_evict`.
   */
  start(owner: OwnerRecord, meta: RequestMeta, options?: { capped?: boolean }): Promise<{ digest: string; created: NewSession }>;
  /**
   * A hash made with older parameters is replaced now that the password is known (failures only
   * logged). Answers the hash the owner has for this password afterwards.
   */
  rehashIfOld(owner: OwnerRecord, password: string): Promise<string>;
}

export function createSessionService(deps: OwnerDeps): SessionService {
  const { store, sessions, clock, config, demoSecrets } = deps;
  const idleMs = config.owner.sessionIdleSeconds * 1000;
  const touchEveryMs = Math.min(TOUCH_EVERY_MS, idleMs / 4);
  const kit = createSessionKit(deps);
  const { devices, checkPassword, view, start, rehashIfOld } = kit;
  const secondFactors = createSecondFactorGate(deps);

  return {
    secondFactors,
    async signIn(email, password, meta, factors = {}) {
      const owner = await checkPassword(email, await store.findOwnerByEmail(email.toLowerCase()), password, meta);
      // A demo owner's published password, on a production gateway: the answer of a wrong one.
      if (demoSecrets?.refusesOwner(owner) === true) throw new InvalidOwnerCredentials();
      await secondFactors.check(owner, factors, meta, devices.deviceOf(meta.deviceCookie, owner.email));
      const passwordHash = await rehashIfOld(owner, password);
      const { digest, created } = await start(owner, meta, { capped: true });
      // A password change committed while this sign-in was checked may have ended the owner's
      // sessions before this one was stored: read again after storing it, so that one of the two
      // always sees the other. The hash tells (every change makes a new salt), where a time
      // might not: two changes can fall in one millisecond.
      const current = await store.findOwner(owner.id);
      if (current === undefined || current.disabled || current.passwordHash !== passwordHash) {
        await sessions.delete(digest);
        throw new InvalidOwnerCredentials();
      }
      // A browser without this owner's device cookie: the owner hears of it by mail.
      if (devices.deviceOf(meta.deviceCookie, owner.email) === undefined) await newDeviceNotice(deps.mail, owner, meta, clock.now());
      return { ...created, device: { cookie: devices.issue(owner.email), maxAgeSeconds: devices.maxAgeSeconds } };
    },

    async resume(token): Promise<ResumedSession | undefined> {
      const digest = sessionDigest(token);
      const session = await sessions.find(digest);
      if (session === undefined) return undefined;
      const owner = await store.findOwner(session.ownerId);
      if (owner === undefined || owner.disabled) {
        await sessions.delete(digest);
        return undefined;
      }
      const now = clock.now();
      // Each touch is a write: skipped while the deadline was moved less than touchEveryMs ago.
      if (session.idleExpiresAt - now < idleMs - touchEveryMs && session.idleExpiresAt < session.expiresAt) {
        await sessions.touch(digest, now + idleMs);
      }
      return { caller: { kind: 'owner', ownerId: owner.id, email: owner.email }, csrfToken: session.csrfToken, mustChangePassword: owner.mustChangePassword, mustEnrollSecondFactor: await secondFactors.mustEnroll(owner) };
    },

    async describe(token) {
      const session = await sessions.find(sessionDigest(token));
      const owner = session === undefined ? undefined : await store.findOwner(session.ownerId);
      return session === undefined || owner === undefined ? undefined : view(owner, session);
    },

    async signOut(token) {
      await sessions.delete(sessionDigest(token));
    },

    async startVerified(owner, meta) {
      const { digest, created } = await start(owner, meta, { capped: true });
      // Disabled while it was being made: as signIn, read again after storing it.
      const current = await store.findOwner(owner.id);
      if (current === undefined || current.disabled) {
        await sessions.delete(digest);
        throw new InvalidOwnerCredentials();
      }
      return created;
    },

    changePassword: createPasswordChange(deps, kit),
    startPasskeySignIn: (rp, meta) => startPasskeySignIn(deps, secondFactors, rp, meta),
    signInWithPasskey: createPasskeySignIn(deps, kit, secondFactors),
  };
}

function createSessionKit(deps: OwnerDeps): SessionKit {
  const { store, sessions, clock, limits, log, config, devices: given } = deps;
  const recordEvictions = createEvictionRecorder(deps);
  const idleMs = config.owner.sessionIdleSeconds * 1000;
  const maxMs = config.owner.sessionMaxSeconds * 1000;
  const devices = given ?? createDeviceCookies({ secret: config.owner.deviceCookieSecret, days: config.owner.deviceCookieDays, clock });
  limitHashing({ concurrency: config.owner.passwordHashConcurrency, queue: config.owner.passwordHashQueue, budget: config.owner.passwordHashBudget, now: () => clock.now(), nice: config.owner.passwordHashNice });
  prepareDummyHash();

  async function view(owner: OwnerRecord, session: OwnerSession): Promise<SessionView> {
    const accounts: AccountView[] = [];
    for (const id of await store.accountsOf(owner.id)) {
      const doc = await store.readAccount(id);
      if (doc !== undefined && doc.deletedAt === undefined) accounts.push(accountView(doc));
    }
    return {
      owner: ownerView(owner),
      accounts,
      csrfToken: session.csrfToken,
      idleExpiresAt: new Date(session.idleExpiresAt).toISOString(),
      expiresAt: new Date(session.expiresAt).toISOString(),
    };
  }

  return {
    devices,
    checkPassword: (email, owner, password, meta, signedIn = false) => checkOwnerPassword(limits, email, owner, password, meta, devices.deviceOf(meta.deviceCookie, email), signedIn),
    view,

    async start(owner, meta, { capped = false } = {}) {
      const token = randomBase62(SESSION_ID_LENGTH);
      const digest = sessionDigest(token);
      const now = clock.now();
      const session: OwnerSession = {
        ownerId: owner.id,
        csrfToken: randomBase62(SESSION_ID_LENGTH),
        createdAt: now,
        idleExpiresAt: Math.min(now + idleMs, now + maxMs),
        expiresAt: now + maxMs,
        lastSeenAt: now,
        ip: meta.ip.slice(0, SESSION_IP_MAX),
        ...(meta.userAgent === undefined || meta.userAgent === '' ? {} : { userAgent: meta.userAgent.slice(0, SESSION_USER_AGENT_MAX) }),
      };
      const evicted = await sessions.create(digest, session, capped ? { maxPerOwner: config.owner.maxSessionsPerOwner } : {});
      await recordEvictions({ caller: { kind: 'owner', ownerId: owner.id, email: owner.email }, meta }, evicted);
      return { digest, created: { token, session: await view(owner, session), maxAgeSeconds: Math.floor(maxMs / 1000) } };
    },

    async rehashIfOld(owner, password) {
      if (!needsRehash(owner.passwordHash) || store.readOnly !== undefined) return owner.passwordHash;
      try {
        const passwordHash = await hashPassword(password);
        return await store.updateOwner(owner.id, (current) => (current.passwordHash === owner.passwordHash ? { owner: { ...current, passwordHash }, result: passwordHash } : { result: owner.passwordHash }));
      } catch (err) {
        log.warn({ err, ownerId: owner.id }, 'owner password rehash failed: the old hash stays');
        return owner.passwordHash;
      }
    },
  };
}

/** The password change, through the owner change pipeline: the owner's own change, audited in each account they manage. */
function createPasswordChange(deps: OwnerDeps, { checkPassword, start }: SessionKit): SessionService['changePassword'] {
  const { store, sessions } = deps;
  const change = createChangePipeline(deps);
  return async (caller, token, { currentPassword, newPassword }, meta) => {
    if (newPassword.length < PASSWORD_MIN || newPassword.length > PASSWORD_MAX) {
      throw new InvalidRequest(`The new password must have ${PASSWORD_MIN} to ${PASSWORD_MAX} characters.`, { field: 'newPassword' });
    }
    return change({ caller, meta }, {
      load: () => store.findOwner(caller.ownerId),
      // After the writable check: a store that takes no writes refuses before any hashing.
      async apply(found) {
        const owner = await checkPassword(caller.email, found, currentPassword, meta, true);
        return { owner, passwordHash: await hashPassword(newPassword) };
      },
      async persist({ prepared: { owner, passwordHash }, now, event }) {
        const before = await store.updateOwner(owner.id, (current) => ({
          owner: { ...current, passwordHash, mustChangePassword: false, passwordChangedAt: new Date(now).toISOString() },
          result: current,
        }));
        const { digest, created } = await start({ ...before, passwordHash, mustChangePassword: false }, meta);
        // Every other session of this owner ends (whoever learnt the old password is out), the presenting one by name.
        await sessions.delete(sessionDigest(token));
        await sessions.deleteOwnerSessions(owner.id, digest);
        const events = [event({
          action: 'owner.password_change',
          target: { type: 'owner', id: owner.id },
          changes: { mustChangePassword: [before.mustChangePassword, false] },
        })];
        // The owner's own change, recorded in each account they manage.
        const audited: AuditTrail[] = [];
        for (const accountId of await store.accountsOf(owner.id)) {
          await store.appendAudit(accountId, events);
          audited.push({ accountId, events });
        }
        return { audited, result: created };
      },
    });
  };
}
