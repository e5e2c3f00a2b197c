import { h } from '../dom.js';
import { form, textField, valueOf } from '../forms.js';
import { matchPage } from '../pages.js';
import { heading, section } from '../ui.js';
/** Where sign-in goes next: the `next` page asked for when it is one of the dashboard's, else home. */
function nextPath(ctx) {
    const base = document.documentElement.dataset.base ?? '';
    const next = ctx.query.get('next') ?? '';
    if (next.startsWith(`${base}/`) && !next.startsWith('//')) {
        const path = new URL(next, location.origin);
        if (path.origin === location.origin && matchPage(path.pathname.slice(base.length + 1)) !== undefined && !path.pathname.endsWith('/sign-in'))
            return path.pathname + path.search;
    }
    return ctx.href('home');
}
function followNext(ctx) {
    history.replaceState(null, '', nextPath(ctx));
    window.dispatchEvent(new PopStateEvent('popstate'));
}
export const signInPages = {
    home: {
        title: 'Dashboard',
        access: 'signed-in',
        async render(ctx) {
            const accounts = await ctx.auth.accounts();
            if (accounts.length === 1)
                ctx.navigate('account', { account: accounts[0].id }, { replace: true });
            else
                ctx.navigate('accounts', {}, { replace: true });
        },
    },
    signIn: {
        title: 'Sign in',
        access: 'signed-out',
        render(ctx) {
            const email = textField({ name: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true });
            const password = textField({ name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', required: true });
            const token = textField({ name: 'token', label: 'Admin token', type: 'password', autocomplete: 'off', required: true, hint: 'gwadm_… as your operator gave it; kept in this tab only, until you sign out or close it.' });
            ctx.main.append(heading('Sign in'), h('p', null, 'Manage your accounts\' roles, API keys, API settings tokens and sign records.'), form({
                label: 'Sign in as an account owner',
                fields: [email, password],
                submitLabel: 'Sign in',
                async onSubmit() {
                    await ctx.auth.signInOwner(valueOf(email), password.control.value);
                    followNext(ctx);
                },
            }), section('Operators', h('p', null, 'Operators of this gateway sign in with an admin token and can manage every account.'), form({
                label: 'Sign in as an operator',
                fields: [token],
                submitLabel: 'Sign in as operator',
                async onSubmit() {
                    await ctx.auth.signInOperator(valueOf(token));
                    followNext(ctx);
                },
            })));
        },
    },
    password: { title: 'Change password', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('Change password'), h('p', null, 'Not built yet.')) },
    invite: { title: 'Accept an invite', access: 'anyone', render: (ctx) => void ctx.main.append(heading('Accept an invite'), h('p', null, 'Not built yet.')) },
    accounts: {
        title: 'Accounts',
        access: 'signed-in',
        async render(ctx) {
            const accounts = await ctx.auth.accounts();
            ctx.main.append(heading('Accounts'), h('ul', null, accounts.map((a) => h('li', null, h('a', { href: ctx.href('account', { account: a.id }) }, a.name === '' ? a.id : a.name)))));
        },
    },
};
