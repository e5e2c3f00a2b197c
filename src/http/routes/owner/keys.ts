/**
 * The owner API's API keys and resets: list, create (the secret in this answer only), read,
 * change, delete, roll the secret with an overlap, and reset tokens of one key or the whole
 * account (src/owner/keys.ts does the work).
 */
import { z } from 'zod';
import type { OwnerServices } from '../../../owner/service.js';
import { DESCRIPTION_MAX, ID, isoTime, scopeList } from '../../../state/owners/records.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { OwnerRouteDeps } from './deps.js';
import { accountParams, actorOf, callerOf, nameField, pageOf, pageQuery, safeText } from './schemas.js';

/** The longest overlap of a roll: 30 days. */
export const ROLL_OVERLAP_MAX_SECONDS = 2_592_000;


const keyParams = z.strictObject({ accountId: ID, keyId: ID });

export const keyView = z.strictObject({
  id: z.string(),
  apiKey: z.string(),
  name: z.string(),
  description: z.string(),
  enabled: z.boolean(),
  scopes: z.array(z.string()),
  createdAt: isoTime.optional(),
  previousValidUntil: isoTime.optional(),
  /** The last sign-in with the key, to within a few minutes; absent while it has none. */
  lastUsedAt: isoTime.optional().meta({ description: 'The last sign-in with the key (POST /api/signin), recorded at most every 5 minutes per gateway instance; absent while it has none.' }),
  certificateSha256: z.string().optional().meta({ description: 'The client certificate the key is bound to (RFC 8705): SHA-256 of its DER as 64 lowercase hex digits. Such a key signs in only over mTLS with that certificate, and its access tokens work only with it. Absent: unbound.' }),
  requireDpop: z.literal(true).optional().meta({ description: 'The key signs in and refreshes only with a DPoP proof (RFC 9449, docs/dpop.md), so all its tokens are DPoP-bound. Absent: a proof is the client\'s choice.' }),
  compromisedAt: isoTime.optional().meta({ description: 'When a secret-scanning report named the key\'s secret (docs/leaks.md): the key signs in no more until its secret is rolled (POST …/roll clears it). Absent: none did.' }),
});

const requireDpopField = z.boolean().meta({ description: 'true: the key signs in and refreshes only with a DPoP proof (docs/dpop.md); turning it on stops the key\'s tokens issued so far.' });

