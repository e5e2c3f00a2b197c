/**
 * The mail-based owner flows over HTTP: asking for a password reset and completing it, and
 * verifying an email (src/owner/password-reset.ts, src/owner/email-verification.ts). All three
 * are public: the mailed token is the credential. Tokens come in the body only (the links carry
 * them in the fragment, which the dashboard's page reads), never in a URL a log could keep.
 */
import { z } from 'zod';
import type { OwnerServices } from '../../../owner/service.js';
import { operation, type Operation } from '../../owner/operation.js';
import { emailField, newPasswordField, safeName } from './schemas.js';

export function mailOperations({ resets, verification }: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'requestPasswordReset',
      method: 'post',
      path: '/owner/v1/password-reset',
      summary: 'Ask for a password reset by mail: the same answer whether the email has an owner or not',
      tag: 'Session',
      auth: 'public',
      body: z.strictObject({ email: emailField }),
      status: 202,
      response: z.strictObject({ accepted: z.literal(true) }),
      errors: [],
      async handle({ body, meta }) {
        await resets.requestPasswordReset(body.email, meta);
        return { accepted: true as const };
      },
    }),
    operation({
      operationId: 'completePasswordReset',
      method: 'post',
      path: '/owner/v1/password-reset/complete',
      summary: 'Set a new password with the token of a reset mail: every session of the owner ends',
      tag: 'Session',
      auth: 'public',
      body: z.strictObject({ token: safeName(256), password: newPasswordField }),
      response: z.strictObject({ reset: z.literal(true) }),
      errors: [404, 409],
      async handle({ body, meta }) {
        await resets.completePasswordReset(body, meta);
        return { reset: true as const };
      },
    }),
    operation({
      operationId: 'verifyEmail',
      method: 'post',
      path: '/owner/v1/email-verification',
      summary: 'Verify an owner\'s email with the token of a verification mail',
      tag: 'Session',
      auth: 'public',
      body: z.strictObject({ token: safeName(256) }),
      response: z.strictObject({ emailVerifiedAt: z.iso.datetime() }),
      errors: [404, 409],
      handle: ({ body, meta }) => verification.verifyEmail(body, meta),
    }),
  ];
}
