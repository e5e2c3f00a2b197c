/**
 * Signing in and out, the home page's redirect, the password change, the invite link's page
 * and the list of accounts.
 *
 * Nothing here keeps a secret: a password goes from its field into one request body; the
 * operator's admin token is kept by session.ts (this tab's sessionStorage); an invite's token
 * is read from the link's fragment, taken out of the address bar at once and held in memory
 * until it is posted. test/dashboard/sign-in.test.ts, invite.test.ts and isolation.test.ts
 * walk these pages in Chromium.
 */
import { ApiError, describeError } from '../api.js';
import type { PageContext, PageDef } from '../app.js';
import { append, h, replace } from '../dom.js';
import { form, textField, valueOf, type Field } from '../forms.js';
import { matchPage } from '../pages.js';
import type { Account, Page, Session } from '../types.js';
import { empty, heading, pager, section, table } from '../ui.js';
import { ssoButton, ssoRefusal } from './sso.js';
import { passkeyAnswer } from '../webauthn.js';

const PASSWORD_HINT = '15 to 256 characters; a long passphrase is best.';

/**
 * Where sign-in goes next: the `next` page asked for when it is one of the dashboard's, else
 * home. Only a path of this dashboard is followed (never another origin, `//host` or a path
 * outside the dashboard), so a link to the sign-in page cannot send someone elsewhere after
 * they signed in.
 */
function nextPath(ctx: PageContext): string {
  const base = document.documentElement.dataset.base ?? '';
  const next = ctx.query.get('next') ?? '';
  if (next.startsWith(`${base}/`) && !next.startsWith('//')) {
    const path = new URL(next, location.origin);
    if (path.origin === location.origin && path.pathname.startsWith(`${base}/`) && matchPage(path.pathname.slice(base.length + 1)) !== undefined && !path.pathname.endsWith('/sign-in')) return path.pathname + path.search;
  }
  return ctx.href('home');
}

function followNext(ctx: PageContext): void {
  history.replaceState(null, '', nextPath(ctx));
  window.dispatchEvent(new PopStateEvent('popstate'));
}

/** A sign-in refusal as the person signing in should read it. */
function signInError(error: unknown): string {
  // A sign-in flood fills the gateway's password-hashing queue (503 overloaded): busy, not down.
  if (error instanceof ApiError && error.code !== 'overloaded' && (error.code === 'store_unavailable' || error.status === 503)) {
    return 'Signing in is not possible right now: the gateway\'s store is unavailable. Try again in a moment.';
  }
  return describeError(error);
}

/**
 * A sign-in form whose refusals (wrong credentials, a lockout, the store down) show in an alert
 * above it; a refusal naming a field (a malformed email) shows at that field.
 */
function signInForm({ label, fields, submitLabel, clear, onSubmit }: { label: string; fields: Field[]; submitLabel: string; clear: Field; onSubmit(): Promise<void> }): HTMLElement {
  const alert = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const element = form({
    label,
    fields,
    submitLabel,
    async onSubmit() {
      alert.hidden = true;
      replace(alert);
      try {
        await onSubmit();
      } catch (error) {
        if (error instanceof ApiError && error.field !== undefined && fields.some((field) => field.name === error.field)) throw error;
        replace(alert, signInError(error));
        alert.hidden = false;
        clear.control.value = '';
        clear.control.focus();
      }
    },
  });
  return h('div', { class: 'sign-in-form' }, alert, element);
}

/** The invite token read from the link, kept here (not in the address bar) until it is used. */
let inviteToken: string | undefined;

/** Takes the token out of the link's fragment and out of the address bar and history entry. */
function takeInviteToken(): string | undefined {
  const fragment = location.hash.slice(1);
  if (fragment !== '') {
    history.replaceState(history.state, '', location.pathname + location.search);
    if (/^gwinv_[A-Za-z0-9]+$/.test(fragment)) inviteToken = fragment;
  }
  return inviteToken;
}

function accountLabel(account: Account): string {
  return account.name === '' ? account.id : account.name;
}

/**
 * A password typed twice that differs is refused at the second field, the way form() shows the
 * gateway's refusals (message, focus, announcement); the owner API never sees the copy.
 */
function refuseIfDifferent(first: Field, again: Field, what: string): void {
  if (first.control.value !== again.control.value) {
    throw new ApiError(400, 'invalid_request', `This is not the same as the ${what} above. Type it again.`, again.name);
  }
}

/**
 * The second step of an owner's sign-in (401 mfa_required): a code from the authenticator app
 * or a recovery code, or a passkey. The password typed is held here until the step is done.
 */
