/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers) as the gateway sends them:
 *
 *   RateLimit-Policy: "roles-account-1s";q=100;w=1, "roles-account-60s";q=3000;w=60
 *   RateLimit: "roles-account-1s";r=37;t=1, "roles-account-60s";r=0;t=42
 *
 * Read leniently: an item without `r` and `t` is left out, an unparsable field is no field.
 */
import type { RateLimitInfo, RateLimitItem } from './types.js';

const ITEM = /"((?:[^"\\]|\\.)*)"((?:\s*;\s*[a-z][a-z0-9_-]*=[^,;]*)*)/g;
const PARAM = /;\s*([a-z][a-z0-9_-]*)=\s*([^,;\s]*)/g;

function parseList(field: string): Map<string, Record<string, number>> {
  const items = new Map<string, Record<string, number>>();
  for (const [, name, params] of field.matchAll(ITEM)) {
    const values: Record<string, number> = {};
    for (const [, key, value] of (params ?? '').matchAll(PARAM)) {
      const n = Number(value);
      if (key !== undefined && value !== undefined && /^\d+$/.test(value) && Number.isSafeInteger(n)) values[key] = n;
    }
    items.set(name ?? '', values);
  }
  return items;
}

/** The RateLimit fields of an answer, or undefined when it has none. */
export function parseRateLimit(headers: Headers): RateLimitInfo | undefined {
  const state = headers.get('ratelimit');
  if (state === null) return undefined;
  const policies = parseList(headers.get('ratelimit-policy') ?? '');
  const items: RateLimitItem[] = [];
  for (const [policy, { r, t }] of parseList(state)) {
    if (r === undefined || t === undefined) continue;
    const item: RateLimitItem = { policy, remaining: r, resetSeconds: t };
    const p = policies.get(policy);
    if (p?.q !== undefined) item.quota = p.q;
    if (p?.w !== undefined) item.windowSeconds = p.w;
    items.push(item);
  }
  const tightest = items.reduce<RateLimitItem | undefined>((best, item) =>
    best === undefined || item.remaining < best.remaining || (item.remaining === best.remaining && item.resetSeconds > best.resetSeconds) ? item : best, undefined);
  return tightest === undefined ? undefined : { items, tightest };
}

/** Retry-After (delay-seconds or an HTTP-date) in milliseconds from `now`; undefined if absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP date starts with a day name; Date.parse would also read '-5' or '10.5' as dates
  // long past, and the call would be retried at once.
  if (!/^[A-Za-z]{3,9},? /.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
