import type { PageDef } from '../app.js';
import { h } from '../dom.js';
import { heading } from '../ui.js';

// Stub: drawn by its helper.
export const keyPages: Record<'keys' | 'key', PageDef> = {
  keys: { title: 'keys', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('keys'), h('p', null, 'Not built yet.')) },
  key: { title: 'key', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('key'), h('p', null, 'Not built yet.')) },
};
