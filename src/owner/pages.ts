/**
 * Paging a listing held in one account document (keys, settings tokens): items in id order,
 * the cursor the last id of the page before, base64url-encoded so clients treat it as opaque.
 * A cursor that does not decode is the caller's mistake (400 naming `cursor`); one whose item
 * has since gone still pages on from where it was.
 */
import { InvalidRequest } from '../errors/errors.js';
import type { Page, PageQuery } from './types.js';

export function pageById<T extends { id: string }, V>(items: readonly T[], { limit, cursor }: PageQuery, view: (item: T) => V): Page<V> {
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  const sorted = [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const rest = after === undefined ? sorted : sorted.filter((item) => item.id > after);
  const page = rest.slice(0, limit);
  const more = rest.length > limit;
  return { items: page.map(view), ...(more ? { nextCursor: Buffer.from(page.at(-1)!.id, 'utf8').toString('base64url') } : {}) };
}

function decodeCursor(cursor: string): string {
  const id = /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  if (id === '' || Buffer.from(id, 'utf8').toString('base64url') !== cursor) {
    throw new InvalidRequest('cursor: not a cursor this listing gave out.', { field: 'cursor' });
  }
  return id;
}

/** A page of `items` (sorted by `keyOf`, ascending): those after the cursor, which is the last key of the page before. */
export function pageAfter<T>(items: readonly T[], keyOf: (item: T) => string, { limit, cursor }: PageQuery): Page<T> {
  const rest = cursor === undefined ? items : items.filter((item) => keyOf(item) > cursor);
  const page = rest.slice(0, limit);
  return rest.length > limit ? { items: page, nextCursor: keyOf(page.at(-1)!) } : { items: page };
}
