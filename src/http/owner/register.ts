/**
 * Serves the owner API's operations (http/owner/operation.ts) on the gateway's router, under
 * /owner/v1. Each request goes: origin check → caller → CSRF (in resolveCaller) → the
 * initial-password gate → path, query and body validated by the operation's schemas → handler →
 * `{success:true, message}`. The whole /owner tree is the gateway's own: a path no operation
 * serves is a 404 (or a 405) here, never passed to a configured route.
 */
import type { IncomingMessage } from 'node:http';
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { z } from 'zod';
import type { Config } from '../../config/schema.js';
import { ok } from '../../errors/envelope.js';
import { InvalidAdminToken, MethodNotAllowed, NotFound } from '../../errors/errors.js';
import type { RateLimits } from '../../limits/rate-limits.js';
import { discardBody, readFields, validateFields } from '../body.js';
import type { Caller, SessionResolver } from '../../owner/types.js';
import { checkOrigin, deviceCookieName, requirePasswordChanged, requireSecondFactorEnrolled, resolveCaller, servedOverTls, type ResolvedCaller } from './caller.js';
import type { Operation } from './operation.js';

export const OWNER_PREFIX = '/owner/v1';
/** Every path under it is the gateway's own (app.ts's own-path check relies on it). */
export const OWNER_TREE = '/owner';

export interface OwnerApiDeps {
  config: Pick<Config, 'owner'>;
  operations: readonly Operation[];
  sessions: SessionResolver;
  limits: RateLimits;
  clientAddress: (req: IncomingMessage) => string;
  /** Throws NotFound unless the caller may reach the account (owner/access.ts): a change is counted against an account only then. */
  requireReachable: (caller: Caller, accountId: string) => Promise<void>;
}

/** Operations a caller with an operator-set initial password may still use. */
const BEFORE_PASSWORD_CHANGE = new Set(['getSession', 'deleteSession', 'changePassword', 'getSecondFactors']);

/**
 * Operations an owner a second factor is required of may use before having one: the session's
 * own, the password change, and the enrollment (http/routes/owner/second-factors.ts).
 */
const BEFORE_SECOND_FACTOR = new Set([...BEFORE_PASSWORD_CHANGE, 'getSecondFactorRequirement', 'startTotpEnrollment', 'confirmTotpEnrollment', 'startPasskeyRegistration', 'finishPasskeyRegistration']);

/** Changes never refused by the change limits: an owner over them can still end their session. */
const NOT_COUNTED_AS_CHANGE = new Set(['deleteSession']);

/**
 * The owner's changes are limited (limits.owner): every operation with a caller that is not a
 * read, decided here once for all of them. Public operations (sign-in, accepting an invite)
 * have limits of their own; an operator's admin token is the operator's tooling, not counted.
 */
function isCountedChange(op: Operation): boolean {
  return op.method !== 'get' && op.auth !== 'public' && !NOT_COUNTED_AS_CHANGE.has(op.operationId);
}

