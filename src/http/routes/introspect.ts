/**
 * POST /api/introspect: token introspection (RFC 7662). A form body (§2.1) with `token` and an
 * optional `token_type_hint` (read, not needed: auth/introspection.ts). The caller is a backend
 * with a bearer token whose key has the scope `introspect` (§2.1 wants the caller authorised, so
 * the endpoint is no token-scanning oracle, §4): 401 without a good token and 403
 * insufficient_scope without the scope, in the envelope with RFC 6750's challenge, as every
 * bearer-protected route of the gateway answers. Its calls count against the `introspect`
 * route quota (limits.rules may name it).
 *
 * The answer is RFC 7662 §2.2's JSON object itself, not the envelope, since introspection
 * clients read `active` at the top. `Cache-Control: no-store` (the router's, for every token
 * answer): a backend that caches an answer anyway must keep it no longer than its `exp` and
 * accept that a revocation reaches it only when its copy ends (§4; docs/api.md says so).
 */
import type { Context } from 'koa';
import { z } from 'zod';
import type { Identity } from '../../auth/bearer.js';
import type { Introspection } from '../../auth/introspection.js';
import { InsufficientScope } from '../../errors/errors.js';
import { readFields } from '../body.js';

export const INTROSPECT_PATH = '/api/introspect';
/** The scope a caller's key needs to introspect tokens. */
export const INTROSPECT_SCOPE = 'introspect';

const IntrospectBody = z.object({
  token: z.string().min(1).max(16_384),
  token_type_hint: z.string().max(256).optional(),
});

/** After the bearer guard: the caller's key must have the scope `introspect`. */
export function requireIntrospectScope() {
  return async function requireIntrospectScope(ctx: Context, next: () => Promise<void>): Promise<void> {
    if (!(ctx.state.identity as Identity).scopes.includes(INTROSPECT_SCOPE)) throw new InsufficientScope(INTROSPECT_SCOPE);
    await next();
  };
}

export function introspectToken({ introspection, bodyLimitBytes }: { introspection: Introspection; bodyLimitBytes: number }) {
  return async function introspectToken(ctx: Context): Promise<void> {
    const { token } = await readFields(ctx, IntrospectBody, { limit: bodyLimitBytes, accept: ['form'] });
    ctx.body = await introspection.introspect(token);
  };
}
