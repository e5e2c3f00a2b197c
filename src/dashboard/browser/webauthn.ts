/**
 * Passkey ceremonies in the page, with @simplewebauthn/browser: the gateway makes and keeps each
 * challenge (owner/passkeys.ts), the page only hands the options to the authenticator and the
 * answer back with the ceremony's id.
 *
 * The library is the package's own ESM build, which the gateway serves from node_modules at
 * `assets/js/vendor/simplewebauthn-browser/` beside this script (src/dashboard/serve.ts). The
 * page has no bundler, so it is loaded by URL, relative to this module, when a ceremony first
 * needs it (a dynamic import of the same origin: no import map, whose inline script the CSP
 * would refuse); only its types are taken from the package at compile time.
 */
import type { Api } from './api.js';
import type { OwnerAnswer, OwnerBody } from './owner-api.generated.js';

type WebAuthnBrowser = typeof import('@simplewebauthn/browser');
type CreationOptions = Parameters<WebAuthnBrowser['startRegistration']>[0]['optionsJSON'];
type RequestOptions = Parameters<WebAuthnBrowser['startAuthentication']>[0]['optionsJSON'];

const LIBRARY = new URL('./vendor/simplewebauthn-browser/index.js', import.meta.url).href;
let library: Promise<WebAuthnBrowser> | undefined;

function webAuthnBrowser(): Promise<WebAuthnBrowser> {
  library ??= import(LIBRARY) as Promise<WebAuthnBrowser>;
  return library;
}

/** What signIn takes besides the email and password. */
export type SecondFactorInput = Pick<OwnerBody<'signIn'>, 'otp' | 'passkey'>;

type PasskeyAnswer = OwnerBody<'signInWithPasskey'>;

/** Runs a sign-in ceremony: the gateway's options, the authenticator's answer, for signIn's `passkey` or signInWithPasskey. */
export async function passkeyAnswer(api: Api): Promise<PasskeyAnswer> {
  const { ceremonyId, options } = await api.send<OwnerAnswer<'startPasskeySignIn'>>('POST', '/session/passkey/options');
  const { startAuthentication } = await webAuthnBrowser();
  const response = await startAuthentication({ optionsJSON: options as unknown as RequestOptions });
  return { ceremonyId, response: response as unknown as PasskeyAnswer['response'] };
}

/** Registers a passkey named `name` for the signed-in owner. */
export async function registerPasskey(api: Api, name: string): Promise<OwnerAnswer<'finishPasskeyRegistration'>> {
  const { ceremonyId, options } = await api.send<OwnerAnswer<'startPasskeyRegistration'>>('POST', '/session/passkeys/options');
  const { startRegistration } = await webAuthnBrowser();
  const response = await startRegistration({ optionsJSON: options as unknown as CreationOptions });
  return api.send<OwnerAnswer<'finishPasskeyRegistration'>>('POST', '/session/passkeys', { ceremonyId, name, response });
}
