/**
 * The owner's session: sign in, see who is signed in, sign out, change the password. The
 * session id travels only in a cookie: HttpOnly (no script reads it), SameSite=Strict (no other
 * site's page sends it), Path=/, and over TLS Secure with the `__Host-` name (no subdomain can
 * set or shadow it). Its Max-Age is the session's absolute lifetime; the idle timeout is the
 * store's. Everything the browser's script needs (the CSRF token, the deadlines) is in the
 * answer instead.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { SessionRequired } from '../../../errors/errors.js';
import type { OwnerServices } from '../../../owner/service.js';
import { deviceCookieName, servedOverTls, sessionCookieName } from '../../owner/caller.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';
import { emailField, newPasswordField, presentedPasswordField, sessionSchema } from './schemas.js';
import { passkeyAnswerSchema, relyingParty } from './webauthn.js';

function cookieOptions(deps: OwnerRouteDeps, ctx: Context): { name: string; secure: boolean } {
  const secure = servedOverTls(deps.config.owner, ctx);
  // Behind a TLS-terminating proxy the connection itself is plain: Koa would refuse a Secure cookie.
  if (secure) ctx.cookies.secure = true;
  return { name: sessionCookieName(secure), secure };
}

export function setSessionCookie(deps: OwnerRouteDeps, ctx: Context, token: string, maxAgeSeconds: number): void {
  const { name, secure } = cookieOptions(deps, ctx);
  ctx.cookies.set(name, token, { httpOnly: true, sameSite: 'strict', path: '/', secure, maxAge: maxAgeSeconds * 1000, overwrite: true });
}

/**
 * The device cookie (owner/devices.ts) outlives sessions and sign-outs: it marks the browser as
 * one the owner signed in from, so that strangers' guesses at the email never lock it out.
 */
export function setDeviceCookie(deps: OwnerRouteDeps, ctx: Context, cookie: string, maxAgeSeconds: number): void {
  const { secure } = cookieOptions(deps, ctx);
  ctx.cookies.set(deviceCookieName(secure), cookie, { httpOnly: true, sameSite: 'strict', path: '/', secure, maxAge: maxAgeSeconds * 1000, overwrite: true });
}

function clearSessionCookie(deps: OwnerRouteDeps, ctx: Context): void {
  const { name, secure } = cookieOptions(deps, ctx);
  ctx.cookies.set(name, null, { httpOnly: true, sameSite: 'strict', path: '/', secure, overwrite: true });
}

export function sessionOperations(owner: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  return [
    operation({
      operationId: 'signIn',
      method: 'post',
      path: '/owner/v1/session',
      summary: 'Sign in as an owner (sets the session cookie)',
      tag: 'Session',
      auth: 'public',
      body: z.strictObject({
        email: emailField,
        password: presentedPasswordField,
        otp: z.string().max(32).optional().describe('For an owner with TOTP: the current 6-digit code, or one unused recovery code (docs/owner.md, "Second factors"). Without it, such an owner is answered 401 mfa_required.'),
        passkey: passkeyAnswerSchema.optional().describe('For an owner with a passkey: the answer to a startPasskeySignIn ceremony, as the second factor.'),
      }),
      response: sessionSchema,
      errors: [401, 403],
      async handle({ body, meta, ctx }) {
        const factors = { otp: body.otp, passkey: body.passkey === undefined ? undefined : { ...body.passkey, ...relyingParty(deps, ctx) } };
        const { token, session, maxAgeSeconds, device } = await owner.sessions.signIn(body.email, body.password, meta, factors);
        setSessionCookie(deps, ctx, token, maxAgeSeconds);
        if (device !== undefined) setDeviceCookie(deps, ctx, device.cookie, device.maxAgeSeconds);
        return session;
      },
    }),
    operation({
      operationId: 'getSession',
      method: 'get',
      path: '/owner/v1/session',
      summary: 'The signed-in owner, their accounts and the CSRF token',
      tag: 'Session',
      auth: 'session',
      response: sessionSchema,
      errors: [404],
      async handle({ sessionToken }) {
        const session = sessionToken === undefined ? undefined : await owner.sessions.describe(sessionToken);
        if (session === undefined) throw new SessionRequired();
        return session;
      },
    }),
    operation({
      operationId: 'deleteSession',
      method: 'delete',
      path: '/owner/v1/session',
      summary: 'Sign out (ends the session, clears the cookie)',
      tag: 'Session',
      auth: 'session',
      response: z.strictObject({ signedOut: z.literal(true) }),
      errors: [403, 404],
      async handle({ sessionToken, ctx }) {
        if (sessionToken !== undefined) await owner.sessions.signOut(sessionToken);
        clearSessionCookie(deps, ctx);
        return { signedOut: true as const };
      },
    }),
    operation({
      operationId: 'changePassword',
      method: 'post',
      path: '/owner/v1/session/password',
      summary: 'Change the password: every other session ends, a new one starts',
      tag: 'Session',
      auth: 'session',
      body: z.strictObject({ currentPassword: presentedPasswordField, newPassword: newPasswordField }),
      response: sessionSchema,
      errors: [403, 404, 409],
      async handle({ body, caller, sessionToken, meta, ctx }) {
        if (caller?.kind !== 'owner' || sessionToken === undefined) throw new SessionRequired();
        const { token, session, maxAgeSeconds } = await owner.sessions.changePassword(caller, sessionToken, body, meta);
        setSessionCookie(deps, ctx, token, maxAgeSeconds);
        return session;
      },
    }),
  ];
}
