/**
 * The account's roles: the listing in id order (the order `/api/roles` serves them in), with a
 * search by name and cursor paging, a form to create one, and one to edit or delete it. Where
 * the gateway does not write the roles (the directory upstream's, or a store other than its
 * own), the owner API answers 409 read_only_store to reads too, and the pages say so instead
 * of a failure: there is nothing to fix from here.
 */
import { ApiError } from '../api.js';
import type { PageContext, PageDef } from '../app.js';
import { append, h, type Child } from '../dom.js';
import { checkboxField, fieldMessage, form, numberOf, textField, valueOf, type Field } from '../forms.js';
import type { Page, Role } from '../types.js';
import { confirmAction, empty, heading, pager, section, table } from '../ui.js';

const PAGE_SIZE = 25;
/** How many pages of 100 the new-role form reads to suggest the next free id (1000 roles made here at most). */
const MAX_PAGES_FOR_NEXT_ID = 20;

function rolesPath(ctx: PageContext, id?: number | string): string {
  const base = `/accounts/${encodeURIComponent(ctx.account!.id)}/roles`;
  return id === undefined ? base : `${base}/${encodeURIComponent(String(id))}`;
}

function accountOf(ctx: PageContext): { account: string } {
  return { account: ctx.account!.id };
}

function isReadOnly(error: unknown): error is ApiError {
  return error instanceof ApiError && error.code === 'read_only_store';
}

/** What the pages show instead of roles when the gateway does not write them. */
function readOnlyState(error: ApiError): HTMLElement {
  return section('Roles are managed elsewhere',
    h('p', null, 'This gateway serves its roles from a store it does not write (the directory upstream, or a store other than the one the owner API writes), so they cannot be listed, created, changed or deleted here. Change them where they are kept; /api/roles serves them from there.'),
    h('p', { class: 'hint' }, 'The gateway says: ', error.message),
  );
}

/** A title set by a page's render, for the document title and the announcement. */
const titles = new WeakMap<PageContext, string>();

interface RoleFields {
  id: Field;
  slug: Field;
  name: Field;
  description: Field;
  isPublic: Field;
}

function roleFields(role: Partial<Role>, idHint: string): RoleFields {
  return {
    id: textField({ name: 'id', label: 'Id', value: role.id === undefined ? '' : String(role.id), hint: idHint, inputmode: 'numeric', required: true, size: 12 }),
    slug: textField({ name: 'slug', label: 'Slug', value: role.slug ?? '', hint: 'Lowercase letters, digits, ".", "_" and "-", starting with a letter or digit; unique in the account (e.g. night-auditor).', required: true }),
    name: textField({ name: 'name', label: 'Name', value: role.name ?? '', hint: 'Up to 256 characters, on one line.', required: true }),
    description: textField({ name: 'description', label: 'Description', value: role.description ?? '', hint: 'Optional; may span several lines.', multiline: true }),
    isPublic: checkboxField({ name: 'public', label: 'Public', checked: role.public ?? false, hint: '/api/roles lists a public role with "public": 1, any other with 0.' }),
  };
}

/** The request body: what was typed, for the owner API to accept or refuse field by field. */
function roleBody(fields: RoleFields): unknown {
  return {
    id: numberOf(fields.id),
    slug: valueOf(fields.slug),
    name: valueOf(fields.name),
    description: fields.description.control.value,
    public: (fields.isPublic.control as HTMLInputElement).checked,
  };
}

function fieldList(fields: RoleFields): Field[] {
  return [fields.id, fields.slug, fields.name, fields.description, fields.isPublic];
}

