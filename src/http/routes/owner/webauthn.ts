/**
 * What the passkey operations take and answer (http/routes/owner/second-factors.ts, and signIn's
 * `passkey`): the JSON @simplewebauthn/browser makes of a credential, base64url throughout, and
 * the relying party a ceremony is for: the deployment's public origin, else the request's own
 * (as the CSRF check reads it, http/owner/caller.ts).
 */
import type { Context } from 'koa';
import { z } from 'zod';
import { InvalidRequest } from '../../../errors/errors.js';
import type { OwnerRouteDeps } from './deps.js';

const base64url = (max: number) => z.string().max(max).regex(/^[A-Za-z0-9_-]*$/, 'expected base64url');
const credentialId = base64url(1366).min(1);
const extensionResults = z.record(z.string().max(64), z.unknown()).describe('The client\'s extension outputs, as the browser gave them.');

export const ceremonyIdField = z.string().regex(/^[0-9A-Za-z]{32}$/, 'expected the ceremonyId the start of the ceremony answered');

/** A browser's answer to a sign-in ceremony (AuthenticationResponseJSON). */
export const passkeyAnswerSchema = z.strictObject({
  ceremonyId: ceremonyIdField,
  response: z.strictObject({
    id: credentialId,
    rawId: credentialId,
    type: z.literal('public-key'),
    response: z.strictObject({
      clientDataJSON: base64url(8192),
      authenticatorData: base64url(8192),
      signature: base64url(2048),
      userHandle: base64url(512).optional(),
    }),
    authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
    clientExtensionResults: extensionResults,
  }),
});

/** A browser's answer to a registration ceremony (RegistrationResponseJSON). */
export const registrationAnswerSchema = z.strictObject({
  id: credentialId,
  rawId: credentialId,
  type: z.literal('public-key'),
  response: z.strictObject({
    clientDataJSON: base64url(8192),
    attestationObject: base64url(16384),
    authenticatorData: base64url(8192).optional(),
    transports: z.array(z.enum(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb'])).max(8).optional(),
    publicKeyAlgorithm: z.number().int().optional(),
    publicKey: base64url(4096).optional(),
  }),
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
  clientExtensionResults: extensionResults,
});

/** What a ceremony's start answers: its id (to send back with the answer) and the options for navigator.credentials. */
export const ceremonySchema = z.strictObject({
  ceremonyId: z.string(),
  options: z.record(z.string(), z.unknown()).describe('PublicKeyCredentialCreationOptionsJSON or PublicKeyCredentialRequestOptionsJSON, for @simplewebauthn/browser.'),
});

export function relyingParty(deps: OwnerRouteDeps, ctx: Context): { origin: string } {
  const origin = deps.config.owner.publicOrigin ?? `${ctx.protocol}://${ctx.host}`;
  // A Host header that makes no origin (the configured one always does) names no relying party.
  if (!URL.canParse(origin) || new URL(origin).hostname === '') throw new InvalidRequest('The Host header names no host a passkey could be for.');
  return { origin };
}
