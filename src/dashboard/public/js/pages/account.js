import { h } from '../dom.js';
import { heading } from '../ui.js';
// Stub: drawn by its helper.
export const accountPages = {
    account: { title: 'account', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('account'), h('p', null, 'Not built yet.')) },
};
