/**
 * One owner-API operation, described once: method, path, who may call it, the zod schemas of
 * its path parameters, query and body, the schema of its answer's `message`, the error
 * statuses it documents, and its handler. The router (http/owner/register.ts) serves it from
 * this, and the OpenAPI document (http/openapi/) describes it from the same object, so the
 * description cannot drift from what is validated and answered.
 */
import type { Context } from 'koa';
import type { z } from 'zod';
import type { Caller, RequestMeta } from '../../owner/types.js';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * `public`: anyone (sign-in, accepting an invite); `caller`: an owner session or an operator
 * token; `session`: an owner session only (the session's own routes). Operator-only operations
 * are `caller` and refused 403 by the service, so an owner learns nothing more than that.
 */
export type OperationAuth = 'public' | 'caller' | 'session';

type AnyObject = z.ZodType<Record<string, unknown>>;

export interface OperationInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** Set unless `auth` is `public`. */
  caller: Caller | undefined;
  /** The session token presented, on `session` operations (sign-out, password change). */
  sessionToken: string | undefined;
  meta: RequestMeta;
  ctx: Context;
}

export interface Operation<P extends AnyObject = AnyObject, Q extends AnyObject = AnyObject, B extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  operationId: string;
  method: HttpMethod;
  /** OpenAPI spelling: `/owner/v1/accounts/{accountId}`. */
  path: string;
  summary: string;
  tag: string;
  auth: OperationAuth;
  params?: P;
  query?: Q;
  /** Absent: the operation takes no body (one sent anyway is read, bounded, and dropped). */
  body?: B;
  /**
   * 201 for creations; 202 for what is done after the answer (a reset mail); 303 for a browser
   * navigation (single sign-on), whose handler sets the Location itself and whose answer has no
   * envelope (`response` then describes nothing sent).
   */
  status?: 200 | 201 | 202 | 303;
  /** The answer's `message`. */
  response: R;
  /** Error statuses this operation can answer besides those every operation can (400, 401, 413, 415, 429, 503). */
  errors: readonly number[];
  handle(input: OperationInput<z.infer<P>, z.infer<Q>, z.infer<B>>): Promise<z.infer<R>>;
}

/** Declares an operation with its types inferred from its schemas. */
export function operation<P extends AnyObject, Q extends AnyObject, B extends z.ZodType, R extends z.ZodType>(spec: Operation<P, Q, B, R>): Operation {
  return spec as unknown as Operation;
}
