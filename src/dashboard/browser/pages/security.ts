/**
 * Second factors: the authenticator app (TOTP: the QR code and the secret shown while enrolling,
 * a code to confirm, the recovery codes shown once), the recovery codes (new ones for a current
 * code), turning TOTP off, the account's requirement, and passkeys (register, list, remove).
 * Secrets appear only in the answers that hand them out (docs/owner.md, "Second factors").
 * test/dashboard/second-factors.test.ts and passkeys.test.ts walk these pages in Chromium.
 */
import { ApiError } from '../api.js';
import type { PageContext, PageDef } from '../app.js';
import { h, replace, type Child } from '../dom.js';
import { checkboxField, form, textField, valueOf } from '../forms.js';
import type { OwnerAnswer } from '../owner-api.generated.js';
import { confirmThen, draw, empty, heading, problemBox, section, table, time } from '../ui.js';
import { registerPasskey } from '../webauthn.js';

type Factors = OwnerAnswer<'getSecondFactors'>;
type Enrollment = OwnerAnswer<'startTotpEnrollment'>;

const CODE_HINT = 'The 6-digit code the app shows now, or one of your unused recovery codes.';

function codeField(label = 'Code'): ReturnType<typeof textField> {
  return textField({ name: 'code', label, autocomplete: 'one-time-code', inputmode: 'text', required: true, hint: CODE_HINT, size: 12 });
}

/** Recovery codes as a list shown this once, focused so keyboard and screen-reader users land on them. */
function showRecoveryCodes(slot: HTMLElement, codes: readonly string[]): void {
  const list = h('ol', { class: 'recovery-codes mono', tabindex: -1, 'aria-label': 'Recovery codes' }, codes.map((code) => h('li', null, code)));
  replace(slot, h('section', { class: 'shown-once', 'aria-labelledby': 'recovery-title' },
    h('h2', { id: 'recovery-title' }, 'Your recovery codes'),
    h('p', null, h('strong', null, 'This is the only time they are shown. '), 'Keep them somewhere safe: each signs you in once in place of a code from the app, should you lose it. The gateway keeps only digests of them.'),
    list,
  ));
  list.focus();
  list.scrollIntoView({ block: 'center' });
}

function enrollTotp(ctx: PageContext, slot: HTMLElement): HTMLElement {
  const start = h('button', { type: 'button', class: 'primary' }, 'Set up an authenticator app');
  const problem = problemBox();
  start.addEventListener('click', () => {
    problem.hidden = true;
    ctx.api.send<Enrollment>('POST', '/session/totp').then((enrollment) => {
      const code = codeField('Code from the app');
      replace(slot,
        h('p', null, 'Scan this QR code with your authenticator app, or type the key below into it. Then enter the code it shows.'),
        h('img', { src: enrollment.qrCode, alt: 'QR code of the authenticator app key (the same key as written below)', class: 'qr-code', width: 200, height: 200 }),
        h('p', null, 'Key: ', h('code', { class: 'mono' }, enrollment.secret)),
        form({
          label: 'Confirm the authenticator app',
          fields: [code],
          submitLabel: 'Turn on',
          async onSubmit() {
            const { recoveryCodes } = await ctx.api.send<{ recoveryCodes: string[] }>('POST', '/session/totp/confirmation', { code: valueOf(code) });
            await ctx.auth.refreshAccounts();
            showRecoveryCodes(slot, recoveryCodes);
          },
        }),
      );
      slot.querySelector('input')?.focus();
    }, (error: unknown) => {
      problem.hidden = false;
      replace(problem, error instanceof ApiError ? error.message : String(error));
    });
  });
  return h('div', null, problem, start);
}

function totpOn(ctx: PageContext, factors: Factors, slot: HTMLElement): Child {
  const renewCode = codeField();
  const offCode = codeField();
  return [
    h('p', null, 'An authenticator app is on since ', time(factors.totp.enabledAt), `. ${factors.recoveryCodesLeft} of 10 recovery codes are unused.`),
    section('Recovery codes',
      h('p', null, 'New recovery codes replace every old one.'),
      form({
        label: 'New recovery codes',
        fields: [renewCode],
        submitLabel: 'Make new recovery codes',
        async onSubmit() {
          const { recoveryCodes } = await ctx.api.send<{ recoveryCodes: string[] }>('POST', '/session/recovery-codes', { code: valueOf(renewCode) });
          showRecoveryCodes(slot, recoveryCodes);
        },
      }),
    ),
    section('Turn the authenticator app off',
      form({
        label: 'Turn the authenticator app off',
        fields: [offCode],
        submitLabel: 'Turn off',
        async onSubmit() {
          await ctx.api.send<Factors>('POST', '/session/totp/disable', { code: valueOf(offCode) });
          ctx.reload('The authenticator app is off; its recovery codes no longer work.');
        },
      }),
    ),
  ];
}

