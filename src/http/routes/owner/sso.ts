/**
 * Single sign-on's browser navigations (owner/sso.ts): GET /owner/v1/sso says whether it is on
 * and how the button is named; GET /owner/v1/sso/start sends the browser to the provider with
 * the transaction cookie; the provider sends it back to GET /owner/v1/sso/callback, which sets
 * the session cookie and sends it on to the dashboard. A refusal there goes to the dashboard's
 * sign-in page with `?sso_error=<code>` (the error's code, a 4xx's); without the dashboard it is
 * answered as any error, in the envelope.
 *
 * The transaction cookie is SameSite=Lax, unlike the session's: the provider's redirect back is
 * a cross-site navigation, on which a Strict cookie is not sent. It is HttpOnly, lives
 * SSO_TRANSACTION_SECONDS, and is cleared by the callback whatever its outcome.
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { GatewayError, NotFound } from '../../../errors/errors.js';
import type { OwnerServices } from '../../../owner/service.js';
import { SSO_TRANSACTION_SECONDS, type SsoService } from '../../../owner/sso.js';
import { servedOverTls } from '../../owner/caller.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';
import { setSessionCookie } from './sessions.js';

export const SSO_CALLBACK_PATH = '/owner/v1/sso/callback';

function transactionCookieName(secure: boolean): string {
  return secure ? '__Host-gw_sso' : 'gw_sso';
}

function redirectUri(deps: OwnerRouteDeps, ctx: Context): string {
  const { sso, publicOrigin } = deps.config.owner;
  return sso.redirectUri ?? `${publicOrigin ?? `${ctx.protocol}://${ctx.host}`}${SSO_CALLBACK_PATH}`;
}

function configured(owner: OwnerServices): SsoService {
  if (owner.sso === undefined) throw new NotFound('Single sign-on is not configured on this gateway.');
  return owner.sso;
}

/** Where the browser goes after the callback: the dashboard (with `?sso_error=` on a refusal). */
function dashboardPage(deps: OwnerRouteDeps, page: string): string | undefined {
  const { enabled, path } = deps.config.dashboard;
  return enabled ? `${path.replace(/\/$/, '')}/${page}` : undefined;
}

export function ssoOperations(owner: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  const transactionCookie = (ctx: Context) => {
    const secure = servedOverTls(deps.config.owner, ctx);
    if (secure) ctx.cookies.secure = true;
    return { name: transactionCookieName(secure), options: { httpOnly: true, sameSite: 'lax' as const, path: '/', secure, overwrite: true } };
  };
  return [
    operation({
      operationId: 'getSsoOptions',
      method: 'get',
      path: '/owner/v1/sso',
      summary: 'Whether owners may sign in through an OpenID provider, and its name for the sign-in button',
      tag: 'Session',
      auth: 'public',
      response: z.strictObject({ enabled: z.boolean(), displayName: z.string().optional(), startPath: z.string().optional() }),
      errors: [],
      async handle() {
        return owner.sso === undefined ? { enabled: false } : { enabled: true, displayName: owner.sso.displayName, startPath: '/owner/v1/sso/start' };
      },
    }),
    operation({
      operationId: 'startSso',
      method: 'get',
      path: '/owner/v1/sso/start',
      summary: 'Start a single sign-on: redirects to the OpenID provider (`invite`: accept that invite with the verified email)',
      tag: 'Session',
      auth: 'public',
      query: z.strictObject({ invite: z.string().max(128).optional() }),
      status: 303,
      response: z.strictObject({}),
      errors: [404, 502],
      async handle({ query, ctx }) {
        const { location, transaction } = await configured(owner).begin({ redirectUri: redirectUri(deps, ctx), inviteToken: query.invite });
        const { name, options } = transactionCookie(ctx);
        ctx.cookies.set(name, transaction, { ...options, maxAge: SSO_TRANSACTION_SECONDS * 1000 });
        ctx.set('Cache-Control', 'no-store');
        ctx.status = 303;
        ctx.redirect(location);
        return {};
      },
    }),
    operation({
      operationId: 'finishSso',
      method: 'get',
      path: SSO_CALLBACK_PATH,
      summary: 'Where the OpenID provider sends the browser back: signs in (sets the session cookie) and redirects to the dashboard',
      tag: 'Session',
      auth: 'public',
      // The provider adds what it likes (iss, session_state, scope): every parameter goes to openid-client.
      query: z.looseObject({ state: z.string().max(512).optional(), code: z.string().max(4096).optional() }),
      status: 303,
      response: z.strictObject({}),
      errors: [403, 404, 429, 502],
      async handle({ meta, ctx }) {
        const sso = configured(owner);
        const { name, options } = transactionCookie(ctx);
        const transaction = ctx.cookies.get(name);
        ctx.cookies.set(name, null, options);
        ctx.set('Cache-Control', 'no-store');
        const callback = new URL(redirectUri(deps, ctx));
        callback.search = ctx.querystring;
        try {
          const { token, maxAgeSeconds } = await sso.finish({ callback, transaction }, meta);
          setSessionCookie(deps, ctx, token, maxAgeSeconds);
          ctx.status = 303;
          ctx.redirect(dashboardPage(deps, '') ?? '/');
        } catch (err) {
          const signIn = dashboardPage(deps, 'sign-in');
          if (!(err instanceof GatewayError) || err.status >= 500 || signIn === undefined) throw err;
          if (err.headers['Retry-After'] !== undefined) ctx.set('Retry-After', err.headers['Retry-After']);
          ctx.status = 303;
          ctx.redirect(`${signIn}?sso_error=${encodeURIComponent(err.code)}`);
        }
        return {};
      },
    }),
  ];
}
