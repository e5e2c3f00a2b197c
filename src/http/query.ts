/** Query parameters the strict way: a repeated parameter is ambiguous and refused with 400. */
import type { Context } from 'koa';
import { InvalidRequest } from '../errors/errors.js';

export function singleQueryParam(ctx: Context, name: string): string | undefined {
  const value = ctx.query[name];
  if (Array.isArray(value)) throw new InvalidRequest(`The query parameter "${name}" may be given once.`);
  return value;
}

const DECIMAL = /^[0-9]{1,10}$/;

/** A whole number in [min, max], `fallback` when absent; anything else is a 400 naming the parameter. */
export function integerQueryParam(ctx: Context, name: string, { fallback, min, max }: { fallback: number; min: number; max: number }): number {
  const text = singleQueryParam(ctx, name);
  if (text === undefined) return fallback;
  const value = DECIMAL.test(text) ? Number(text) : Number.NaN;
  if (!(value >= min && value <= max)) {
    throw new InvalidRequest(`The query parameter "${name}" must be a whole number from ${min} to ${max}.`);
  }
  return value;
}
