/**
 * Second factors (owner/factors.ts, owner/second-factor.ts): TOTP enrollment, recovery codes,
 * passkeys, the passkey sign-in, and an account's requirement. Secrets leave only in the answers
 * made to hand them out: the TOTP secret at startTotpEnrollment, the recovery codes at
 * confirmTotpEnrollment and regenerateRecoveryCodes; never again.
 */
import { z } from 'zod';
import { SessionRequired } from '../../../errors/errors.js';
import type { OwnerServices } from '../../../owner/service.js';
import { operation, type Operation } from '../../owner/operation.js';
import type { Actor, Caller } from '../../../owner/types.js';
import type { OwnerRouteDeps } from './deps.js';
import { accountParams, actorOf, callerOf, idField, nameField, sessionSchema } from './schemas.js';
import { setDeviceCookie, setSessionCookie } from './sessions.js';
import { ceremonyIdField, ceremonySchema, passkeyAnswerSchema, registrationAnswerSchema, relyingParty } from './webauthn.js';

const codeField = z.string().min(1).max(32).describe('A current 6-digit code of the authenticator app, or an unused recovery code.');
const recoveryCodesSchema = z.strictObject({ recoveryCodes: z.array(z.string()).describe('Ten one-time recovery codes: shown this once, stored only as digests.') });

const passkeySchema = z.strictObject({
  id: z.string(),
  name: z.string(),
  createdAt: z.iso.datetime(),
  lastUsedAt: z.iso.datetime().optional(),
});

const secondFactorsSchema = z.strictObject({
  totp: z.strictObject({ enabled: z.boolean(), enabledAt: z.iso.datetime().optional() }),
  recoveryCodesLeft: z.number().int(),
  passkeys: z.array(passkeySchema),
  required: z.boolean().describe('A second factor is required of this owner (an account\'s or the deployment\'s setting).'),
});

const requirementSchema = z.strictObject({ required: z.boolean() });

type OwnerActor = Actor & { caller: Extract<Caller, { kind: 'owner' }> };

function ownerActor(input: Parameters<typeof actorOf>[0]): OwnerActor {
  const actor = actorOf(input);
  if (actor.caller.kind !== 'owner') throw new SessionRequired();
  return actor as OwnerActor;
}

function totpOperations(owner: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'getSecondFactors',
      method: 'get',
      path: '/owner/v1/session/second-factors',
      summary: 'The signed-in owner\'s second factors: TOTP, recovery codes left, passkeys, and whether one is required',
      tag: 'Second factors',
      auth: 'session',
      response: secondFactorsSchema,
      errors: [404],
      async handle({ caller }) {
        const who = callerOf(caller);
        if (who.kind !== 'owner') throw new SessionRequired();
        return owner.factors.describe(who);
      },
    }),
    operation({
      operationId: 'startTotpEnrollment',
      method: 'post',
      path: '/owner/v1/session/totp',
      summary: 'Start TOTP enrollment: a new secret, its otpauth URI and a QR code of it (shown once)',
      tag: 'Second factors',
      auth: 'session',
      response: z.strictObject({ secret: z.string(), uri: z.string(), qrCode: z.string().describe('The URI as a QR code: an SVG data URL.') }),
      errors: [403, 404, 409],
      handle: async (input) => owner.factors.startTotp(ownerActor(input)),
    }),
    operation({
      operationId: 'confirmTotpEnrollment',
      method: 'post',
      path: '/owner/v1/session/totp/confirmation',
      summary: 'Confirm TOTP enrollment with a code: TOTP is on, and ten recovery codes are answered once',
      tag: 'Second factors',
      auth: 'session',
      body: z.strictObject({ code: codeField }),
      response: recoveryCodesSchema,
      errors: [403, 404, 409],
      handle: async (input) => owner.factors.confirmTotp(ownerActor(input), input.body.code),
    }),
    operation({
      operationId: 'disableTotp',
      method: 'post',
      path: '/owner/v1/session/totp/disable',
      summary: 'Turn TOTP off (with a current code or a recovery code); the recovery codes go with it',
      tag: 'Second factors',
      auth: 'session',
      body: z.strictObject({ code: codeField }),
      response: secondFactorsSchema,
      errors: [403, 404, 409],
      handle: async (input) => owner.factors.disableTotp(ownerActor(input), input.body.code),
    }),
    operation({
      operationId: 'regenerateRecoveryCodes',
      method: 'post',
      path: '/owner/v1/session/recovery-codes',
      summary: 'New recovery codes for the old ones (with a current code or a recovery code)',
      tag: 'Second factors',
      auth: 'session',
      body: z.strictObject({ code: codeField }),
      response: recoveryCodesSchema,
      errors: [403, 404, 409],
      handle: async (input) => owner.factors.regenerateRecoveryCodes(ownerActor(input), input.body.code),
    }),
  ];
}