/** A certificate's SHA-256 as openssl or a browser prints it: 64 hex digits, either case, the bytes optionally separated by ":". */
const certificateSha256Field = z.string().regex(/^(?:[0-9A-Fa-f]{64}|(?:[0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2})$/, 'expected a SHA-256 fingerprint: 64 hex digits, optionally as 32 ":"-separated pairs')
  .meta({ description: 'Binds the key to one client certificate (docs/tls.md, "Client certificates"): the SHA-256 of its DER, as `openssl x509 -noout -fingerprint -sha256` prints it or as 64 hex digits.' });
const createdKey = z.strictObject({ key: keyView, apiSecret: z.string().regex(/^[a-z][a-z0-9]{0,15}sk_/).meta({ description: '`<tokens.prefix>sk_…` (`gwsk_…` by default).' }) });
export const resetView = z.strictObject({
  scope: z.enum(['key', 'account']),
  accountId: z.string(),
  keyId: z.string().optional(),
  resetAt: isoTime,
});


export function keyOperations(owner: OwnerServices, _deps: OwnerRouteDeps): Operation[] {
  const { keys } = owner;
  const tag = 'API keys';
  return [
    operation({
      operationId: 'listKeys', method: 'get', path: '/owner/v1/accounts/{accountId}/keys', tag, auth: 'caller',
      summary: 'List the account\'s API keys (never a secret or its digest).',
      params: accountParams, query: pageQuery,
      response: pageOf(keyView),
      errors: [404],
      handle: ({ params, query, caller }) => keys.list(callerOf(caller), params.accountId, query),
    }),
    operation({
      operationId: 'createKey', method: 'post', path: '/owner/v1/accounts/{accountId}/keys', tag, auth: 'caller',
      summary: 'Create an API key; its secret is in this answer only.',
      params: accountParams,
      body: z.strictObject({ name: nameField, description: safeText(DESCRIPTION_MAX).optional(), scopes: scopeList.optional(), certificateSha256: certificateSha256Field.optional(), requireDpop: requireDpopField.optional() }),
      status: 201, response: createdKey, errors: [404, 409],
      handle: ({ params, body, caller, meta }) => keys.create(actorOf({ caller, meta }), params.accountId, body),
    }),
    operation({
      operationId: 'getKey', method: 'get', path: '/owner/v1/accounts/{accountId}/keys/{keyId}', tag, auth: 'caller',
      summary: 'Read one API key.',
      params: keyParams, response: keyView, errors: [404],
      handle: ({ params, caller }) => keys.get(callerOf(caller), params.accountId, params.keyId),
    }),
    operation({
      operationId: 'updateKey', method: 'patch', path: '/owner/v1/accounts/{accountId}/keys/{keyId}', tag, auth: 'caller',
      summary: 'Rename, describe, disable or enable an API key, change its scopes, or bind it to a client certificate (null unbinds it). Disabling it, taking a scope away or binding it stops its access tokens at once.',
      params: keyParams,
      body: z.strictObject({ name: nameField.optional(), description: safeText(DESCRIPTION_MAX).optional(), enabled: z.boolean().optional(), scopes: scopeList.optional(), certificateSha256: certificateSha256Field.nullable().optional(), requireDpop: requireDpopField.optional() }),
      response: keyView, errors: [404, 409],
      handle: ({ params, body, caller, meta }) => keys.update(actorOf({ caller, meta }), params.accountId, params.keyId, body),
    }),
    operation({
      operationId: 'deleteKey', method: 'delete', path: '/owner/v1/accounts/{accountId}/keys/{keyId}', tag, auth: 'caller',
      summary: 'Delete an API key; its access tokens stop at once.',
      params: keyParams, response: z.strictObject({ id: z.string(), deleted: z.literal(true) }), errors: [404, 409],
      handle: ({ params, caller, meta }) => keys.remove(actorOf({ caller, meta }), params.accountId, params.keyId),
    }),
    operation({
      operationId: 'rollKey', method: 'post', path: '/owner/v1/accounts/{accountId}/keys/{keyId}/roll', tag, auth: 'caller',
      summary: 'Give an API key a new secret (in this answer only); the old one still signs in for overlapSeconds.',
      params: keyParams,
      body: z.strictObject({ overlapSeconds: z.number().int().min(0).max(ROLL_OVERLAP_MAX_SECONDS) }),
      response: createdKey, errors: [404, 409],
      handle: ({ params, body, caller, meta }) => keys.roll(actorOf({ caller, meta }), params.accountId, params.keyId, body),
    }),
    operation({
      operationId: 'resetKey', method: 'post', path: '/owner/v1/accounts/{accountId}/keys/{keyId}/reset', tag, auth: 'caller',
      summary: 'Stop every token issued so far to this API key (as POST /api/reset with scope key).',
      params: keyParams, response: resetView, errors: [404, 409],
      handle: ({ params, caller, meta }) => keys.resetKey(actorOf({ caller, meta }), params.accountId, params.keyId),
    }),
    operation({
      operationId: 'resetAccount', method: 'post', path: '/owner/v1/accounts/{accountId}/reset', tag, auth: 'caller',
      summary: 'Stop every token of every key of the account, and revoke all its API settings tokens.',
      params: accountParams, response: resetView, errors: [404, 409],
      handle: ({ params, caller, meta }) => keys.resetAccount(actorOf({ caller, meta }), params.accountId),
    }),
  ];
}