/** The id after the highest one in use, read page by page (ids are listed in order). */
async function nextFreeId(ctx: PageContext): Promise<number | undefined> {
  let cursor: string | undefined;
  let highest: number | undefined;
  for (let page = 0; page < MAX_PAGES_FOR_NEXT_ID; page += 1) {
    const { items, nextCursor } = await ctx.api.get<Page<Role>>(rolesPath(ctx), { limit: 100, cursor });
    if (items.length > 0) highest = items[items.length - 1]!.id;
    if (nextCursor === undefined) return highest === undefined ? 1 : highest < Number.MAX_SAFE_INTEGER ? highest + 1 : undefined;
    cursor = nextCursor;
  }
  return undefined;
}

function roleRows(ctx: PageContext, roles: readonly Role[]): Child[][] {
  return roles.map((role) => [
    String(role.id),
    h('code', null, role.slug),
    role.name,
    role.public ? 'Yes' : 'No',
    role.description === '' ? '—' : h('span', { class: 'multiline' }, role.description),
    h('a', { href: ctx.href('role', { ...accountOf(ctx), role: String(role.id) }) }, 'Edit', h('span', { class: 'visually-hidden' }, ` role ${role.name}`)),
  ]);
}

export const rolePages: Record<'roles' | 'newRole' | 'role', PageDef> = {
  roles: {
    title: 'Roles',
    access: 'signed-in',
    async render(ctx) {
      const name = ctx.query.get('name') ?? '';
      const cursor = ctx.query.get('cursor') ?? undefined;
      const createLink = () => h('a', { href: ctx.href('newRole', accountOf(ctx)) }, 'Create role');
      const search = textField({ name: 'name', label: 'Search by name', type: 'search', value: name, hint: 'Roles whose name contains this, in any case.' });
      let page: Page<Role> | undefined;
      let refused: Child = null;
      try {
        page = await ctx.api.get<Page<Role>>(rolesPath(ctx), { limit: PAGE_SIZE, cursor, name });
      } catch (error) {
        if (isReadOnly(error)) {
          ctx.main.append(heading('Roles'), readOnlyState(error));
          return;
        }
        // A search or a page link the owner API refuses (too long, a cursor from elsewhere):
        // said where it belongs, with the way back, rather than as a failure of the page.
        if (!(error instanceof ApiError && (error.field === 'name' || error.field === 'cursor'))) throw error;
        if (error.field === 'name') search.setError(fieldMessage(error, search));
        else refused = empty('This page link does not work (it may come from another listing): start again from the first page.', h('a', { href: ctx.href('roles', accountOf(ctx), { name }) }, 'First page'));
      }
      const searchForm = form({
        label: 'Search roles',
        fields: [search],
        submitLabel: 'Search',
        actions: name === '' ? null : h('a', { href: ctx.href('roles', accountOf(ctx)) }, 'Show all roles'),
        async onSubmit() {
          ctx.navigate('roles', accountOf(ctx), { query: { name: valueOf(search) } });
        },
      });

      let listing: Child;
      if (page === undefined) {
        listing = refused;
      } else if (page.items.length === 0 && name !== '') {
        listing = empty(`No role matches “${name}”.`, h('a', { href: ctx.href('roles', accountOf(ctx)) }, 'Show all roles'));
      } else if (page.items.length === 0 && cursor === undefined) {
        listing = empty('No roles yet.', createLink());
      } else if (page.items.length === 0) {
        listing = empty('No more roles.', h('a', { href: ctx.href('roles', accountOf(ctx), { name }) }, 'First page'));
      } else {
        listing = [
          table(name === '' ? 'Roles, in id order' : `Roles whose name contains “${name}”, in id order`, ['Id', 'Slug', 'Name', 'Public', 'Description', 'Actions'], roleRows(ctx, page.items)),
          pager({
            nextHref: page.nextCursor === undefined ? undefined : ctx.href('roles', accountOf(ctx), { name, cursor: page.nextCursor }),
            firstHref: cursor === undefined ? undefined : ctx.href('roles', accountOf(ctx), { name }),
            label: 'Pages of roles',
          }),
        ];
      }
      append(ctx.main, [
        heading('Roles', createLink()),
        h('p', null, 'The roles /api/roles serves to this account\'s keys, in the same order (by id). A change here is served at once.'),
        searchForm,
        listing,
      ]);
    },
  },

  newRole: {
    title: 'Create role',
    access: 'signed-in',
    async render(ctx) {
      let nextId: number | undefined;
      try {
        nextId = await nextFreeId(ctx);
      } catch (error) {
        if (!isReadOnly(error)) throw error;
        ctx.main.append(heading('Create role'), readOnlyState(error));
        return;
      }
      const fields = roleFields({ ...(nextId === undefined ? {} : { id: nextId }) }, nextId === undefined
        ? 'A whole number from 0. Roles are listed in id order, in /api/roles too: choose the id for the place the role should take.'
        : `A whole number from 0. Roles are listed in id order, in /api/roles too: ${nextId} puts this one last; a lower free id puts it earlier.`);
      ctx.main.append(
        heading('Create role'),
        form({
          label: 'Create role',
          fields: fieldList(fields),
          submitLabel: 'Create role',
          actions: h('a', { href: ctx.href('roles', accountOf(ctx)) }, 'Cancel'),
          async onSubmit() {
            const role = await ctx.api.send<Role>('POST', rolesPath(ctx), roleBody(fields));
            ctx.navigate('roles', accountOf(ctx), { notice: `Role ${role.name} created.` });
          },
        }),
      );
    },
  },

  role: {
    title: (ctx) => titles.get(ctx) ?? 'Role',
    access: 'signed-in',
    async render(ctx) {
      const roleId = ctx.params.role!;
      let role: Role;
      try {
        role = await ctx.api.get<Role>(rolesPath(ctx, roleId));
      } catch (error) {
        if (isReadOnly(error)) {
          ctx.main.append(heading('Role'), readOnlyState(error));
          return;
        }
        if (error instanceof ApiError && error.status === 404) {
          titles.set(ctx, 'Role not found');
          ctx.main.append(heading('Role not found'),
            h('p', null, `This account has no role with id ${roleId}. It may have been deleted, or moved to another id.`),
            h('p', null, h('a', { href: ctx.href('roles', accountOf(ctx)) }, 'Go to the roles')));
          return;
        }
        throw error;
      }
      titles.set(ctx, `Role ${role.name}`);
      const fields = roleFields(role, 'Roles are listed in id order, in /api/roles too. Another id moves the role to that place; its old id becomes free.');
      const deleteForm = form({
        label: 'Delete role',
        fields: [],
        submitLabel: 'Delete role',
        tone: 'danger',
        async onSubmit() {
          const sure = await confirmAction({
            title: `Delete role ${role.name}?`,
            message: h('p', null, `Role ${role.name} (${role.slug}) is removed from /api/roles for every key of this account at once. This cannot be undone.`),
            confirmLabel: 'Delete role',
          });
          if (!sure) return;
          await ctx.api.send('DELETE', rolesPath(ctx, role.id));
          ctx.navigate('roles', accountOf(ctx), { notice: `Role ${role.name} deleted.` });
        },
      });
      ctx.main.append(
        heading(`Role ${role.name}`),
        form({
          label: `Edit role ${role.name}`,
          fields: fieldList(fields),
          submitLabel: 'Save changes',
          actions: h('a', { href: ctx.href('roles', accountOf(ctx)) }, 'Cancel'),
          async onSubmit() {
            const saved = await ctx.api.send<Role>('PUT', rolesPath(ctx, role.id), roleBody(fields));
            ctx.navigate('roles', accountOf(ctx), { notice: saved.id === role.id ? `Role ${saved.name} saved.` : `Role ${saved.name} saved, now with id ${saved.id}.` });
          },
        }),
        h('section', { class: 'danger-zone', 'aria-labelledby': 'delete-role-title' },
          h('h2', { id: 'delete-role-title' }, 'Delete this role'),
          h('p', null, '/api/roles stops listing it for every key of this account at once.'),
          deleteForm,
        ),
      );
    },
  },
};
