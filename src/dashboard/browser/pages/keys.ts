/**
 * API keys: the account's keys with a form to make one (its secret shown once, here only), and
 * one key's page: its facts, an edit form, and the changes to what signs in with it (roll the
 * secret with an overlap, disable or enable, reset its tokens, delete), each asked first in
 * words that say what stops working.
 */
import { ApiError } from '../api.js';
import type { PageContext, PageDef } from '../app.js';
import { h, replace, type Child } from '../dom.js';
import { form, listOf, selectField, textField, valueOf } from '../forms.js';
import type { Key, KeyWithSecret, Page, Reset } from '../types.js';
import { confirmAction, confirmThen, draw, empty, heading, pager, problemBox, revealOnce, section, table, time, when, type ConfirmOptions } from '../ui.js';

const SCOPES_HINT = 'Words separated by commas or spaces, e.g. "read write". They are copied into the key\'s access tokens; routes may require one. Leave empty for none.';

/** The overlaps offered for a roll (the owner API takes 0 to 30 days). */
const OVERLAPS: readonly { seconds: number; label: string }[] = [
  { seconds: 0, label: 'None: the current secret stops at once' },
  { seconds: 3_600, label: '1 hour' },
  { seconds: 86_400, label: '1 day' },
  { seconds: 7 * 86_400, label: '7 days' },
  { seconds: 30 * 86_400, label: '30 days' },
];

/** What a key is called in sentences: demo and hand-written keys may have no name. */
function keyName(key: Key): string {
  return key.name === '' ? key.apiKey : key.name;
}

function keyPath(ctx: PageContext, keyId?: string): string {
  const base = `/accounts/${encodeURIComponent(ctx.params.account!)}/keys`;
  return keyId === undefined ? base : `${base}/${encodeURIComponent(keyId)}`;
}

function status(key: Key): HTMLElement {
  // A leak report (docs/leaks.md) outranks enabled: the key signs in no more until rolled.
  if (key.compromisedAt !== undefined) return h('span', { class: 'badge off', title: 'A secret scanner found its secret in public: roll the secret' }, 'Compromised');
  return h('span', { class: key.enabled ? 'badge' : 'badge off' }, key.enabled ? 'Enabled' : 'Disabled');
}

/** The key's last sign-in: the gateway writes it at most every 5 minutes, so "about". */
function lastUsed(key: Key): Child {
  return key.lastUsedAt === undefined ? 'never' : time(key.lastUsedAt);
}

function scopes(list: readonly string[]): Child {
  return list.length === 0 ? 'none' : h('span', { class: 'mono' }, list.join(' '));
}

/** How a client signs in with a key: the same words under a new and a rolled secret. */
function signInNote(key: Key): HTMLElement {
  return h('div', null,
    h('p', null, 'API key: ', h('code', null, key.apiKey)),
    h('p', null, 'Clients sign in with ', h('code', null, 'POST /api/signin'), ', sending ', h('code', null, 'apiKey'),
      ' and, as ', h('code', null, 'apiSecret'), ', the SHA-256 of this secret in hex (never the secret itself); they get an access and a refresh token.'),
  );
}

function showSecret(slot: HTMLElement, key: Key, secret: string, title: string): void {
  revealOnce(slot, { title, label: 'API secret', value: secret, note: signInNote(key) });
}

async function listKeys(ctx: PageContext): Promise<Child> {
  const cursor = ctx.query.get('cursor') ?? undefined;
  const page = await ctx.api.get<Page<Key>>(keyPath(ctx), { cursor });
  const account = ctx.params.account!;
  const nav = pager({
    label: 'Pages of API keys',
    nextHref: page.nextCursor === undefined ? undefined : ctx.href('keys', { account }, { cursor: page.nextCursor }),
    firstHref: cursor === undefined ? undefined : ctx.href('keys', { account }),
  });
  if (page.items.length === 0) return [empty(cursor === undefined ? 'This account has no API keys yet. Create one below.' : 'No more API keys.'), nav];
  return [
    // A roll's overlap is said under the status rather than in a column of its own, empty for
    // most keys: seven columns of unbroken words did not fit a 1280 px screen.
    table('API keys', ['Name', 'API key', 'Status', 'Scopes', 'Created', 'Last used'], page.items.map((key) => [
      h('a', { href: ctx.href('key', { account, key: key.id }) }, key.name === '' ? key.id : key.name),
      h('code', null, key.apiKey),
      key.previousValidUntil === undefined ? status(key) : [status(key), h('span', { class: 'cell-note' }, 'previous secret until ', time(key.previousValidUntil))],
      scopes(key.scopes),
      time(key.createdAt),
      lastUsed(key),
    ])),
    nav,
  ];
}

