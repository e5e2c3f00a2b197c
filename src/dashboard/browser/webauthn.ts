/**
 * Passkey ceremonies in the page, with @simplewebauthn/browser (served from the package's own
 * ESM build: vendor/simplewebauthn-browser/index.d.ts says how): the gateway makes and keeps
 * each challenge (owner/passkeys.ts), the page only hands the options to the authenticator and
 * the answer back with the ceremony's id.
 */
import type { Api } from './api.js';
import { startAuthentication, startRegistration, type PublicKeyCredentialCreationOptionsJSON, type PublicKeyCredentialRequestOptionsJSON } from './vendor/simplewebauthn-browser/index.js';
import type { OwnerAnswer, OwnerBody } from './owner-api.generated.js';

/** What signIn takes besides the email and password. */
export type SecondFactorInput = Pick<OwnerBody<'signIn'>, 'otp' | 'passkey'>;

type PasskeyAnswer = OwnerBody<'signInWithPasskey'>;

/** Runs a sign-in ceremony: the gateway's options, the authenticator's answer, for signIn's `passkey` or signInWithPasskey. */
export async function passkeyAnswer(api: Api): Promise<PasskeyAnswer> {
  const { ceremonyId, options } = await api.send<OwnerAnswer<'startPasskeySignIn'>>('POST', '/session/passkey/options');
  const response = await startAuthentication({ optionsJSON: options as unknown as PublicKeyCredentialRequestOptionsJSON });
  return { ceremonyId, response: response as unknown as PasskeyAnswer['response'] };
}

/** Registers a passkey named `name` for the signed-in owner. */
export async function registerPasskey(api: Api, name: string): Promise<OwnerAnswer<'finishPasskeyRegistration'>> {
  const { ceremonyId, options } = await api.send<OwnerAnswer<'startPasskeyRegistration'>>('POST', '/session/passkeys/options');
  const response = await startRegistration({ optionsJSON: options as unknown as PublicKeyCredentialCreationOptionsJSON });
  return api.send<OwnerAnswer<'finishPasskeyRegistration'>>('POST', '/session/passkeys', { ceremonyId, name, response });
}
