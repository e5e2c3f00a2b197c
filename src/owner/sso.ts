/**
 * Owners' single sign-on through an OpenID provider (docs/owner.md, "Single sign-on"). A
 * sign-in is a transaction: `begin` makes its state, nonce and PKCE verifier and answers the
 * provider's URL with a cookie that carries them, signed (HMAC-SHA256, the device cookie's key
 * with a label of its own) and short-lived, so that any instance can finish it and nothing is
 * stored for a stranger's visit; `finish` checks that cookie and the `state` the provider sent
 * back, lets openid-client check the code, PKCE and the ID token (owner/sso-provider.ts), and
 * then lets in:
 *   - the owner with the provider's email, when the provider says it is verified
 *     (`email_verified: true`), or
 *   - someone invited first: `begin` given an open invite's token (the dashboard's invite page)
 *     keeps its digest in the transaction, and `finish` accepts that invite for the verified
 *     email it was made for, making the owner (with a random password) when there is none.
 * Nobody else: an unverified email, an unknown email without an invite and a disabled owner
 * are refused (SsoFailed). The session made is the same as a password sign-in's, capped alike.
 *
 * Every callback is counted by the owner sign-in limits before any work (per client address:
 * the email is known only after the provider is asked), so callbacks are no way to flood the
 * provider or the store. test/http/owner-sso.test.ts holds it.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import * as client from 'openid-client';
import { Conflict, SsoFailed } from '../errors/errors.js';
import { randomBase62 } from '../domain/random.js';
import type { OwnerRecord } from '../state/owners/records.js';
import type { OwnerDeps } from './deps.js';
import { inviteDigest, INVITE_TOKEN_PREFIX } from './invites.js';
import { hashPassword } from './passwords.js';
import { createChangePipeline, editAccount } from './pipeline.js';
import type { NewSession } from './sessions.js';
import { createSsoProvider, type SsoProvider } from './sso-provider.js';
import type { Actor, RequestMeta } from './types.js';
import { inviteStatus } from './views.js';

/** How long a sign-in at the provider may take: the transaction cookie's Max-Age. */
export const SSO_TRANSACTION_SECONDS = 600;

export interface SsoService {
  readonly displayName: string;
  /** A new transaction: where to send the browser, and the cookie that carries it. */
  begin(input: { redirectUri: string; inviteToken?: string | undefined }): Promise<{ location: string; transaction: string }>;
  /**
   * Finishes a transaction: `callback` is the redirect URI with the provider's query. Throws
   * SsoFailed (a 4xx with its code) for anything refused, TooManyRequests when throttled.
   */
  finish(input: { callback: URL; transaction: string | undefined }, meta: RequestMeta): Promise<NewSession>;
}

/** What a transaction cookie carries. */
interface Transaction {
  state: string;
  nonce: string;
  codeVerifier: string;
  redirectUri: string;
  /** The digest of the invite the sign-in was started from. */
  invite?: string;
  /** Epoch seconds. */
  expires: number;
}

/** Starts a session for an owner proven by the provider (SessionService.startVerified). */
export type StartVerified = (owner: OwnerRecord, meta: RequestMeta) => Promise<NewSession>;

