/**
 * The owner API's API settings tokens: list, create (the token in this answer only), read and
 * revoke (src/owner/settings-tokens.ts does the work; auth/settings-tokens.ts accepts them).
 */
import { z } from 'zod';
import type { OwnerServices } from '../../../owner/service.js';
import { ID, isoTime, scopeList } from '../../../state/owners/records.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';
import { accountParams, actorOf, callerOf, nameField as name, pageOf, pageQuery } from './schemas.js';

/** The longest lifetime a token can be asked for: 10 years (owner.settingsTokenMaxDays may cap it further). */
export const SETTINGS_TOKEN_MAX_SECONDS = 3650 * 86_400;

const tokenParams = z.strictObject({ accountId: ID, tokenId: ID });

export const settingsTokenView = z.strictObject({
  id: z.string(),
  name: z.string(),
  start: z.string(),
  scopes: z.array(z.string()),
  createdAt: isoTime,
  expiresAt: isoTime.optional(),
  lastUsedAt: isoTime.optional(),
  revokedAt: isoTime.optional(),
  status: z.enum(['active', 'revoked', 'expired']),
});

export function settingsTokenOperations(owner: OwnerServices, _deps: OwnerRouteDeps): Operation[] {
  const { settingsTokens } = owner;
  const tag = 'API settings tokens';
  return [
    operation({
      operationId: 'listSettingsTokens', method: 'get', path: '/owner/v1/accounts/{accountId}/settings-tokens', tag, auth: 'caller',
      summary: 'List the account\'s API settings tokens, with when each was created, last used and expires.',
      params: accountParams, query: pageQuery,
      response: pageOf(settingsTokenView),
      errors: [404],
      handle: ({ params, query, caller }) => settingsTokens.list(callerOf(caller), params.accountId, query),
    }),
    operation({
      operationId: 'createSettingsToken', method: 'post', path: '/owner/v1/accounts/{accountId}/settings-tokens', tag, auth: 'caller',
      summary: 'Create an API settings token (a long-lived access token); the token is in this answer only.',
      params: accountParams,
      body: z.strictObject({ name, scopes: scopeList.optional(), expiresInSeconds: z.number().int().min(60).max(SETTINGS_TOKEN_MAX_SECONDS).optional() }),
      status: 201,
      response: z.strictObject({ settingsToken: settingsTokenView, token: z.string().regex(/^[a-z][a-z0-9]{0,15}st_/).meta({ description: '`<tokens.prefix>st_…` (`gwst_…` by default).' }) }),
      errors: [404, 409],
      handle: ({ params, body, caller, meta }) => settingsTokens.create(actorOf({ caller, meta }), params.accountId, body),
    }),
    operation({
      operationId: 'getSettingsToken', method: 'get', path: '/owner/v1/accounts/{accountId}/settings-tokens/{tokenId}', tag, auth: 'caller',
      summary: 'Read one API settings token (never the token itself).',
      params: tokenParams, response: settingsTokenView, errors: [404],
      handle: ({ params, caller }) => settingsTokens.get(callerOf(caller), params.accountId, params.tokenId),
    }),
    operation({
      operationId: 'revokeSettingsToken', method: 'delete', path: '/owner/v1/accounts/{accountId}/settings-tokens/{tokenId}', tag, auth: 'caller',
      summary: 'Revoke an API settings token: refused on every instance at once, for good.',
      params: tokenParams, response: settingsTokenView, errors: [404, 409],
      handle: ({ params, caller, meta }) => settingsTokens.revoke(actorOf({ caller, meta }), params.accountId, params.tokenId),
    }),
  ];
}