export function registerOwnerApi(router: Router, { config, operations, sessions, limits, clientAddress, requireReachable }: OwnerApiDeps): void {
  const owner = config.owner;
  for (const op of operations) {
    const path = op.path.replaceAll(/\{(\w+)\}/g, ':$1');
    router[op.method](op.operationId, path, async (ctx: Context) => {
      checkOrigin(ctx, owner.publicOrigin);
      let resolved: ResolvedCaller | undefined;
      if (op.auth !== 'public') {
        resolved = await resolveAdminOrSession(ctx, { sessions, owner, limits, clientAddress });
        if (op.auth === 'session' && resolved.caller.kind !== 'owner') throw new NotFound('Operators have no session.');
        if (!BEFORE_PASSWORD_CHANGE.has(op.operationId)) requirePasswordChanged(resolved);
        if (!BEFORE_SECOND_FACTOR.has(op.operationId)) requireSecondFactorEnrolled(resolved);
      }
      const params = op.params === undefined ? {} : validateFields(op.params, ctx.params, 'path');
      if (resolved?.caller.kind === 'owner' && isCountedChange(op)) await limitChange(ctx, resolved.caller, params, { limits, requireReachable });
      const query = op.query === undefined ? {} : validateFields(op.query, { ...ctx.query }, 'query');
      let body: unknown;
      if (op.body !== undefined) body = await readFields(ctx, op.body as z.ZodType, { limit: owner.bodyLimitBytes, accept: ['json'], optional: op.body.safeParse(undefined).success });
      else await discardBody(ctx, owner.bodyLimitBytes);
      const message = await op.handle({
        params,
        query,
        body,
        caller: resolved?.caller,
        sessionToken: resolved?.sessionToken,
        meta: { ip: clientAddress(ctx.req), requestId: String(ctx.state.requestId ?? ''), deviceCookie: ctx.cookies.get(deviceCookieName(servedOverTls(owner, ctx))), userAgent: ctx.get('user-agent') },
        ctx,
      });
      // A navigation: the handler has set the status and Location (ctx.redirect).
      if (op.status === 303) return;
      ctx.status = op.status ?? 200;
      ctx.body = ok(message as object);
    });
  }
  // Last: whatever else is under /owner. A path served under other methods is a 405.
  router.all(OWNER_TREE, answerOwnerUnmatched);
  router.all(`${OWNER_TREE}/{*rest}`, answerOwnerUnmatched);
}

/**
 * An admin token is a secret guessed like an API secret: each presented one is counted before it
 * is compared, against its own per-address limit (`limits.adminToken`), apart from owner and
 * API-key sign-ins: a script with a stale token behind an office NAT then locks out operator
 * tokens from there, not the owners' dashboard. A right token is an operator at work (the
 * dashboard makes several calls a page), not a guess: nothing of its attempt is kept, so no
 * amount of use locks them out.
 */
async function resolveAdminOrSession(ctx: Context, { sessions, owner, limits, clientAddress }: {
  sessions: SessionResolver;
  owner: Config['owner'];
  limits: RateLimits;
  clientAddress: (req: IncomingMessage) => string;
}): Promise<ResolvedCaller> {
  const authorization = ctx.get('authorization');
  if (authorization === '') return resolveCaller(ctx, { sessions, config: owner });
  const attempt = await limits.adminToken(clientAddress(ctx.req));
  try {
    const resolved = await resolveCaller(ctx, { sessions, config: owner });
    await attempt.authorizedCall();
    return resolved;
  } catch (err) {
    if (!(err instanceof InvalidAdminToken)) await attempt.undecided();
    throw err;
  }
}

/**
 * Counts an owner's change against the change limits, before its body is read or anything is
 * done; over a limit, 429 with Retry-After and the RateLimit fields, as every limit answers.
 * The account a path names is counted only once the owner is found to reach it (else 404, as
 * the operation would answer): otherwise an owner could spend another account's allowance by
 * sending changes to its id.
 */
async function limitChange(ctx: Context, caller: Extract<Caller, { kind: 'owner' }>, params: Record<string, unknown>, { limits, requireReachable }: Pick<OwnerApiDeps, 'limits' | 'requireReachable'>): Promise<void> {
  const accountId = typeof params.accountId === 'string' ? params.accountId : undefined;
  if (accountId !== undefined) await requireReachable(caller, accountId);
  const headers = await limits.ownerWrite(caller.ownerId, accountId);
  if (headers !== undefined) ctx.set(headers);
}

async function answerOwnerUnmatched(ctx: Context): Promise<void> {
  const matched = (ctx as Context & { matched?: { methods: string[]; path: string }[] }).matched ?? [];
  const allowed = [...new Set(matched.filter((layer) => layer.path !== `${OWNER_TREE}/{*rest}` && layer.path !== OWNER_TREE).flatMap((layer) => layer.methods))];
  if (allowed.length > 0) throw new MethodNotAllowed(allowed.join(', '));
  throw new NotFound();
}
