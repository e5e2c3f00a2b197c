/**
 * Who is calling the owner API. Two credentials, never mixed:
 *   - an operator's admin token, `Authorization: Bearer gwadm_…`, compared (as a SHA-256
 *     digest, in constant time) with `owner.adminTokenDigests`; it is not ambient, so it needs
 *     no CSRF defence;
 *   - an owner's session cookie, which a browser attaches by itself: so every state-changing
 *     call with it must also carry the session's `X-CSRF-Token` (a synchronizer token), and
 *     must not come from another origin (`Origin`, `Sec-Fetch-Site`).
 * Access tokens and API settings tokens are data-plane credentials and are not accepted here.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import type { Config } from '../../config/schema.js';
import { CsrfFailed, Forbidden, InvalidAdminToken, SecondFactorEnrollmentRequired, SessionRequired } from '../../errors/errors.js';
import type { Caller, SessionResolver } from '../../owner/types.js';

export const ADMIN_TOKEN_PREFIX = 'gwadm_';

/** The session cookie: `__Host-` (Secure, Path=/, no Domain) when served over TLS. */
export function sessionCookieName(secure: boolean): string {
  return secure ? '__Host-gw_session' : 'gw_session';
}

/** The device cookie (owner/devices.ts): `__Host-` over TLS, as the session cookie. */
export function deviceCookieName(secure: boolean): string {
  return secure ? '__Host-gw_device' : 'gw_device';
}

/** Whether owners reach the gateway over TLS: the configured public origin says, else the connection. */
export function servedOverTls(config: Pick<Config['owner'], 'publicOrigin'>, ctx: Context): boolean {
  return config.publicOrigin !== undefined ? config.publicOrigin.startsWith('https:') : ctx.protocol === 'https';
}

export function adminTokenDigest(token: string): string {
  return `sha256:${createHash('sha256').update(token, 'utf8').digest('hex')}`;
}

/** The admin token matches a configured digest: every digest is compared, each in constant time. */
export function isAdminToken(token: string, digests: readonly string[]): boolean {
  const presented = Buffer.from(adminTokenDigest(token));
  let matched = false;
  for (const digest of digests) {
    const expected = Buffer.from(digest);
    if (expected.length === presented.length && timingSafeEqual(expected, presented)) matched = true;
  }
  return matched;
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * A state-changing browser request must come from the gateway's own origin, whoever it is
 * from (sign-in too: login CSRF). Requests without Origin and Sec-Fetch-Site (curl, scripts)
 * carry no ambient credential of a victim's unless they present a session, which then needs
 * the CSRF token.
 */
export function checkOrigin(ctx: Context, publicOrigin: string | undefined): void {
  if (!UNSAFE.has(ctx.method)) return;
  const site = ctx.get('sec-fetch-site');
  if (site !== '' && site !== 'same-origin' && site !== 'none') throw new CsrfFailed();
  const origin = ctx.get('origin');
  if (origin === '') return;
  const own = publicOrigin ?? `${ctx.protocol}://${ctx.host}`;
  if (origin !== own) throw new CsrfFailed();
}

export interface ResolvedCaller {
  caller: Caller;
  sessionToken?: string;
  mustChangePassword: boolean;
  /** An owner a second factor is required of, without one (owner/second-factor.ts). */
  mustEnrollSecondFactor?: boolean;
}

/**
 * The caller of a non-public operation, or SessionRequired (401). A present but wrong admin
 * token is a 401 too, counted by the caller as a failed sign-in (http/owner/register.ts).
 */
export async function resolveCaller(ctx: Context, { sessions, config }: { sessions: SessionResolver; config: Pick<Config['owner'], 'publicOrigin' | 'adminTokenDigests'> }): Promise<ResolvedCaller> {
  const authorization = ctx.get('authorization');
  if (authorization !== '') {
    const match = /^Bearer +(\S+)$/i.exec(authorization);
    const token = match?.[1];
    if (token === undefined || !token.startsWith(ADMIN_TOKEN_PREFIX) || token.length > 256) throw new InvalidAdminToken();
    if (!isAdminToken(token, config.adminTokenDigests)) throw new InvalidAdminToken();
    return { caller: { kind: 'operator' }, mustChangePassword: false };
  }
  // Over TLS only the __Host- name: a plain-named cookie can be set by a sibling subdomain.
  const token = ctx.cookies.get(sessionCookieName(servedOverTls(config, ctx)));
  if (token === undefined || token.length > 256) throw new SessionRequired();
  const session = await sessions.resume(token);
  if (session === undefined) throw new SessionRequired();
  if (UNSAFE.has(ctx.method)) {
    const presented = Buffer.from(ctx.get('x-csrf-token'));
    const expected = Buffer.from(session.csrfToken);
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) throw new CsrfFailed();
  }
  return { caller: session.caller, sessionToken: token, mustChangePassword: session.mustChangePassword, mustEnrollSecondFactor: session.mustEnrollSecondFactor === true };
}

export function requirePasswordChanged(resolved: ResolvedCaller): void {
  if (resolved.mustChangePassword) {
    throw new Forbidden('Change the initial password first (POST /owner/v1/session/password).', 'password_change_required');
  }
}

export function requireSecondFactorEnrolled(resolved: ResolvedCaller): void {
  if (resolved.mustEnrollSecondFactor === true) throw new SecondFactorEnrollmentRequired();
}
