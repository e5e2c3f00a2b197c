import type { PageDef } from '../app.js';
import { h } from '../dom.js';
import { heading } from '../ui.js';

// Stub: drawn by its helper.
export const rolePages: Record<'roles' | 'newRole' | 'role', PageDef> = {
  roles: { title: 'roles', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('roles'), h('p', null, 'Not built yet.')) },
  newRole: { title: 'newRole', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('newRole'), h('p', null, 'Not built yet.')) },
  role: { title: 'role', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('role'), h('p', null, 'Not built yet.')) },
};
