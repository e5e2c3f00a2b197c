import { h } from '../dom.js';
import { form, selectField } from '../forms.js';
import { draw, empty, heading, pager, section, table, time } from '../ui.js';
/** The window the counters can be read over, in hours (the owner API takes 1 to 24). */
const WINDOWS = [
    { value: '1', label: 'Last hour' },
    { value: '6', label: 'Last 6 hours' },
    { value: '24', label: 'Last 24 hours' },
];
const DEFAULT_HOURS = '24';
const AUDIT_PAGE = 25;
/** Listings read whole to name things: past this many pages, the rest show by id. */
const NAME_PAGES = 10;
const COUNT = new Intl.NumberFormat();
const ACTIONS = {
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
const TARGETS = {
    account: 'Account',
    key: 'API key',
    settings_token: 'API settings token',
    role: 'Role',
    sign_record: 'Sign record',
    owner: 'Owner',
    invite: 'Invite',
};
const FIELDS = {
    signedNonce: 'signed nonce',
    signedAt: 'signed at',
    signedExpiredAt: 'signed expired at',
    expiresAt: 'expires at',
    previousValidUntil: 'previous secret valid until',
    mustChangePassword: 'must change password',
};
/** Every item of a listing, following its cursor (at most NAME_PAGES pages). */
async function everything(api, path) {
    const items = [];
    let cursor;
    for (let page = 0; page < NAME_PAGES; page++) {
        const answer = await api.get(path, { limit: 100, cursor });
        items.push(...answer.items);
        cursor = answer.nextCursor;
        if (cursor === undefined)
            break;
    }
    return items;
}
/** A promise made on first use and shared, forgotten when it fails so "Try again" asks again. */
function shared(make) {
    let made;
    return () => {
        made ??= make().catch((error) => {
            made = undefined;
            throw error;
        });
        return made;
    };
}
function hoursLabel(hours) {
    return hours === '1' ? 'the last hour' : `the last ${hours} hours`;
}
/** A key's or settings token's name as people know it, with its id; a deleted one by id. */
function keyName(names, id) {
    const key = names.keys.get(id);
    if (key !== undefined)
        return { text: [key.name === '' ? key.apiKey : key.name, ' ', h('code', null, id)], kind: 'API key' };
    const token = names.tokens.get(id);
    if (token !== undefined) {
        return { text: [token.name, ' ', h('code', null, id), token.status === 'active' ? null : ` (${token.status})`], kind: 'API settings token' };
    }
    return { text: [h('code', null, id), ' (deleted)'], kind: id.startsWith('stk_') ? 'API settings token' : 'API key' };
}
async function drawUsage(ctx, account, hours, names) {
    const [usage, known] = await Promise.all([
        ctx.api.get(`/accounts/${encodeURIComponent(account)}/usage`, { hours }),
        names(),
    ]);
    if (usage.enabled === false)
        return empty('This gateway does not count calls (its usage.enabled setting is off), so there is nothing to show.');
    const window = h('p', null, 'From ', time(usage.from), ' to ', time(usage.to), `, in steps of ${Math.round(usage.bucketSeconds / 60)} minutes.`);
    if (usage.items.length === 0)
        return [window, empty(`No calls in ${hoursLabel(hours)}.`)];
    const items = [...usage.items].sort((a, b) => b.requests + b.rateLimited - (a.requests + a.rateLimited) || a.keyId.localeCompare(b.keyId));
    return [
        window,
        table(`Calls per key in ${hoursLabel(hours)}`, ['Key', 'Kind', 'Requests', 'Rate-limited'], items.map((item) => {
            const { text, kind } = keyName(known, item.keyId);
            return [text, kind, COUNT.format(item.requests), COUNT.format(item.rateLimited)];
        })),
    ];
}
/**
 * A value from an event's `changes`, as text. Each value an owner wrote is its own <bdi>: a
 * description may hold bidi controls (only names refuse them), and one left open would turn
 * the rest of the line around, drawing the change's new value where the old one should be.
 */
function shown(value) {
    if (value === null || value === undefined)
        return '(none)';
    if (value === '')
        return '(empty)';
    if (typeof value === 'boolean')
        return value ? 'yes' : 'no';
    if (Array.isArray(value))
        return value.length === 0 ? '(none)' : value.map((item, i) => [i === 0 ? '' : ', ', shown(item)]);
    if (typeof value === 'object')
        return h('bdi', null, JSON.stringify(value));
    return h('bdi', null, String(value));
}
function changesOf(event) {
    const entries = Object.entries(event.changes ?? {});
    if (entries.length === 0)
        return '—';
    // A created object's fields had no value before, a deleted one's have none after.
    return h('ul', { class: 'changes' }, entries.map(([field, [before, after]]) => {
        const name = FIELDS[field] ?? field;
        if (before === null || before === undefined)
            return h('li', null, `${name}: `, shown(after));
        if (after === null || after === undefined)
            return h('li', null, `${name}: was `, shown(before));
        return h('li', null, `${name}: `, shown(before), ' → ', shown(after));
    }));
}
async function drawAudit(ctx, account, hours, names) {
    const path = `/accounts/${encodeURIComponent(account)}`;
    const cursor = ctx.query.get('cursor') ?? undefined;
    const [events, members, known] = await Promise.all([
        ctx.api.get(`${path}/audit`, { limit: AUDIT_PAGE, cursor }),
        everything(ctx.api, `${path}/members`),
        names(),
    ]);
    const emails = new Map(members.map((m) => [m.ownerId, m.email]));
    if (ctx.who?.kind === 'owner')
        emails.set(ctx.who.session.owner.id, ctx.who.session.owner.email);
    // Owners who have left are no longer members; an event that added them still says who they were.
    for (const event of events.items) {
        const email = event.changes?.email?.[1];
        if (event.target.type === 'owner' && typeof email === 'string' && !emails.has(event.target.id))
            emails.set(event.target.id, email);
    }
    const firstHref = cursor === undefined ? undefined : ctx.href('activity', { account }, { hours });
    const nextHref = events.nextCursor === undefined ? undefined : ctx.href('activity', { account }, { hours, cursor: events.nextCursor });
    const paging = pager({ nextHref, firstHref, label: 'Audit log pages' });
    if (events.items.length === 0) {
        return cursor === undefined
            ? empty('Nothing has been changed in this account yet.')
            : [empty('No older events.'), paging];
    }
    const who = (event) => {
        if (event.actor.type === 'operator')
            return 'Operator';
        if (event.actor.type === 'system')
            return 'The gateway';
        const id = event.actor.id ?? '';
        const email = event.actor.email ?? emails.get(id);
        return email === undefined ? ['Owner ', h('code', null, id)] : email;
    };
    const target = ({ target: { type, id } }) => {
        const label = TARGETS[type] ?? type;
        if (type === 'key' || type === 'settings_token') {
            const named = known.keys.get(id)?.name || known.tokens.get(id)?.name;
            return named ? [`${label} ${named} `, h('code', null, id)] : [`${label} `, h('code', null, id)];
        }
        if (type === 'owner' && emails.has(id))
            return `${label} ${emails.get(id)}`;
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
export const activityPages = {
    activity: {
        title: 'Activity',
        access: 'signed-in',
        async render(ctx) {
            const account = ctx.account.id;
            const asked = ctx.query.get('hours') ?? undefined;
            const hours = asked ?? DEFAULT_HOURS;
            // A window typed into the URL that the list lacks is offered as it is; one the owner API
            // refuses shows its message where the table would be.
            const choices = WINDOWS.some((w) => w.value === hours) || !/^[0-9]{1,2}$/.test(hours)
                ? WINDOWS
                : [...WINDOWS, { value: hours, label: `Last ${hours} hours` }];
            const windowField = selectField({
                name: 'hours',
                label: 'Window',
                options: choices,
                value: choices.some((c) => c.value === hours) ? hours : DEFAULT_HOURS,
                hint: 'Counts are flushed every few seconds and summed over every gateway instance sharing Redis, so the newest calls can take a moment to show. Sign-ins, public routes and refused tokens are not counted.',
            });
            const names = shared(async () => {
                const path = `/accounts/${encodeURIComponent(account)}`;
                const [keys, tokens] = await Promise.all([everything(ctx.api, `${path}/keys`), everything(ctx.api, `${path}/settings-tokens`)]);
                return { keys: new Map(keys.map((k) => [k.id, k])), tokens: new Map(tokens.map((s) => [s.id, s])) };
            });
            const usageBox = h('div');
            const auditBox = h('div');
            ctx.main.append(heading('Activity'), h('p', null, 'The calls this account\'s API keys and API settings tokens made lately, and every change made to the account.'), section('Usage', form({
                label: 'Usage window',
                fields: [windowField],
                submitLabel: 'Show',
                async onSubmit() {
                    ctx.navigate('activity', { account }, { query: { hours: windowField.control.value, cursor: ctx.query.get('cursor') ?? undefined } });
                },
            }), usageBox), section('Audit log', h('p', null, 'Every change made through the owner API or this dashboard, newest first: who made it, from which address, and what it changed.'), auditBox));
            await Promise.all([
                draw(usageBox, () => drawUsage(ctx, account, hours, names)),
                draw(auditBox, () => drawAudit(ctx, account, asked, names)),
            ]);
        },
    },
};