function requirementForms(ctx: PageContext, accounts: readonly { id: string; name: string }[]): Child {
  return accounts.map((account) => {
    const field = checkboxField({ name: 'required', label: `Every owner of ${account.name || account.id} must use a second factor` });
    void ctx.api.get<{ required: boolean }>(`/accounts/${encodeURIComponent(account.id)}/second-factor-requirement`).then((r) => {
      (field.control as HTMLInputElement).checked = r.required;
    }, () => {});
    return form({
      label: `Second factor requirement of ${account.name || account.id}`,
      fields: [field],
      submitLabel: 'Save',
      async onSubmit() {
        const required = (field.control as HTMLInputElement).checked;
        await ctx.api.send('PUT', `/accounts/${encodeURIComponent(account.id)}/second-factor-requirement`, { required });
        ctx.reload(required ? `Owners of ${account.name || account.id} without a second factor now set one up before anything else.` : `Owners of ${account.name || account.id} may sign in with a password alone.`);
      },
    });
  });
}

async function renderSecurity(ctx: PageContext): Promise<void> {
  ctx.main.append(heading('Second factors'));
  if (ctx.who?.kind !== 'owner') {
    ctx.main.append(h('p', null, 'Operators sign in with an admin token and have no second factor here.'));
    return;
  }
  const factors = await ctx.api.get<Factors>('/session/second-factors');
  const slot = h('div');
  if (factors.required && !factors.totp.enabled && factors.passkeys.length === 0) {
    ctx.main.append(h('div', { class: 'notice', role: 'status' }, h('p', null, 'A second factor is required of you: set up an authenticator app or a passkey to go on.')));
  }
  ctx.main.append(
    h('p', null, 'A second factor keeps your accounts safe when your password is not: signing in asks for it after the password.'),
    slot,
    section('Authenticator app', factors.totp.enabled ? totpOn(ctx, factors, slot) : enrollTotp(ctx, slot)),
    section('Passkeys', h('p', null, h('a', { href: ctx.href('passkeys') }, `Manage passkeys (${factors.passkeys.length})`))),
    section('Requirement', h('p', null, 'Require a second factor of every owner of an account you manage.'), requirementForms(ctx, ctx.who.session.accounts)),
  );
}

async function listPasskeys(ctx: PageContext, problem: HTMLElement): Promise<Child> {
  const { passkeys } = await ctx.api.get<Factors>('/session/second-factors');
  if (passkeys.length === 0) return empty('You have no passkeys yet. Register one below.');
  return table('Passkeys', ['Name', 'Registered', 'Last used', 'Actions'], passkeys.map((passkey) => [
    passkey.name,
    time(passkey.createdAt),
    passkey.lastUsedAt === undefined ? 'not yet' : time(passkey.lastUsedAt),
    h('button', {
      type: 'button',
      class: 'danger',
      onclick: () => void confirmThen(problem, { title: `Remove passkey ${passkey.name}?`, message: [h('p', null, 'It no longer signs you in. The authenticator may still list it: remove it there too.')], confirmLabel: 'Remove passkey' }, async () => {
        await ctx.api.send('DELETE', `/session/passkeys/${encodeURIComponent(passkey.id)}`);
        ctx.reload(`Passkey ${passkey.name} removed.`);
      }),
    }, 'Remove', h('span', { class: 'visually-hidden' }, ` ${passkey.name}`)),
  ]));
}

async function renderPasskeys(ctx: PageContext): Promise<void> {
  ctx.main.append(heading('Passkeys'));
  if (ctx.who?.kind !== 'owner') {
    ctx.main.append(h('p', null, 'Operators sign in with an admin token and have no passkeys here.'));
    return;
  }
  const problem = problemBox();
  const list = h('div');
  const name = textField({ name: 'name', label: 'Passkey name', required: true, hint: 'Which device or key it is, e.g. "work laptop".' });
  ctx.main.append(
    h('p', null, 'A passkey signs you in without a password, or after it as the second factor. Register one per device or security key.'),
    section('Your passkeys', problem, list),
    section('Register a passkey',
      form({
        label: 'Register a passkey',
        fields: [name],
        submitLabel: 'Register passkey',
        async onSubmit() {
          const added = await registerPasskey(ctx.api, valueOf(name));
          await ctx.auth.refreshAccounts();
          ctx.reload(`Passkey ${added.name} registered.`);
        },
      }),
    ),
  );
  await draw(list, () => listPasskeys(ctx, problem));
}

export const securityPages: Record<'security' | 'passkeys', PageDef> = {
  security: { title: 'Second factors', access: 'signed-in', render: renderSecurity },
  passkeys: { title: 'Passkeys', access: 'signed-in', render: renderPasskeys },
};
