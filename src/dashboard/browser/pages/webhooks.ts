/**
 * Webhooks: where the account's owner events go (docs/webhooks.md). Endpoints listed (never
 * their secrets), added with a URL, a description and the events asked for (the signing secret
 * shown once), sent a test event, given a new secret, turned off and on, deleted; and one
 * endpoint's delivery log (`?log=<id>`), newest attempt first.
 */
import type { PageContext, PageDef } from '../app.js';
import { ApiError, describeError } from '../api.js';
import { h, replace, type Child } from '../dom.js';
import { checkboxField, form, listOf, selectField, textField, valueOf } from '../forms.js';
import type { Webhook, WebhookAttempt, WebhookTestResult, WebhookWithSecret } from '../types.js';
import { confirmThen, draw, empty, heading, problemBox, revealOnce, section, table, time, when } from '../ui.js';

/** The event types an endpoint may ask for (the owner API refuses others with a 400 naming them). */
const EVENT_TYPES = ['key.created', 'key.reset', 'key.rolled', 'key.leak_reported', 'settings_token.created', 'settings_token.revoked', 'settings_token.leak_reported', 'member.added', 'member.removed', 'invite.accepted'];

function hooksPath(ctx: PageContext, id?: string, tail = ''): string {
  const base = `/accounts/${encodeURIComponent(ctx.params.account!)}/webhooks`;
  return id === undefined ? base : `${base}/${encodeURIComponent(id)}${tail}`;
}

/** The overlaps offered for a roll (the owner API takes 0 to 30 days, as an API key's roll). */
const OVERLAPS: readonly { value: string; label: string }[] = [
  { value: '0', label: 'No time: the new secret alone signs' },
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: String(7 * 86_400), label: '7 days' },
];

/** The signing secret, shown once after a create or a roll (`overlapping`: the replaced one still signs for a while). */
function revealSecret(slot: HTMLElement, made: WebhookWithSecret, overlapping: boolean | undefined): void {
  revealOnce(slot, {
    title: `${overlapping === undefined ? 'Signing secret' : 'New signing secret'} of ${made.webhook.url}`,
    label: 'Webhook signing secret',
    value: made.secret,
    kept: 'the gateway keeps it only to sign deliveries',
    note: h('p', null, 'Check each delivery\'s ', h('code', null, 'webhook-signature'), ' with it (Standard Webhooks: docs/webhooks.md shows how).',
      overlapping === undefined ? '' : overlapping && made.webhook.previousValidUntil !== undefined ? ` Until ${when(made.webhook.previousValidUntil)} the replaced secret signs each delivery too.` : ' Deliveries from now on are signed with this secret only.'),
  });
}

function actions(ctx: PageContext, hook: Webhook, slots: { problem: HTMLElement; created: HTMLElement }): HTMLElement {
  const { problem, created } = slots;
  const what = h('span', { class: 'visually-hidden' }, ` ${hook.url}`);
  const test = async () => {
    problem.hidden = true;
    try {
      const sent = await ctx.api.send<WebhookTestResult>('POST', hooksPath(ctx, hook.id, '/test'));
      ctx.reload(sent.ok ? `Test event delivered to ${hook.url} (${sent.status}).` : `Test event to ${hook.url} failed: ${sent.error ?? `answered ${sent.status}`}.`);
    } catch (error) {
      // As confirmThen: an ended session goes back to sign-in by itself; a refusal (429) is said here.
      if (error instanceof ApiError && error.code === 'session_required') return;
      problem.hidden = false;
      replace(problem, describeError(error));
    }
  };
  const toggle = () => confirmThen(problem, {
    title: `${hook.enabled ? 'Turn off' : 'Turn on'} the webhook to ${hook.url}?`,
    message: h('p', null, hook.enabled ? 'Events are no longer sent to it; those waiting are dropped.' : 'Events are sent to it again from now on.'),
    confirmLabel: hook.enabled ? 'Turn off' : 'Turn on', tone: hook.enabled ? 'danger' : 'normal',
  }, async () => {
    await ctx.api.send<Webhook>('PATCH', hooksPath(ctx, hook.id), { enabled: !hook.enabled });
    ctx.reload(`Webhook to ${hook.url} turned ${hook.enabled ? 'off' : 'on'}.`);
  });
  const roll = () => {
    const keep = selectField({ name: 'overlapSeconds', label: 'The current secret goes on signing for', value: '0', options: OVERLAPS });
    return confirmThen(problem, {
      title: `New signing secret for ${hook.url}?`,
      message: [h('p', null, 'Deliveries are signed with the new secret from now on; during the overlap the current one signs each delivery too, so the receiver can move to the new one without missing any.'), keep.row],
      confirmLabel: 'Make a new secret', tone: 'normal',
    }, async () => revealSecret(created, await ctx.api.send<WebhookWithSecret>('POST', hooksPath(ctx, hook.id, '/roll-secret'), { overlapSeconds: Number(keep.control.value) }), Number(keep.control.value) > 0));
  };
  const remove = () => confirmThen(problem, {
    title: `Delete the webhook to ${hook.url}?`,
    message: h('p', null, 'Nothing more is sent to it, and its delivery log goes with it.'),
    confirmLabel: 'Delete webhook',
  }, async () => {
    await ctx.api.send('DELETE', hooksPath(ctx, hook.id));
    ctx.reload(`Webhook to ${hook.url} deleted.`);
  });
  return h('div', { class: 'actions' },
    h('a', { href: ctx.href('webhooks', { account: ctx.params.account! }, { log: hook.id }) }, 'Deliveries', what.cloneNode(true)),
    h('button', { type: 'button', onclick: () => void test() }, 'Send test', what.cloneNode(true)),
    h('button', { type: 'button', onclick: () => void toggle() }, hook.enabled ? 'Turn off' : 'Turn on', what.cloneNode(true)),
    h('button', { type: 'button', onclick: () => void roll() }, 'New secret', what.cloneNode(true)),
    h('button', { type: 'button', class: 'danger', onclick: () => void remove() }, 'Delete', what),
  );
}