async function renderKeys(ctx: PageContext): Promise<void> {
  const created = h('div');
  const list = h('div');
  const name = textField({ name: 'name', label: 'Name', hint: 'What the key is for, e.g. "ci" or "billing service".', required: true });
  const description = textField({ name: 'description', label: 'Description', multiline: true, hint: 'Optional.' });
  const scopeField = textField({ name: 'scopes', label: 'Scopes', hint: SCOPES_HINT });
  ctx.main.append(
    heading('API keys'),
    h('p', null, 'API keys sign in at /api/signin and get access tokens for /api/sign, /api/roles and the gateway\'s routes.'),
    created,
    section('Keys', list),
    section('Create a key',
      form({
        label: 'Create an API key',
        fields: [name, description, scopeField],
        submitLabel: 'Create key',
        async onSubmit() {
          const made = await ctx.api.send<KeyWithSecret>('POST', keyPath(ctx), {
            name: valueOf(name),
            ...(valueOf(description) === '' ? {} : { description: description.control.value }),
            scopes: listOf(scopeField),
          });
          for (const field of [name, description, scopeField]) field.control.value = '';
          showSecret(created, made.key, made.apiSecret, `API secret for ${keyName(made.key)}`);
          await draw(list, () => listKeys(ctx));
        },
      }),
    ),
  );
  await draw(list, () => listKeys(ctx));
}

async function renderKey(ctx: PageContext): Promise<void> {
  let key: Key;
  try {
    key = await ctx.api.get<Key>(keyPath(ctx, ctx.params.key));
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    ctx.main.append(heading('API key not found'),
      h('p', null, 'There is no such key in this account: it may have been deleted. ', h('a', { href: ctx.href('keys', { account: ctx.params.account! }) }, 'Back to the API keys')));
    return;
  }
  drawKey(ctx, key);
}

/** The key's page; `rolled` is a new secret to show once at the top. */
function drawKey(ctx: PageContext, key: Key, rolled?: string): void {
  const called = keyName(key);
  const slot = h('div');
  const problem = problemBox();
  const name = textField({ name: 'name', label: 'Name', value: key.name, required: true });
  const description = textField({ name: 'description', label: 'Description', value: key.description, multiline: true });
  const scopeField = textField({ name: 'scopes', label: 'Scopes', value: key.scopes.join(' '), hint: `${SCOPES_HINT} Taking a scope away stops the key's access tokens at once.` });
  const overlap = selectField({
    name: 'overlapSeconds', label: 'Overlap', value: String(86_400),
    hint: 'How long the current secret keeps signing in next to the new one, so clients can be moved over without downtime.',
    options: OVERLAPS.map((choice) => ({ value: String(choice.seconds), label: choice.label })),
  });
  const danger = keyDangerZone(ctx, key, problem);
  replace(ctx.main,
    heading(`API key ${called}`, h('a', { href: ctx.href('keys', { account: ctx.params.account! }) }, 'All API keys')),
    slot,
    keyFacts(key),
    section('Edit',
      form({
        label: `Edit key ${called}`,
        fields: [name, description, scopeField],
        submitLabel: 'Save changes',
        async onSubmit() {
          await ctx.api.send<Key>('PATCH', keyPath(ctx, key.id), { name: valueOf(name), description: description.control.value, scopes: listOf(scopeField) });
          ctx.reload('Changes saved.');
        },
      }),
    ),
    rollSection(ctx, key, overlap),
    danger,
  );
  if (rolled !== undefined) showSecret(slot, key, rolled, `New API secret for ${called}`);
}

function keyFacts(key: Key): HTMLElement {
  return h('dl', { class: 'facts' },
    h('dt', null, 'API key'), h('dd', null, h('code', null, key.apiKey)),
    h('dt', null, 'Status'), h('dd', null, status(key)),
    key.compromisedAt === undefined ? null : [h('dt', null, 'Secret found in public'), h('dd', null, time(key.compromisedAt), ' (a secret-scanning report; the audit log says where): it signs in no more until you roll the secret')],
    h('dt', null, 'Scopes'), h('dd', null, scopes(key.scopes)),
    h('dt', null, 'Created'), h('dd', null, time(key.createdAt)),
    h('dt', null, 'Last used'), h('dd', null, lastUsed(key)),
    h('dt', null, 'Previous secret valid until'), h('dd', null, key.previousValidUntil === undefined ? 'no previous secret signs in' : time(key.previousValidUntil)),
    // Bound through the owner API or gatewayctl (docs/tls.md): shown, not yet changed, here.
    key.certificateSha256 === undefined ? null : [h('dt', null, 'Client certificate (SHA-256)'), h('dd', null, h('code', null, key.certificateSha256))],
    key.description === '' ? null : [h('dt', null, 'Description'), h('dd', { class: 'multiline' }, key.description)],
  );
}