export function createSsoService(deps: OwnerDeps, startVerified: StartVerified, provider?: SsoProvider): SsoService | undefined {
  const { issuer, clientId, displayName } = deps.config.owner.sso;
  if (issuer === undefined || clientId === undefined) return undefined;
  const idp = provider ?? createSsoProvider({ ...deps.config.owner.sso, issuer, clientId });
  const cookies = transactionCookies(deps);
  const { store, limits, log } = deps;
  const acceptInvite = createSsoInviteAcceptance(deps);

  return {
    displayName,

    async begin({ redirectUri, inviteToken }) {
      const codeVerifier = client.randomPKCECodeVerifier();
      const t: Transaction = {
        state: client.randomState(), nonce: client.randomNonce(), codeVerifier, redirectUri,
        ...(inviteToken?.startsWith(INVITE_TOKEN_PREFIX) === true ? { invite: inviteDigest(inviteToken) } : {}),
        expires: Math.floor(deps.clock.now() / 1000) + SSO_TRANSACTION_SECONDS,
      };
      const url = await idp.authorizationUrl({ redirectUri, state: t.state, nonce: t.nonce, codeChallenge: await client.calculatePKCECodeChallenge(codeVerifier) });
      return { location: url.href, transaction: cookies.seal(t) };
    },

    async finish({ callback, transaction }, meta) {
      // Counted before any work; keyed by address only (the email is not known yet), so that
      // no one's failures lock out another address's sign-ins.
      const attempt = await limits.ownerSignIn(`sso|${meta.ip}`, meta.ip, undefined);
      const t = cookies.open(transaction);
      const state = callback.searchParams.get('state');
      if (t === undefined || state === null || !sameText(state, t.state)) {
        throw new SsoFailed('sso_state_mismatch', 'This sign-in was not started in this browser, or took too long: start it again.');
      }
      let identity;
      try {
        identity = await idp.exchange(callback, t);
      } catch (err) {
        if (!(err instanceof SsoFailed)) await attempt.undecided();
        else log.info({ err: err.cause ?? err }, 'owner single sign-on refused by the provider check');
        throw err;
      }
      const email = identity.email?.toLowerCase();
      if (email === undefined || !identity.emailVerified) throw new SsoFailed('sso_email_unverified', 'The provider has not verified this email address.', { status: 403 });
      const owner = (t.invite === undefined ? undefined : await acceptInvite(t.invite, email, meta)) ?? await store.findOwnerByEmail(email);
      if (owner === undefined || owner.disabled) throw new SsoFailed('sso_not_invited', 'No owner has this email: ask an owner of an account for an invite.', { status: 403 });
      await attempt.succeeded();
      return startVerified(owner, meta);
    },
  };
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The transaction cookie: `<payload, base64url JSON>.<HMAC-SHA256, base64url>`. */
function transactionCookies({ config, clock }: Pick<OwnerDeps, 'config' | 'clock'>): { seal(t: Transaction): string; open(cookie: string | undefined): Transaction | undefined } {
  const secret = config.owner.deviceCookieSecret;
  const key = secret === undefined ? randomBytes(32) : Buffer.from(secret, 'utf8');
  const mac = (payload: string): Buffer => createHmac('sha256', key).update(`gw-sso-v1|${payload}`).digest();
  return {
    seal(t) {
      const payload = Buffer.from(JSON.stringify(t)).toString('base64url');
      return `${payload}.${mac(payload).toString('base64url')}`;
    },
    open(cookie) {
      const m = cookie === undefined ? null : /^([A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{43})$/.exec(cookie);
      if (m === null) return undefined;
      const given = Buffer.from(m[2]!, 'base64url');
      const expected = mac(m[1]!);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
      const t = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8')) as Transaction;
      return t.expires * 1000 > clock.now() ? t : undefined;
    },
  };
}

/**
 * Accepts the invite a sign-in was started from, for the verified email it was made for: the
 * owner it names (made now, with a random password they can replace by a reset, when there is
 * none) joins the account. Answers that owner; undefined when the invite is not open or names
 * another email (the sign-in then goes on as one without an invite).
 */
function createSsoInviteAcceptance(deps: OwnerDeps): (digest: string, email: string, meta: RequestMeta) => Promise<OwnerRecord | undefined> {
  const { store, clock } = deps;
  const change = createChangePipeline(deps);
  const iso = (ms: number): string => new Date(ms).toISOString();
  return async (digest, email, meta) => {
    const found = await store.findInvite(digest);
    if (found === undefined || found.invite.email !== email || inviteStatus(found.invite, clock.now()) !== 'pending') return undefined;
    const existing = await store.findOwnerByEmail(email);
    const account = await store.readAccount(found.accountId);
    if (account === undefined || account.deletedAt !== undefined) return undefined;
    if (existing !== undefined && account.members.some((m) => m.ownerId === existing.id)) return existing;
    return change(undefined, {
      load: async () => found,
      apply: async () => (existing === undefined ? await hashPassword(randomBase62(43)) : undefined),
      async persist({ loaded: { accountId, invite }, prepared: passwordHash, now, event }) {
        let owner = existing;
        if (owner === undefined) {
          owner = { id: `own_${randomBase62(16)}`, email, passwordHash: passwordHash!, mustChangePassword: false, disabled: false, createdAt: iso(now) };
          if (!(await store.createOwner(owner))) throw new Conflict('An owner with this email was created meanwhile: sign in again.');
        }
        const made = owner;
        const by: Actor = { caller: { kind: 'owner', ownerId: made.id, email }, meta };
        const saved = await editAccount(store, undefined, accountId, (current) => {
          const index = current.invites.findIndex((i) => i.id === invite.id);
          // One use: whoever commits first has it; a member already needs none.
          if (current.deletedAt !== undefined || index === -1 || inviteStatus(current.invites[index]!, now) !== 'pending' || current.members.some((m) => m.ownerId === made.id)) {
            return { events: [], result: undefined };
          }
          const invites = current.invites.map((i, n) => (n === index ? { ...i, usedAt: iso(now) } : i));
          const events = [
            event({ action: 'invite.accept', target: { type: 'invite', id: invite.id } }, { by }),
            event({ action: 'member.add', target: { type: 'owner', id: made.id }, changes: { email: [null, email] } }, { by }),
          ];
          return { doc: { ...current, invites, members: [...current.members, { ownerId: made.id, addedAt: iso(now) }] }, events, result: undefined };
        });
        return { ...saved, result: made };
      },
    });
  };
}
