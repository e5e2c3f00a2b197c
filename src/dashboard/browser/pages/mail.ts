/**
 * The pages of the mail-based flows: asking for a password reset, choosing a new password from
 * the reset link, and the email verification link's landing page.
 *
 * A mailed token is read from the link's fragment (which no server ever sees), taken out of the
 * address bar and the history entry at once, and held in memory until it is posted, as the
 * invite page does (sign-in.ts). test/dashboard/mail-pages.test.ts walks these pages in Chromium.
 */
import { ApiError } from '../api.js';
import type { PageContext, PageDef } from '../app.js';
import { h } from '../dom.js';
import { form, textField, valueOf } from '../forms.js';
import { heading } from '../ui.js';

const PASSWORD_HINT = '15 to 256 characters; a long passphrase is best.';

/** Tokens read from links, by prefix, kept here (not in the address bar) until used. */
const taken = new Map<string, string>();

/** Takes a `prefix` token out of the link's fragment and out of the address bar and history entry. */
function takeToken(prefix: string): string | undefined {
  const fragment = location.hash.slice(1);
  if (fragment !== '') {
    history.replaceState(history.state, '', location.pathname + location.search);
    if (fragment.startsWith(prefix) && /^[A-Za-z0-9_.:@-]+$/.test(fragment)) taken.set(prefix, fragment);
  }
  return taken.get(prefix);
}

function problem(title: string, text: string): HTMLElement {
  return h('div', { class: 'error-state', role: 'alert' }, h('p', null, h('strong', null, `${title} `), text));
}

function forgotPassword(ctx: PageContext): void {
  const email = textField({ name: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true });
  const ask = form({
    label: 'Ask for a password reset',
    fields: [email],
    submitLabel: 'Send the reset link',
    async onSubmit() {
      await ctx.api.send('POST', '/password-reset', { email: valueOf(email) });
      // The gateway answers alike whether the email has an owner account: so does this page.
      ask.replaceWith(h('div', { class: 'notice', role: 'status' },
        h('p', null, `If ${valueOf(email)} belongs to an owner account, a link to choose a new password is on its way. It works once, for 30 minutes.`)));
    },
  });
  ctx.main.append(
    heading('Forgot your password?'),
    h('p', null, 'Enter the email of your owner account. We send it a link to choose a new password.'),
    ask,
    h('p', null, h('a', { href: ctx.href('signIn') }, 'Back to sign in')),
  );
}

function resetPassword(ctx: PageContext): void {
  const token = takeToken('gwrst_');
  ctx.main.append(heading('Choose a new password'));
  if (token === undefined) {
    ctx.main.append(problem('This link holds no reset token.', 'Open the whole link from the mail (it ends with #gwrst_…), or ask for a new one.'), h('p', null, h('a', { href: ctx.href('forgotPassword') }, 'Ask for a new link')));
    return;
  }
  const password = textField({ name: 'password', label: 'New password', type: 'password', autocomplete: 'new-password', required: true, hint: PASSWORD_HINT });
  const again = textField({ name: 'confirmPassword', label: 'New password again', type: 'password', autocomplete: 'new-password', required: true });
  const reset = form({
    label: 'Choose a new password',
    fields: [password, again],
    submitLabel: 'Set the new password',
    async onSubmit() {
      if (password.control.value !== again.control.value) throw new ApiError(400, 'invalid_request', 'This is not the same as the new password above. Type it again.', again.name);
      try {
        await ctx.api.send('POST', '/password-reset/complete', { token, password: password.control.value });
      } catch (error) {
        if (error instanceof ApiError && (error.status === 404 || error.field === 'token')) {
          taken.delete('gwrst_');
          reset.replaceWith(problem('This link is not valid.', 'It was already used, a newer one was sent, or it has expired. Ask for a new one.'));
          return;
        }
        throw error;
      }
      taken.delete('gwrst_');
      ctx.navigate('signIn', {}, { notice: 'Your password is changed, and every session of yours has ended. Sign in with the new password.' });
    },
  });
  ctx.main.append(h('p', null, 'Choosing a new password ends every session of yours: every browser and device signs in again.'), reset);
}

async function verifyEmail(ctx: PageContext): Promise<void> {
  const token = takeToken('gwver_');
  ctx.main.append(heading('Confirm your email'));
  if (token === undefined) {
    ctx.main.append(problem('This link holds no verification token.', 'Open the whole link from the mail (it ends with #gwver_…).'));
    return;
  }
  try {
    await ctx.api.send('POST', '/email-verification', { token });
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.field === 'token')) {
      taken.delete('gwver_');
      ctx.main.append(problem('This link is not valid.', 'It was already used, a newer one was sent, or it has expired.'));
      return;
    }
    throw error;
  }
  taken.delete('gwver_');
  ctx.main.append(h('div', { class: 'notice', role: 'status' }, h('p', null, 'Your email is confirmed. Thank you.')), h('p', null, h('a', { href: ctx.href('home') }, 'Go to the dashboard')));
}

export const mailPages: Record<'forgotPassword' | 'resetPassword' | 'verifyEmail', PageDef> = {
  forgotPassword: { title: 'Forgot your password', access: 'signed-out', render: forgotPassword },
  resetPassword: { title: 'Choose a new password', access: 'anyone', render: resetPassword },
  verifyEmail: { title: 'Confirm your email', access: 'anyone', render: verifyEmail },
};