/** Rolling the secret, asked to confirm with the overlap spelt out; the page drawn again with the new secret. */
function rollSection(ctx: PageContext, key: Key, overlap: ReturnType<typeof selectField>): HTMLElement {
  const called = keyName(key);
  return section('Roll the secret',
    h('p', null, 'Gives the key a new secret, shown once, and keeps its API key. Access tokens already issued are not affected: reset the tokens to end them too.'),
    form({
      label: `Roll the secret of key ${called}`,
      fields: [overlap],
      submitLabel: 'Roll secret',
      async onSubmit() {
        const seconds = Number(overlap.control.value);
        const choice = OVERLAPS.find((o) => o.seconds === seconds)?.label ?? `${seconds} seconds`;
        const ok = await confirmAction({
          title: `Roll the secret of key ${called}?`,
          message: seconds === 0
            ? h('p', null, `The current secret of key ${called} stops signing in at once; clients still using it cannot sign in until they get the new one.`)
            : h('p', null, `The current secret of key ${called} keeps signing in for ${choice}, until ${when(new Date(Date.now() + seconds * 1000).toISOString())}, and then stops. Give clients the new secret before then.`),
          confirmLabel: 'Roll secret',
        });
        if (!ok) return;
        const rolledKey = await ctx.api.send<KeyWithSecret>('POST', `${keyPath(ctx, key.id)}/roll`, { overlapSeconds: seconds });
        drawKey(ctx, rolledKey.key, rolledKey.apiSecret);
      },
    }),
  );
}

/** Disable or enable, reset the tokens, delete: each asked to confirm, failures shown in `problem`. */
function keyDangerZone(ctx: PageContext, key: Key, problem: ReturnType<typeof problemBox>): HTMLElement {
  const called = keyName(key);
  const act = (question: ConfirmOptions, change: () => Promise<void>) => confirmThen(problem, question, change);
  const toggle = key.enabled
    ? h('button', { type: 'button', class: 'danger', onclick: () => void act({
      title: `Disable key ${called}?`,
      message: [h('p', null, `Every access and refresh token key ${called} has issued stops working at once, and it cannot sign in until it is enabled again.`),
        h('p', null, 'Enabling it later lets it sign in again, but the tokens from before stay refused.')],
      confirmLabel: 'Disable key',
    }, async () => {
      await ctx.api.send<Key>('PATCH', keyPath(ctx, key.id), { enabled: false });
      ctx.reload(`Key ${called} disabled: its tokens are refused and it cannot sign in.`);
    }) }, 'Disable key')
    : h('button', { type: 'button', onclick: () => void act({
      title: `Enable key ${called}?`,
      message: h('p', null, `Key ${called} can sign in again with its secret. Tokens it issued before it was disabled stay refused.`),
      confirmLabel: 'Enable key',
      tone: 'normal',
    }, async () => {
      await ctx.api.send<Key>('PATCH', keyPath(ctx, key.id), { enabled: true });
      ctx.reload(`Key ${called} enabled: it can sign in again.`);
    }) }, 'Enable key');

  const danger = section('Danger zone',
    problem,
    h('h3', null, key.enabled ? 'Disable' : 'Enable'),
    h('p', null, key.enabled ? 'Stops the key at once: its tokens are refused and it cannot sign in until enabled again.' : 'The key is disabled: it cannot sign in.'),
    toggle,
    h('h3', null, 'Reset tokens'),
    h('p', null, 'Ends every access and refresh token of this key, for example when one has leaked. The key and its secret stay.'),
    h('button', { type: 'button', class: 'danger', onclick: () => void act({
      title: `Reset the tokens of key ${called}?`,
      message: [h('p', null, `Every access and refresh token of key ${called} stops working at once; clients must sign in again.`),
        h('p', null, 'The key and its secret stay as they are, so clients can sign in again straight away.')],
      confirmLabel: 'Reset tokens',
    }, async () => {
      const reset = await ctx.api.send<Reset>('POST', `${keyPath(ctx, key.id)}/reset`);
      ctx.reload(`Tokens of key ${called} reset at ${when(reset.resetAt)}: clients must sign in again.`);
    }) }, 'Reset tokens'),
    h('h3', null, 'Delete'),
    h('p', null, 'Removes the key for good.'),
    h('button', { type: 'button', class: 'danger', onclick: () => void act({
      title: `Delete key ${called}?`,
      message: h('p', null, `Key ${called} can no longer sign in, and every token it issued stops working at once. This cannot be undone.`),
      confirmLabel: 'Delete key',
    }, async () => {
      await ctx.api.send('DELETE', keyPath(ctx, key.id));
      ctx.navigate('keys', { account: ctx.params.account! }, { notice: `Key ${called} deleted.` });
    }) }, 'Delete key'),
  );
  danger.classList.add('danger-zone');
  return danger;
}

export const keyPages: Record<'keys' | 'key', PageDef> = {
  keys: { title: 'API keys', access: 'signed-in', render: renderKeys },
  key: { title: 'API key', access: 'signed-in', render: renderKey },
};