function secondStep(ctx: PageContext, email: string, password: string): void {
  const first = ctx.main.querySelector('.sign-in-form');
  const code = textField({ name: 'otp', label: 'Code', autocomplete: 'one-time-code', required: true, size: 12, hint: 'The 6-digit code of your authenticator app, or one of your recovery codes.' });
  const usePasskey = h('button', { type: 'button' }, 'Use a passkey instead');
  const step = h('section', { class: 'second-step', 'aria-labelledby': 'second-step-title' },
    h('h2', { id: 'second-step-title', tabindex: -1 }, 'Second factor'),
    signInForm({
      label: 'Second factor',
      fields: [code],
      submitLabel: 'Verify',
      clear: code,
      async onSubmit() {
        await ctx.auth.signInOwner(email, password, { otp: valueOf(code) });
        followNext(ctx);
      },
    }),
    usePasskey,
  );
  const alert = step.querySelector<HTMLElement>('[role="alert"]')!;
  usePasskey.addEventListener('click', () => {
    passkeyAnswer(ctx.api).then((passkey) => ctx.auth.signInOwner(email, password, { passkey })).then(() => followNext(ctx), (error: unknown) => {
      replace(alert, signInError(error));
      alert.hidden = false;
    });
  });
  if (first !== null) first.replaceWith(step);
  else ctx.main.append(step);
  step.querySelector('h2')?.focus();
}

/** Passwordless: a passkey alone signs in (the passkey says whose it is). */
function passkeySignIn(ctx: PageContext): HTMLElement {
  const alert = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const button = h('button', { type: 'button' }, 'Sign in with a passkey');
  button.addEventListener('click', () => {
    alert.hidden = true;
    ctx.auth.signInWithPasskey().then(() => followNext(ctx), (error: unknown) => {
      replace(alert, signInError(error));
      alert.hidden = false;
    });
  });
  return h('div', { class: 'passkey-sign-in' }, alert, button);
}

