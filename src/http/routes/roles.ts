/**
 * GET /api/roles: one page of the caller's account's roles (interface §4.4), in the listing
 * representation existing clients parse: `pages` a string, `id` a number, `public` 0 or 1.
 */
import type { Context } from 'koa';
import type { Identity } from '../../auth/bearer.js';
import { ok } from '../../errors/envelope.js';
import { InvalidRequest } from '../../errors/errors.js';
import type { Directory, RolePage } from '../../state/directory/store.js';
import { integerQueryParam, singleQueryParam } from '../query.js';

/** Far past any real listing, low enough that offset = (page - 1) * limit stays exact. */
export const MAX_PAGE = 1_000_000;
export const MAX_NAME_SEARCH_LENGTH = 100;

export function listRoles({ directory, defaultLimit, maxLimit }: { directory: Directory; defaultLimit: number; maxLimit: number }) {
  /**
   * The answer's JSON per page the directory returned. A cached page is one object, the same on
   * every hit, and its answer depends only on it and `limit` (which `pages` is counted in): it
   * is written once, not on every request. Entries go when the cache lets the page go.
   */
  const answers = new WeakMap<RolePage, { limit: number; json: string }>();
  return async function listRoles(ctx: Context): Promise<void> {
    const page = integerQueryParam(ctx, 'page', { fallback: 1, min: 1, max: MAX_PAGE });
    const limit = integerQueryParam(ctx, 'limit', { fallback: defaultLimit, min: 1, max: maxLimit });
    const name = singleQueryParam(ctx, 'name');
    if (name !== undefined && name.length > MAX_NAME_SEARCH_LENGTH) {
      throw new InvalidRequest(`The query parameter "name" may be at most ${MAX_NAME_SEARCH_LENGTH} characters.`);
    }

    const { accountId } = ctx.state.identity as Identity;
    const rolePage = await directory.listRoles(accountId, {
      offset: (page - 1) * limit,
      limit,
      ...(name === undefined || name === '' ? {} : { nameContains: name }),
    });
    let answer = answers.get(rolePage);
    if (answer?.limit !== limit) {
      answer = { limit, json: JSON.stringify(ok(listing(rolePage, limit))) };
      answers.set(rolePage, answer);
    }
    ctx.type = 'json';
    ctx.body = answer.json;
  };
}

function listing({ items, total }: RolePage, limit: number) {
  return {
    pages: String(Math.ceil(total / limit)),
    items: items.map((role) => ({
      id: role.id,
      slug: role.slug,
      name: role.name,
      description: role.description,
      public: role.public ? 1 : 0,
    })),
    total,
  };
}
