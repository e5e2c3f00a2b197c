/**
 * Single sign-on on the sign-in and invite pages (docs/dashboard.md, "Single sign-on and
 * sessions"): a "Sign in with …" link when the gateway has a provider (GET /owner/v1/sso), and
 * the refusal the gateway's callback sent back in `?sso_error=`. The link is a plain navigation
 * to /owner/v1/sso/start: the browser goes to the provider and comes back signed in.
 */
import type { PageContext } from '../app.js';
import { h, replace } from '../dom.js';
import type { SsoOptions } from '../types.js';

const REFUSALS: Record<string, string> = {
  sso_state_mismatch: 'That sign-in was not started in this browser, or took too long. Start it again.',
  sso_failed: 'The provider\'s answer could not be accepted. Start the sign-in again.',
  sso_email_unverified: 'Your provider has not verified your email address, so it cannot sign you in here.',
  sso_not_invited: 'No owner of this gateway has the email your provider gave. Ask an owner of an account for an invite, and accept it with single sign-on.',
  rate_limited: 'Too many sign-ins from here: wait a few minutes, then try again.',
};

/** Where the gateway's refusal of a single sign-on shows (nothing when there was none). */
export function ssoRefusal(ctx: PageContext): HTMLElement | null {
  const code = ctx.query.get('sso_error');
  if (code === null) return null;
  return h('div', { class: 'form-error', role: 'alert' }, REFUSALS[code] ?? 'Single sign-on did not succeed. Try again, or sign in with your password.');
}

/**
 * A slot that becomes "Sign in with <provider>" once the gateway says single sign-on is on;
 * `invite`: the sign-in accepts that invite (its token goes to the gateway only).
 */
export function ssoButton(ctx: PageContext, { invite }: { invite?: string } = {}): HTMLElement {
  const slot = h('div', { class: 'sso' });
  void ctx.api.get<SsoOptions>('/sso').then((options) => {
    if (!options.enabled || options.startPath === undefined) return;
    const href = invite === undefined ? options.startPath : `${options.startPath}?invite=${encodeURIComponent(invite)}`;
    replace(slot, h('p', null, h('a', { href, class: 'button' }, `${invite === undefined ? 'Sign in' : 'Accept'} with ${options.displayName ?? 'single sign-on'}`)));
  }, () => {
    // No button: the password form works as before.
  });
  return slot;
}
