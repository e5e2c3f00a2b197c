import type { PageDef } from '../app.js';
import { h } from '../dom.js';
import { heading } from '../ui.js';

// Stub: drawn by its helper.
export const accountPages: Record<'account', PageDef> = {
  account: { title: 'account', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('account'), h('p', null, 'Not built yet.')) },
};