function passkeyOperations(owner: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  return [
    operation({
      operationId: 'startPasskeyRegistration',
      method: 'post',
      path: '/owner/v1/session/passkeys/options',
      summary: 'Start registering a passkey: the ceremony\'s id and its creation options',
      tag: 'Second factors',
      auth: 'session',
      response: ceremonySchema,
      errors: [403, 404, 409],
      async handle(input) {
        const { ceremonyId, options } = await owner.factors.startPasskeyRegistration(ownerActor(input), relyingParty(deps, input.ctx));
        return { ceremonyId, options: { ...options } };
      },
    }),
    operation({
      operationId: 'finishPasskeyRegistration',
      method: 'post',
      path: '/owner/v1/session/passkeys',
      summary: 'Register a passkey: the browser\'s answer to the ceremony, and a name for it',
      tag: 'Second factors',
      auth: 'session',
      body: z.strictObject({ ceremonyId: ceremonyIdField, name: nameField, response: registrationAnswerSchema }),
      status: 201,
      response: passkeySchema,
      errors: [403, 404, 409],
      handle: async (input) => owner.factors.finishPasskeyRegistration(ownerActor(input), relyingParty(deps, input.ctx), input.body),
    }),
    operation({
      operationId: 'deletePasskey',
      method: 'delete',
      path: '/owner/v1/session/passkeys/{passkeyId}',
      summary: 'Remove a passkey',
      tag: 'Second factors',
      auth: 'session',
      params: z.strictObject({ passkeyId: z.string().regex(/^[A-Za-z0-9_-]{1,1366}$/, 'expected a passkey id (base64url)') }),
      response: z.strictObject({ deleted: z.literal(true) }),
      errors: [403, 404, 409],
      async handle(input) {
        await owner.factors.removePasskey(ownerActor(input), input.params.passkeyId);
        return { deleted: true as const };
      },
    }),
    operation({
      operationId: 'startPasskeySignIn',
      method: 'post',
      path: '/owner/v1/session/passkey/options',
      summary: 'Start a passkey sign-in (passwordless, or as the second factor of signIn): the ceremony\'s id and its request options',
      tag: 'Session',
      auth: 'public',
      response: ceremonySchema,
      // Counted per address, though it checks no credential (a public operation without a body lists its 429).
      errors: [403, 429],
      async handle({ meta, ctx }) {
        const { ceremonyId, options } = await owner.sessions.startPasskeySignIn(relyingParty(deps, ctx), meta);
        return { ceremonyId, options: { ...options } };
      },
    }),
    operation({
      operationId: 'signInWithPasskey',
      method: 'post',
      path: '/owner/v1/session/passkey',
      summary: 'Sign in with a passkey alone (sets the session cookie)',
      tag: 'Session',
      auth: 'public',
      body: passkeyAnswerSchema,
      response: sessionSchema,
      errors: [401, 403],
      async handle({ body, meta, ctx }) {
        const { token, session, maxAgeSeconds, device } = await owner.sessions.signInWithPasskey({ ...body, ...relyingParty(deps, ctx) }, meta);
        setSessionCookie(deps, ctx, token, maxAgeSeconds);
        if (device !== undefined) setDeviceCookie(deps, ctx, device.cookie, device.maxAgeSeconds);
        return session;
      },
    }),
  ];
}

function requirementOperations(owner: OwnerServices): Operation[] {
  return [
    operation({
      operationId: 'getSecondFactorRequirement',
      method: 'get',
      path: '/owner/v1/accounts/{accountId}/second-factor-requirement',
      summary: 'Whether every owner of the account must use a second factor',
      tag: 'Second factors',
      auth: 'caller',
      params: accountParams,
      response: requirementSchema,
      errors: [403, 404],
      handle: async ({ caller, params }) => owner.factors.getAccountRequirement(callerOf(caller), params.accountId),
    }),
    operation({
      operationId: 'setSecondFactorRequirement',
      method: 'put',
      path: '/owner/v1/accounts/{accountId}/second-factor-requirement',
      summary: 'Require (or stop requiring) a second factor of every owner of the account',
      tag: 'Second factors',
      auth: 'caller',
      params: accountParams,
      body: requirementSchema,
      response: requirementSchema,
      errors: [403, 404, 409],
      handle: async (input) => owner.factors.setAccountRequirement(actorOf(input), input.params.accountId, input.body.required),
    }),
  ];
}

function resetOperation(owner: OwnerServices): Operation {
  return operation({
    operationId: 'resetMemberSecondFactors',
    method: 'delete',
    path: '/owner/v1/accounts/{accountId}/members/{ownerId}/second-factors',
    summary: 'Remove every second factor of a member who lost them all (operators only)',
    tag: 'Second factors',
    auth: 'caller',
    params: z.strictObject({ accountId: idField, ownerId: idField }),
    response: z.strictObject({ ownerId: z.string(), reset: z.literal(true) }),
    errors: [403, 404, 409],
    handle: async (input) => owner.factors.resetMemberFactors(actorOf(input), input.params.accountId, input.params.ownerId),
  });
}

export function secondFactorOperations(owner: OwnerServices, deps: OwnerRouteDeps): Operation[] {
  return [...totpOperations(owner), ...passkeyOperations(owner, deps), ...requirementOperations(owner), resetOperation(owner)];
}
