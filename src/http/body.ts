/**
 * Reading the small bodies the gateway answers itself (sign-in, refresh). raw-body enforces
 * the byte limit while reading (and up front from Content-Length), so an oversized body costs
 * at most `limit` bytes of memory; its errors are turned into ours here. Proxied bodies never
 * come through this module: they are streamed, not read.
 */
import getRawBody from 'raw-body';
import type { Context } from 'koa';
import type { z } from 'zod';
import { InvalidRequest, PayloadTooLarge, UnsupportedMediaType } from '../errors/errors.js';

export type BodyKind = 'json' | 'form';

export interface ReadBodyOptions {
  limit: number;
  accept: readonly BodyKind[];
  /** Read a body sent without Content-Type as JSON (clients of /api/refresh do this). */
  untypedIsJson?: boolean;
  /** An empty body is no body: undefined, for a schema whose fields are all optional (and then it needs no Content-Type). */
  optional?: boolean;
}

/** The fields a route needs from its body: read (bounded), parsed, then validated against `schema`. */
export async function readFields<T extends z.ZodType>(ctx: Context, schema: T, options: ReadBodyOptions): Promise<z.infer<T>> {
  return validateFields(schema, await readObjectBody(ctx, options));
}

async function readObjectBody(ctx: Context, { limit, accept, untypedIsJson = false, optional = false }: ReadBodyOptions): Promise<Record<string, unknown> | undefined> {
  // An optional body is read first, so that an empty one needs no Content-Type (HTTP/2 may send
  // a body without Content-Length, so the headers alone cannot tell there is none).
  const early = optional ? await readRawBody(ctx, limit) : undefined;
  if (early !== undefined && early.trim() === '') return undefined;
  const kind = bodyKind(ctx, accept, untypedIsJson);
  const text = early ?? await readRawBody(ctx, limit);
  if (text.trim() === '') throw new InvalidRequest('A request body is required.');
  // `curl -d '{…}'` labels JSON as a form; a form never starts with "{", so read it as JSON.
  if (kind === 'form' && accept.includes('json') && text.trimStart().startsWith('{')) return parseJsonObject(text);
  return kind === 'json' ? parseJsonObject(text) : parseForm(text);
}

/** Reads and drops a body the route does not use, still bounded by `limit`. */
export async function discardBody(ctx: Context, limit: number): Promise<void> {
  await readRawBody(ctx, limit);
}

/**
 * The fields a route needs, or a 400 that names every field at fault in its sentence and the
 * first one as `field` (an unknown key is named by itself).
 */
export function validateFields<T extends z.ZodType>(schema: T, body: unknown, what = 'request body'): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message));
  const first = parsed.error.issues[0]!;
  const path = first.code === 'unrecognized_keys' ? [...first.path, first.keys[0]!] : first.path;
  const field = path.length > 0 ? path.join('.') : undefined;
  throw new InvalidRequest(`Invalid ${what}: ${problems.join('; ')}.`, field === undefined ? {} : { field });
}

function bodyKind(ctx: Context, accept: readonly BodyKind[], untypedIsJson: boolean): BodyKind {
  const encoding = ctx.get('content-encoding').toLowerCase();
  if (encoding !== '' && encoding !== 'identity') throw new UnsupportedMediaType('Compressed request bodies are not accepted.');
  const charset = ctx.request.charset;
  if (charset !== '' && charset.toLowerCase() !== 'utf-8' && charset.toLowerCase() !== 'utf8') {
    throw new UnsupportedMediaType('Request bodies must be UTF-8.');
  }
  const type = ctx.request.type;
  const kind: BodyKind | undefined =
    type === '' ? (untypedIsJson ? 'json' : undefined)
      : type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json')) ? 'json'
        : type === 'application/x-www-form-urlencoded' ? 'form'
          : undefined;
  if (kind === undefined || !accept.includes(kind)) {
    const names = accept.map((k) => (k === 'json' ? 'application/json' : 'application/x-www-form-urlencoded'));
    throw new UnsupportedMediaType(`Content-Type must be ${names.join(' or ')}.`);
  }
  return kind;
}

async function readRawBody(ctx: Context, limit: number): Promise<string> {
  try {
    return await getRawBody(ctx.req, { limit, length: ctx.get('content-length') || undefined, encoding: 'utf8' });
  } catch (err) {
    throw bodyReadError(err, limit);
  }
}

/** The body's bytes as sent, bounded by `limit`: for a signature over the raw body (http/routes/leaks.ts). */
export async function readRawBytes(ctx: Context, limit: number): Promise<Buffer> {
  try {
    return await getRawBody(ctx.req, { limit, length: ctx.get('content-length') || undefined });
  } catch (err) {
    throw bodyReadError(err, limit);
  }
}

/** raw-body's errors as ours (anything else as it came). */
function bodyReadError(err: unknown, limit: number): unknown {
  switch ((err as { type?: string }).type) {
    case 'entity.too.large':
      return new PayloadTooLarge(limit);
    case 'request.size.invalid':
      return new InvalidRequest('The body length does not match Content-Length.');
    case 'request.aborted':
      return new InvalidRequest('The request body was cut short.');
    default:
      return err;
  }
}

function parseJsonObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidRequest('The request body is not valid JSON.');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidRequest('The request body must be a JSON object.');
  return value as Record<string, unknown>;
}

function parseForm(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null);
  for (const [name, value] of new URLSearchParams(text)) {
    if (Object.hasOwn(out, name)) throw new InvalidRequest(`The form field "${name}" is repeated.`);
    out[name] = value;
  }
  return out;
}
