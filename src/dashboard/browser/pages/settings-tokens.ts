/**
 * API settings tokens: long-lived bearer tokens (`gwst_…`) for /api/sign, /api/roles and the
 * proxied routes. Listed with what the gateway keeps of them (their first characters, never
 * the token), made with a name, scopes and an expiry (the token shown once), and revoked.
 */
import type { PageContext, PageDef } from '../app.js';
import { h, type Child } from '../dom.js';
import { form, listOf, selectField, textField, valueOf } from '../forms.js';
import type { Page, SettingsToken, SettingsTokenWithToken } from '../types.js';
import { confirmThen, draw, empty, heading, pager, problemBox, revealOnce, section, table, time, when } from '../ui.js';

const DAY = 86_400;
const EXPIRIES: readonly { value: string; label: string }[] = [
  { value: String(7 * DAY), label: '7 days' },
  { value: String(30 * DAY), label: '30 days' },
  { value: String(90 * DAY), label: '90 days' },
  { value: String(365 * DAY), label: '1 year' },
  { value: 'never', label: 'No expiry' },
];

const STATUS: Record<SettingsToken['status'], string> = { active: 'Active', revoked: 'Revoked', expired: 'Expired' };

function tokensPath(ctx: PageContext, id?: string): string {
  const base = `/accounts/${encodeURIComponent(ctx.params.account!)}/settings-tokens`;
  return id === undefined ? base : `${base}/${encodeURIComponent(id)}`;
}

function revokeButton(ctx: PageContext, token: SettingsToken, problem: HTMLElement): HTMLElement {
  const revoke = () => confirmThen(problem, {
    title: `Revoke API settings token ${token.name}?`,
    message: [
      h('p', null, `Every call made with ${token.name} (${token.start}…) is refused at once, on every instance of the gateway, for good: a revoked token cannot be turned back on.`),
      h('p', null, 'Whatever uses it needs a new token.'),
    ],
    confirmLabel: 'Revoke token',
  }, async () => {
    await ctx.api.send<SettingsToken>('DELETE', tokensPath(ctx, token.id));
    ctx.reload(`API settings token ${token.name} revoked: calls with it are refused.`);
  });
  // The visible word, then which token: the accessible name starts with what is seen.
  return h('button', { type: 'button', class: 'danger', onclick: () => void revoke() }, 'Revoke', h('span', { class: 'visually-hidden' }, ` ${token.name} (${token.start}…)`));
}

async function listTokens(ctx: PageContext, problem: HTMLElement): Promise<Child> {
  const cursor = ctx.query.get('cursor') ?? undefined;
  const page = await ctx.api.get<Page<SettingsToken>>(tokensPath(ctx), { cursor });
  const account = ctx.params.account!;
  const nav = pager({
    label: 'Pages of API settings tokens',
    nextHref: page.nextCursor === undefined ? undefined : ctx.href('settingsTokens', { account }, { cursor: page.nextCursor }),
    firstHref: cursor === undefined ? undefined : ctx.href('settingsTokens', { account }),
  });
  if (page.items.length === 0) return [empty(cursor === undefined ? 'This account has no API settings tokens yet. Create one below.' : 'No more API settings tokens.'), nav];
  return [
    table('API settings tokens', ['Name', 'Starts with', 'Scopes', 'Status', 'Created', 'Expires', 'Last used', 'Actions'], page.items.map((token) => [
      token.name,
      h('code', null, `${token.start}…`),
      token.scopes.length === 0 ? 'none' : h('span', { class: 'mono' }, token.scopes.join(' ')),
      h('span', { class: token.status === 'active' ? 'badge' : 'badge off' }, STATUS[token.status]),
      time(token.createdAt),
      token.expiresAt === undefined ? 'never' : time(token.expiresAt),
      token.lastUsedAt === undefined ? 'not yet' : time(token.lastUsedAt),
      token.status === 'active' ? revokeButton(ctx, token, problem) : token.revokedAt === undefined ? '—' : ['revoked ', time(token.revokedAt)],
    ])),
    nav,
  ];
}

async function renderSettingsTokens(ctx: PageContext): Promise<void> {
  const created = h('div');
  const problem = problemBox();
  const list = h('div');
  const name = textField({ name: 'name', label: 'Name', required: true, hint: 'Who or what uses it, e.g. "reporting job".' });
  const scopeField = textField({ name: 'scopes', label: 'Scopes', hint: 'Words separated by commas or spaces, e.g. "read". Routes may require one. Leave empty for none.' });
  const expiry = selectField({
    name: 'expiresInSeconds', label: 'Expiry', value: String(90 * DAY), options: EXPIRIES,
    hint: 'The gateway\'s operator may cap the lifetime (owner.settingsTokenMaxDays): a longer choice, or no expiry, then gets that cap. The listing shows the real expiry.',
  });
  const load = () => listTokens(ctx, problem);
  ctx.main.append(
    heading('API settings tokens'),
    h('p', null, 'Long-lived tokens for programs that call the gateway without signing in with an API key. Each works until it expires or is revoked.'),
    created,
    section('Tokens', problem, list),
    section('Create a token',
      form({
        label: 'Create an API settings token',
        fields: [name, scopeField, expiry],
        submitLabel: 'Create token',
        async onSubmit() {
          const made = await ctx.api.send<SettingsTokenWithToken>('POST', tokensPath(ctx), {
            name: valueOf(name),
            scopes: listOf(scopeField),
            ...(expiry.control.value === 'never' ? {} : { expiresInSeconds: Number(expiry.control.value) }),
          });
          name.control.value = '';
          scopeField.control.value = '';
          const token = made.settingsToken;
          revealOnce(created, {
            title: `API settings token ${token.name}`,
            label: 'API settings token',
            value: made.token,
            note: h('div', null,
              h('p', null, token.expiresAt === undefined ? 'It never expires: revoke it when it is no longer needed.' : `It expires ${when(token.expiresAt)}.`),
              h('p', null, 'Send it as ', h('code', null, 'Authorization: Bearer gwst_…'), ' on /api/sign, /api/roles and the gateway\'s proxied routes. Backends are told its id, ',
                h('code', null, token.id), ', in X-Key-Id.'),
            ),
          });
          await draw(list, load);
        },
      }),
    ),
  );
  await draw(list, load);
}

export const settingsTokenPages: Record<'settingsTokens', PageDef> = {
  settingsTokens: { title: 'API settings tokens', access: 'signed-in', render: renderSettingsTokens },
};
