import { h } from '../dom.js';
import { heading } from '../ui.js';
// Stub: drawn by its helper.
export const signInPages = {
    home: { title: 'home', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('home'), h('p', null, 'Not built yet.')) },
    signIn: { title: 'signIn', access: 'signed-out', render: (ctx) => void ctx.main.append(heading('signIn'), h('p', null, 'Not built yet.')) },
    password: { title: 'password', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('password'), h('p', null, 'Not built yet.')) },
    invite: { title: 'invite', access: 'anyone', render: (ctx) => void ctx.main.append(heading('invite'), h('p', null, 'Not built yet.')) },
    accounts: { title: 'accounts', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('accounts'), h('p', null, 'Not built yet.')) },
};