async function listHooks(ctx: PageContext, slots: { problem: HTMLElement; created: HTMLElement }): Promise<Child> {
  const { items } = await ctx.api.get<{ items: Webhook[] }>(hooksPath(ctx));
  if (items.length === 0) return empty('This account sends no webhooks yet. Add an endpoint below.');
  return table('Webhook endpoints', ['URL', 'Description', 'Events', 'Status', 'Created', 'Actions'], items.map((hook) => [
    h('code', null, hook.url),
    hook.description === '' ? '—' : hook.description,
    hook.events.length === 0 ? 'all' : h('span', { class: 'mono' }, hook.events.join(' ')),
    h('span', { class: hook.enabled ? 'badge' : 'badge off' }, hook.enabled ? 'On' : 'Off'),
    time(hook.createdAt),
    actions(ctx, hook, slots),
  ]));
}

async function deliveryLog(ctx: PageContext, id: string): Promise<Child> {
  const { items } = await ctx.api.get<{ items: WebhookAttempt[] }>(hooksPath(ctx, id, '/deliveries'));
  if (items.length === 0) return empty('No delivery yet. Send a test event to try the endpoint.');
  return table('Delivery attempts, newest first', ['When', 'Event', 'Attempt', 'Result', 'Status', 'Took', 'Message id'], items.map((a) => [
    time(a.at),
    h('code', null, a.type),
    String(a.attempt),
    h('span', { class: a.ok ? 'badge' : 'badge off' }, a.ok ? 'Delivered' : 'Failed'),
    a.status === undefined ? (a.error ?? '—') : a.ok ? String(a.status) : `${a.status}${a.error === undefined ? '' : `: ${a.error}`}`,
    `${a.durationMs} ms`,
    h('code', null, a.deliveryId),
  ]));
}

async function renderWebhooks(ctx: PageContext): Promise<void> {
  const created = h('div');
  const problem = problemBox();
  const list = h('div');
  const url = textField({ name: 'url', label: 'URL', required: true, hint: 'https:// and a public address, e.g. https://hooks.example.com/gateway.' });
  const description = textField({ name: 'description', label: 'Description', hint: 'What receives it (optional).' });
  const events = textField({ name: 'events', label: 'Events', hint: `Separated by commas or spaces; empty for all: ${EVENT_TYPES.join(', ')}.` });
  const enabled = checkboxField({ name: 'enabled', label: 'Send events now', checked: true });
  const slots = { problem, created };
  const load = () => listHooks(ctx, slots);
  const logOf = ctx.query.get('log');
  const log = h('div');
  ctx.main.append(
    heading('Webhooks'),
    h('p', null, 'The gateway tells these endpoints about changes to the account (keys made, reset or leaked, settings tokens, members), signed, and tries again for a while when one fails.'),
    created,
    section('Endpoints', problem, list),
    ...(logOf === null ? [] : [section('Deliveries', log)]),
    section('Add an endpoint',
      form({
        label: 'Add a webhook endpoint',
        fields: [url, description, events, enabled],
        submitLabel: 'Add endpoint',
        async onSubmit() {
          const made = await ctx.api.send<WebhookWithSecret>('POST', hooksPath(ctx), {
            url: valueOf(url),
            ...(valueOf(description) === '' ? {} : { description: valueOf(description) }),
            events: listOf(events),
            enabled: (enabled.control as HTMLInputElement).checked,
          });
          url.control.value = '';
          description.control.value = '';
          events.control.value = '';
          revealSecret(created, made, undefined);
          await draw(list, load);
        },
      }),
    ),
  );
  await Promise.all([draw(list, load), logOf === null ? undefined : draw(log, () => deliveryLog(ctx, logOf))]);
}

export const webhookPages: Record<'webhooks', PageDef> = {
  webhooks: { title: 'Webhooks', access: 'signed-in', render: renderWebhooks },
};
