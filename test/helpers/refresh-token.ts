/**
 * Refresh tokens as tests take them apart and forge them: `<handle>.<secret>`, the handle being
 * base64url of the JSON array [accountId, keyId, familyId, tokenId] (src/auth/refresh.ts).
 * Decoded here on its own, so a test does not take the product's parser's word for the layout.
 */
import assert from 'node:assert/strict';

export interface RefreshHandle {
  accountId: string;
  keyId: string;
  familyId: string;
  tokenId: string;
}

/** The ids a refresh token's handle names; fails the test when it is not four strings. */
export function refreshHandleOf(refreshToken: string): RefreshHandle {
  const ids: unknown = JSON.parse(Buffer.from(refreshToken.split('.')[0]!, 'base64url').toString('utf8'));
  assert.ok(Array.isArray(ids) && ids.length === 4 && ids.every((id) => typeof id === 'string'), `a refresh-token handle names four ids: ${JSON.stringify(ids)}`);
  const [accountId, keyId, familyId, tokenId] = ids as [string, string, string, string];
  return { accountId, keyId, familyId, tokenId };
}

/** The secret part of a refresh token. */
export function refreshSecretOf(refreshToken: string): string {
  return refreshToken.slice(refreshToken.indexOf('.') + 1);
}

/** A refresh token with this handle and secret, spelt as the gateway spells its own. */
export function refreshTokenOf({ accountId, keyId, familyId, tokenId }: RefreshHandle, secret: string): string {
  return `${Buffer.from(JSON.stringify([accountId, keyId, familyId, tokenId])).toString('base64url')}.${secret}`;
}
