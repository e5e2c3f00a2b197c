import { h } from '../dom.js';
import { form, textField, valueOf } from '../forms.js';
import { confirmThen, heading, problemBox, section, time, when } from '../ui.js';
const PARTS = [
    { page: 'roles', label: 'Roles', holds: 'the roles /api/roles serves: search, create, edit, delete.' },
    { page: 'keys', label: 'API keys', holds: 'the keys that sign in at /api/signin: create, roll the secret, disable, reset their tokens, delete.' },
    { page: 'settingsTokens', label: 'API settings tokens', holds: 'long-lived tokens for /api/sign, /api/roles and the proxied routes: create, revoke.' },
    { page: 'signRecords', label: 'Sign records', holds: 'the records /api/sign serves: look one up, create, edit.' },
    { page: 'activity', label: 'Activity', holds: 'who changed what (the audit log) and each key\'s recent calls.' },
];
export const accountPages = {
    account: {
        title: (ctx) => ctx.account?.name || ctx.account?.id || 'Account',
        access: 'signed-in',
        render(ctx) {
            const account = ctx.account;
            const path = `/accounts/${encodeURIComponent(account.id)}`;
            const called = account.name === '' ? account.id : account.name;
            const name = textField({ name: 'name', label: 'Name', value: account.name, required: true });
            const problem = problemBox();
            const reset = () => confirmThen(problem, {
                title: `Reset all tokens of ${called}?`,
                message: [
                    h('p', null, 'At once, on every instance of the gateway:'),
                    h('ul', null, h('li', null, 'every access and refresh token of every API key of this account stops working: clients must sign in again;'), h('li', null, 'every API settings token of this account is revoked for good: whatever uses one needs a new token.')),
                    h('p', null, 'The keys and their secrets stay, so clients can sign in again straight away.'),
                ],
                confirmLabel: 'Reset all tokens',
            }, async () => {
                const done = await ctx.api.send('POST', `${path}/reset`);
                ctx.reload(`All tokens of ${called} reset at ${when(done.resetAt)}: every key's tokens are refused and every API settings token is revoked. Clients must sign in again.`);
            });
            const zone = section('Danger zone', problem, h('p', null, 'When a token may have leaked and you do not know which: end every token of the account at once.'), h('button', { type: 'button', class: 'danger', onclick: () => void reset() }, 'Reset all tokens of this account'));
            zone.classList.add('danger-zone');
            ctx.main.append(heading(called), h('dl', { class: 'facts' }, h('dt', null, 'Name'), h('dd', null, account.name === '' ? 'none' : account.name), h('dt', null, 'Account id'), h('dd', null, h('code', null, account.id)), h('dt', null, 'Status'), h('dd', null, h('span', { class: account.enabled ? 'badge' : 'badge off' }, account.enabled ? 'Enabled' : 'Disabled'), account.enabled ? null : ' (its keys cannot sign in; an operator can enable it again)'), account.createdAt === undefined ? null : [h('dt', null, 'Created'), h('dd', null, time(account.createdAt))]), section('Sections', h('ul', { class: 'parts' }, PARTS.map((part) => h('li', null, h('a', { href: ctx.href(part.page, { account: account.id }) }, part.label), `: ${part.holds}`)))), section('Rename', form({
                label: 'Rename the account',
                fields: [name],
                submitLabel: 'Rename account',
                async onSubmit() {
                    const renamed = await ctx.api.send('PATCH', path, { name: valueOf(name) });
                    // The header's account switcher shows the name: it is drawn again from a fresh list.
                    await ctx.auth.refreshAccounts();
                    ctx.reload(`Account renamed to ${renamed.name}.`);
                },
            })), zone);
        },
    },
};
