import { h } from '../dom.js';
import { heading } from '../ui.js';
// Stub: drawn by its helper.
export const settingsTokenPages = {
    settingsTokens: { title: 'settingsTokens', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('settingsTokens'), h('p', null, 'Not built yet.')) },
};
