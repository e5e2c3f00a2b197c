/**
 * Activity: what the account's keys did lately and what was changed in it. Usage (usage.ts) comes
 * from the gateway's own counters (`…/usage`): a chart per hour or day and the totals per key.
 * The audit log names owners by the email the API gives with each event (and for a target, where
 * the account's members or the events themselves tell it).
 */
import type { PageContext, PageDef } from '../app.js';
import type { Api } from '../api.js';
import { h, type Child } from '../dom.js';
import { form } from '../forms.js';
import type { AuditEvent, Key, Page, SettingsToken } from '../types.js';
import { draw, empty, heading, pager, section, table, time } from '../ui.js';
import { drawUsage, offerKeys, usageChoice, usageFields, type Names } from './usage.js';

/** `GET …/members` (docs/owner.md: Member). */
interface Member {
  ownerId: string;
  email: string;
  addedAt: string;
}

const AUDIT_PAGE = 25;
/** Listings read whole to name things: past this many pages, the rest show by id. */
const NAME_PAGES = 10;

const ACTIONS: Record<string, string> = {
  'account.create': 'Account created',
  'account.update': 'Account changed',
  'account.delete': 'Account deleted',
  'account.reset': 'All tokens of the account reset',
  'member.add': 'Owner added',
  'member.remove': 'Owner removed',
  'invite.create': 'Owner invited',
  'invite.accept': 'Invite accepted',
  'invite.revoke': 'Invite revoked',
  'owner.password_change': 'Password changed',
  'key.create': 'API key created',
  'key.update': 'API key changed',
  'key.delete': 'API key deleted',
  'key.roll': 'API key secret rolled',
  'key.reset': 'All tokens of the API key reset',
  'settings_token.create': 'API settings token created',
  'settings_token.revoke': 'API settings token revoked',
  'role.create': 'Role created',
  'role.update': 'Role changed',
  'role.delete': 'Role deleted',
  'sign_record.create': 'Sign record created',
  'sign_record.update': 'Sign record changed',
  'sign_record.delete': 'Sign record deleted',
};

const TARGETS: Record<string, string> = {
  account: 'Account',
  key: 'API key',
  settings_token: 'API settings token',
  role: 'Role',
  sign_record: 'Sign record',
  owner: 'Owner',
  invite: 'Invite',
};

const FIELDS: Record<string, string> = {
  signedNonce: 'signed nonce',
  signedAt: 'signed at',
  signedExpiredAt: 'signed expired at',
  expiresAt: 'expires at',
  previousValidUntil: 'previous secret valid until',
  mustChangePassword: 'must change password',
};

/** Every item of a listing, following its cursor (at most NAME_PAGES pages). */
async function everything<T>(api: Api, path: string): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < NAME_PAGES; page++) {
    const answer = await api.get<Page<T>>(path, { limit: 100, cursor });
    items.push(...answer.items);
    cursor = answer.nextCursor;
    if (cursor === undefined) break;
  }
  return items;
}

/** A promise made on first use and shared, forgotten when it fails so "Try again" asks again. */
function shared<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => {
    made ??= make().catch((error: unknown) => {
      made = undefined;
      throw error;
    });
    return made;
  };
}

/**
 * A value from an event's `changes`, as text. Each value an owner wrote is its own <bdi>: a
 * description may hold bidi controls (only names refuse them), and one left open would turn
 * the rest of the line around, drawing the change's new value where the old one should be.
 */
function shown(value: unknown): Child {
  if (value === null || value === undefined) return '(none)';
  if (value === '') return '(empty)';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (Array.isArray(value)) return value.length === 0 ? '(none)' : value.map((item, i) => [i === 0 ? '' : ', ', shown(item)]);
  if (typeof value === 'object') return h('bdi', null, JSON.stringify(value));
  return h('bdi', null, String(value));
}

function changesOf(event: AuditEvent): Child {
  const entries = Object.entries(event.changes ?? {});
  if (entries.length === 0) return '—';
  // A created object's fields had no value before, a deleted one's have none after.
  return h('ul', { class: 'changes' }, entries.map(([field, [before, after]]) => {
    const name = FIELDS[field] ?? field;
    if (before === null || before === undefined) return h('li', null, `${name}: `, shown(after));
    if (after === null || after === undefined) return h('li', null, `${name}: was `, shown(before));
    return h('li', null, `${name}: `, shown(before), ' → ', shown(after));
  }));
}