export const signInPages: Record<'home' | 'signIn' | 'password' | 'invite' | 'accounts', PageDef> = {
  home: {
    title: 'Dashboard',
    access: 'signed-in',
    async render(ctx) {
      const accounts = await ctx.auth.accounts();
      // The notice left for home (e.g. after a password change) goes on to where home leads.
      const notice = ctx.notice !== undefined ? { notice: ctx.notice } : {};
      if (accounts.length === 1) ctx.navigate('account', { account: accounts[0]!.id }, { replace: true, ...notice });
      else ctx.navigate('accounts', {}, { replace: true, ...notice });
    },
  },
  signIn: {
    title: 'Sign in',
    access: 'signed-out',
    render(ctx) {
      const email = textField({ name: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true });
      const password = textField({ name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', required: true });
      const token = textField({ name: 'token', label: 'Admin token', type: 'password', autocomplete: 'off', required: true, hint: 'gwadm_… as your operator gave it; kept in this tab only, until you sign out or close it.' });
      ctx.main.append(
        heading('Sign in'),
        h('p', null, 'Manage your accounts\' roles, API keys, API settings tokens and sign records.'),
        ssoRefusal(ctx) ?? '',
        ssoButton(ctx),
        signInForm({
          label: 'Sign in as an account owner',
          fields: [email, password],
          submitLabel: 'Sign in',
          clear: password,
          async onSubmit() {
            try {
              await ctx.auth.signInOwner(valueOf(email), password.control.value);
            } catch (error) {
              if (!(error instanceof ApiError) || error.code !== 'mfa_required') throw error;
              secondStep(ctx, valueOf(email), password.control.value);
              return;
            }
            followNext(ctx);
          },
        }),
        passkeySignIn(ctx),
        h('p', null, h('a', { href: ctx.href('forgotPassword') }, 'Forgot your password?')),
        section('Operators',
          h('p', null, 'Operators of this gateway sign in with an admin token and can manage every account.'),
          signInForm({
            label: 'Sign in as an operator',
            fields: [token],
            submitLabel: 'Sign in as operator',
            clear: token,
            async onSubmit() {
              await ctx.auth.signInOperator(valueOf(token));
              followNext(ctx);
            },
          }),
        ),
      );
    },
  },
  password: {
    title: 'Change password',
    access: 'signed-in',
    render(ctx) {
      if (ctx.who?.kind !== 'owner') {
        ctx.main.append(heading('Change password'), h('p', null, 'Operators sign in with an admin token and have no password here. Admin tokens are made and rotated in the gateway\'s configuration (docs/owner.md, "Operators: admin tokens").'));
        return;
      }
      const current = textField({ name: 'currentPassword', label: 'Current password', type: 'password', autocomplete: 'current-password', required: true });
      const next = textField({ name: 'newPassword', label: 'New password', type: 'password', autocomplete: 'new-password', required: true, hint: PASSWORD_HINT });
      const again = textField({ name: 'confirmPassword', label: 'New password again', type: 'password', autocomplete: 'new-password', required: true });
      ctx.main.append(
        heading('Change password'),
        h('p', null, `Signed in as ${ctx.who.session.owner.email}. Changing the password ends every other session of yours (other browsers and devices sign in again); this one goes on.`),
        form({
          label: 'Change password',
          fields: [current, next, again],
          submitLabel: 'Change password',
          async onSubmit() {
            refuseIfDifferent(next, again, 'new password');
            let session: Session;
            try {
              session = await ctx.api.send<Session>('POST', '/session/password', { currentPassword: current.control.value, newPassword: next.control.value });
            } catch (error) {
              // The gateway's one answer for a wrong password says "email or password": here only one was typed.
              if (error instanceof ApiError && error.code === 'invalid_credentials') throw new ApiError(error.status, error.code, 'This is not your current password.', 'currentPassword');
              throw error;
            }
            ctx.auth.replaceSession(session);
            ctx.navigate('home', {}, { notice: 'Your password is changed. Every other session of yours has ended: other browsers and devices must sign in again.' });
          },
        }),
      );
    },
  },
  invite: {
    title: 'Accept an invite',
    access: 'anyone',
    render(ctx) {
      const token = takeInviteToken();
      ctx.main.append(heading('Accept an invite'));
      if (token === undefined) {
        ctx.main.append(h('div', { class: 'error-state', role: 'alert' },
          h('p', null, h('strong', null, 'This link holds no invite. '), 'Open the whole link from the invitation (it ends with #gwinv_…), or ask for a new invite.')));
        return;
      }
      const password = textField({ name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password', required: true, hint: `If you already have an owner account, enter its password. New owners choose one: ${PASSWORD_HINT}` });
      const again = textField({ name: 'confirmPassword', label: 'Password again', type: 'password', autocomplete: 'new-password', required: true });
      const accept = form({
        label: 'Accept the invite',
        fields: [password, again],
        submitLabel: 'Accept invite',
        async onSubmit() {
          refuseIfDifferent(password, again, 'password');
          let accepted: { ownerId: string; accountId: string };
          try {
            accepted = await ctx.api.send<{ ownerId: string; accountId: string }>('POST', '/invites/accept', { token, password: password.control.value });
          } catch (error) {
            if (error instanceof ApiError && (error.status === 404 || error.field === 'token')) {
              inviteToken = undefined;
              accept.replaceWith(h('div', { class: 'error-state', role: 'alert' },
                h('p', null, h('strong', null, 'This invite is not valid. '), 'It was already used, revoked, or it has expired. Ask an owner of the account for a new one.')));
              return;
            }
            if (error instanceof ApiError && error.code === 'invalid_credentials') {
              throw new ApiError(error.status, error.code, 'An owner account with the invited email exists already, and this is not its password. Enter that account\'s password.', 'password');
            }
            throw error;
          }
          inviteToken = undefined;
          const account = ctx.href('account', { account: accepted.accountId });
          if (ctx.who === undefined) {
            ctx.navigate('signIn', {}, { query: { next: account }, notice: 'The invite is accepted. Sign in with the invited email and your password to open the account.' });
            return;
          }
          if (ctx.who.kind === 'owner' && ctx.who.session.owner.id === accepted.ownerId) {
            await ctx.auth.refreshAccounts();
            ctx.navigate('account', { account: accepted.accountId }, { notice: 'The invite is accepted: you are now an owner of this account.' });
            return;
          }
          accept.replaceWith(h('div', { class: 'notice', role: 'status' },
            h('p', null, 'The invite is accepted for the invited email. You are signed in as someone else here: sign out, then sign in with the invited email.')));
        },
      });
      ctx.main.append(
        h('p', null, 'You were invited to manage an account on this gateway. Accepting the invite makes you one of its owners.'),
        ssoButton(ctx, { invite: token }),
        accept,
      );
    },
  },
  accounts: {
    title: 'Accounts',
    access: 'signed-in',
    async render(ctx) {
      ctx.main.append(heading('Accounts'));
      let accounts: Account[];
      let nextCursor: string | undefined;
      const cursor = ctx.query.get('cursor') ?? undefined;
      if (ctx.who?.kind === 'operator') {
        const page = await ctx.api.get<Page<Account>>('/accounts', { limit: 50, cursor });
        accounts = page.items;
        nextCursor = page.nextCursor;
        ctx.main.append(h('p', null, 'Every account of this gateway. As an operator you can open and manage any of them.'));
      } else {
        accounts = await ctx.auth.accounts();
        ctx.main.append(h('p', null, 'The accounts you are an owner of.'));
      }
      if (accounts.length === 0) {
        ctx.main.append(empty(ctx.who?.kind === 'operator'
          ? (cursor === undefined ? 'There are no accounts yet. Operators create them with the owner API (POST /owner/v1/accounts) or gatewayctl.' : 'There are no more accounts.')
          : 'You are not an owner of any account. Ask an owner of an account for an invite.',
        cursor === undefined ? null : h('a', { href: ctx.href('accounts') }, 'First page')));
        return;
      }
      append(ctx.main, [
        table('Accounts', ['Name', 'Id', 'Status'], accounts.map((account) => [
          h('a', { href: ctx.href('account', { account: account.id }) }, accountLabel(account)),
          h('code', null, account.id),
          account.enabled ? h('span', { class: 'badge' }, 'Enabled') : h('span', { class: 'badge off' }, 'Disabled'),
        ])),
        pager({
          label: 'More accounts',
          nextHref: nextCursor === undefined ? undefined : ctx.href('accounts', {}, { cursor: nextCursor }),
          firstHref: cursor === undefined ? undefined : ctx.href('accounts'),
        }),
      ]);
    },
  },
};