/** `kept`: the usage window and key the page was asked for, kept in the paging links. */
async function drawAudit(ctx: PageContext, account: string, kept: Record<string, string | undefined>, names: () => Promise<Names>): Promise<Child> {
  const path = `/accounts/${encodeURIComponent(account)}`;
  const cursor = ctx.query.get('cursor') ?? undefined;
  const [events, members, known] = await Promise.all([
    ctx.api.get<Page<AuditEvent>>(`${path}/audit`, { limit: AUDIT_PAGE, cursor }),
    everything<Member>(ctx.api, `${path}/members`),
    names(),
  ]);
  const emails = new Map(members.map((m) => [m.ownerId, m.email]));
  if (ctx.who?.kind === 'owner') emails.set(ctx.who.session.owner.id, ctx.who.session.owner.email);
  // Owners who have left are no longer members; an event that added them still says who they were.
  for (const event of events.items) {
    const email = event.changes?.email?.[1];
    if (event.target.type === 'owner' && typeof email === 'string' && !emails.has(event.target.id)) emails.set(event.target.id, email);
  }
  const firstHref = cursor === undefined ? undefined : ctx.href('activity', { account }, kept);
  const nextHref = events.nextCursor === undefined ? undefined : ctx.href('activity', { account }, { ...kept, cursor: events.nextCursor });
  const paging = pager({ nextHref, firstHref, label: 'Audit log pages' });
  if (events.items.length === 0) {
    return cursor === undefined
      ? empty('Nothing has been changed in this account yet.')
      : [empty('No older events.'), paging];
  }

  const who = (event: AuditEvent): Child => {
    if (event.actor.type === 'operator') return 'Operator';
    if (event.actor.type === 'system') return 'The gateway';
    const id = event.actor.id ?? '';
    const email = event.actor.email ?? emails.get(id);
    return email === undefined ? ['Owner ', h('code', null, id)] : email;
  };
  const target = ({ target: { type, id } }: AuditEvent): Child => {
    const label = TARGETS[type] ?? type;
    if (type === 'key' || type === 'settings_token') {
      const named = known.keys.get(id)?.name || known.tokens.get(id)?.name;
      return named ? [`${label} ${named} `, h('code', null, id)] : [`${label} `, h('code', null, id)];
    }
    if (type === 'owner' && emails.has(id)) return `${label} ${emails.get(id)}`;
    return [`${label} `, h('code', null, id)];
  };
  return [
    table('Audit log, newest first', ['When', 'Who', 'Action', 'Target', 'Address', 'Changes'], events.items.map((event) => [
      time(event.at),
      who(event),
      ACTIONS[event.action] ?? event.action,
      target(event),
      event.ip === undefined ? '—' : h('code', null, event.ip),
      changesOf(event),
    ])),
    paging,
  ];
}

export const activityPages: Record<'activity', PageDef> = {
  activity: {
    title: 'Activity',
    access: 'signed-in',
    async render(ctx) {
      const account = ctx.account!.id;
      // A window typed into the URL that the list lacks is offered as it is; one the owner API
      // refuses shows its message where the chart would be.
      const choice = usageChoice(ctx.query);
      const keyId = ctx.query.get('key') ?? undefined;
      const asked = { hours: ctx.query.get('hours') ?? undefined, days: ctx.query.get('days') ?? undefined, key: keyId };
      const fields = usageFields(choice, keyId);
      const names = shared(async (): Promise<Names> => {
        const path = `/accounts/${encodeURIComponent(account)}`;
        const [keys, tokens] = await Promise.all([everything<Key>(ctx.api, `${path}/keys`), everything<SettingsToken>(ctx.api, `${path}/settings-tokens`)]);
        return { keys: new Map(keys.map((k) => [k.id, k])), tokens: new Map(tokens.map((s) => [s.id, s])) };
      });
      names().then((known) => offerKeys(fields.key, keyId, known), () => {});
      const usageBox = h('div');
      const auditBox = h('div');
      ctx.main.append(
        heading('Activity'),
        h('p', null, 'The calls this account\'s API keys and API settings tokens made lately, and every change made to the account.'),
        section('Usage',
          form({
            label: 'Usage window',
            fields: [fields.window, fields.key],
            submitLabel: 'Show',
            async onSubmit() {
              const chosen = fields.window.control.value;
              const period = chosen.endsWith('d') ? { days: chosen.slice(0, -1) } : { hours: chosen };
              ctx.navigate('activity', { account }, { query: { ...period, key: fields.key.control.value || undefined, cursor: ctx.query.get('cursor') ?? undefined } });
            },
          }),
          usageBox,
        ),
        section('Audit log',
          h('p', null, 'Every change made through the owner API or this dashboard, newest first: who made it, from which address, and what it changed.'),
          auditBox,
        ),
      );
      await Promise.all([
        draw(usageBox, () => drawUsage(ctx, account, choice, keyId, names)),
        draw(auditBox, () => drawAudit(ctx, account, asked, names)),
      ]);
    },
  },
};
