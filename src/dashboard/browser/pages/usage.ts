/**
 * The Activity page's usage: the account's calls from the gateway's own counters (`…/usage`),
 * drawn per hour (a window of hours) or per UTC day (a window of days), each bar split by the
 * class of status the calls were answered with, for every key or one (chart.ts draws it, with the
 * table of the same figures), and the totals per key below. The counters know key ids only, so
 * keys are named from the account's keys and settings tokens; an id neither lists any more is a
 * deleted one, whose counts stay until they age out.
 */
import type { PageContext } from '../app.js';
import { stackedBars, type ChartPart, type ChartStep } from '../chart.js';
import { h, type Child } from '../dom.js';
import { selectField, type Field } from '../forms.js';
import type { Key, SettingsToken, Usage } from '../types.js';
import { empty, table, time } from '../ui.js';

/** What the account's keys and settings tokens are called, by id. */
export interface Names {
  keys: Map<string, Key>;
  tokens: Map<string, SettingsToken>;
}

/** A window the owner API reads: `hours` 1–24 (steps of an hour) or `days` 1–30 (steps of a UTC day). */
export interface UsageChoice {
  /** The select's value: hours as digits (`24`), days with a `d` (`30d`). */
  value: string;
  label: string;
  /** As a sentence: "the last 24 hours". */
  words: string;
  query: { hours: string } | { days: string };
}

function choiceOf(value: string): UsageChoice {
  const days = /^([0-9]{1,2})d$/.exec(value)?.[1];
  if (days !== undefined) {
    const words = days === '1' ? 'the last day' : `the last ${days} days`;
    return { value, label: `Last ${words.slice(9)}`, words, query: { days } };
  }
  const words = value === '1' ? 'the last hour' : `the last ${value} hours`;
  return { value, label: `Last ${words.slice(9)}`, words, query: { hours: value } };
}

export const USAGE_CHOICES: readonly UsageChoice[] = ['1', '6', '24', '7d', '30d'].map(choiceOf);
const DEFAULT_CHOICE = '24';

/** The window the page's query asks for (`hours` or `days`; 24 hours unless asked), as it was typed. */
export function usageChoice(query: URLSearchParams): UsageChoice {
  const days = query.get('days');
  if (days !== null) return choiceOf(`${days}d`);
  return choiceOf(query.get('hours') ?? DEFAULT_CHOICE);
}

/**
 * The window and key fields of the usage form. A window typed into the URL that the list lacks is
 * offered as it is. The key field offers every key and the one asked for until `offerKeys` adds
 * the account's (once their names are read).
 */
export function usageFields(choice: UsageChoice, keyId: string | undefined): { window: Field; key: Field } {
  const known = USAGE_CHOICES.some((c) => c.value === choice.value) || !/^[0-9]{1,2}d?$/.test(choice.value);
  const choices = known ? USAGE_CHOICES : [...USAGE_CHOICES, choice];
  const keys = [{ value: '', label: 'Every key and settings token' }, ...(keyId === undefined ? [] : [{ value: keyId, label: keyId }])];
  return {
    window: selectField({
      name: 'hours',
      label: 'Window',
      options: choices,
      value: choices.some((c) => c.value === choice.value) ? choice.value : DEFAULT_CHOICE,
      hint: 'Hours are drawn by the hour, days by the UTC day. Counts are flushed every few seconds and summed over every gateway instance sharing Redis, so the newest calls can take a moment to show. Sign-ins, public routes and refused tokens are not counted.',
    }),
    key: selectField({ name: 'keyId', label: 'Key', options: keys, value: keyId ?? '' }),
  };
}

/** Fills the key field with the account's keys and settings tokens by name (the one chosen stays chosen). */
export function offerKeys(field: Field, keyId: string | undefined, names: Names): void {
  const select = field.control as HTMLSelectElement;
  const options = [
    ...[...names.keys.values()].map((k) => ({ value: k.id, label: `${k.name === '' ? k.apiKey : k.name} (${k.id})` })),
    ...[...names.tokens.values()].map((t) => ({ value: t.id, label: `${t.name} (${t.id}, settings token)` })),
  ];
  if (keyId !== undefined && !options.some((o) => o.value === keyId)) options.push({ value: keyId, label: `${keyId} (deleted)` });
  select.replaceChildren(select.options[0]!, ...options.map((o) => h('option', { value: o.value }, o.label)));
  select.value = keyId ?? '';
}

/** A key's or settings token's name as a plain string (its id when it has none any more). */
function keyLabel(names: Names, id: string): string {
  const key = names.keys.get(id);
  if (key !== undefined) return key.name === '' ? key.apiKey : key.name;
  return names.tokens.get(id)?.name ?? id;
}

/** A key's or settings token's name as people know it, with its id; a deleted one by id. */
export function keyName(names: Names, id: string): { text: Child; kind: string } {
  const key = names.keys.get(id);
  if (key !== undefined) return { text: [key.name === '' ? key.apiKey : key.name, ' ', h('code', null, id)], kind: 'API key' };
  const token = names.tokens.get(id);
  if (token !== undefined) {
    return { text: [token.name, ' ', h('code', null, id), token.status === 'active' ? null : ` (${token.status})`], kind: 'API settings token' };
  }
  return { text: [h('code', null, id), ' (deleted)'], kind: id.startsWith('stk_') ? 'API settings token' : 'API key' };
}

const COUNT = new Intl.NumberFormat();
type StatusClass = keyof Usage['series'][number]['statuses'];

/** Bottom to top in each bar; 1xx (a WebSocket switched) only in a window that has some. */
const PARTS: readonly (ChartPart & { key: StatusClass })[] = [
  { key: '2xx', label: '2xx success', className: 'chart-2xx', mark: 'solid' },
  { key: '3xx', label: '3xx redirect', className: 'chart-3xx', mark: 'stripes' },
  { key: '4xx', label: '4xx client error', className: 'chart-4xx', mark: 'dots' },
  { key: '5xx', label: '5xx server error', className: 'chart-5xx', mark: 'cross' },
  { key: '1xx', label: '1xx WebSocket opened', className: 'chart-1xx', mark: 'lines' },
];

const HOUR = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const HOUR_LONG = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
// Steps of days are UTC days: named in UTC, or a day east of Greenwich would read as the day before.
const DAY = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short', timeZone: 'UTC' });
const DAY_LONG = new Intl.DateTimeFormat(undefined, { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', timeZone: 'UTC' });

/** The chart of the window's steps: per hour or per UTC day, each split by class of status. */
function usageChart(usage: Usage, choice: UsageChoice, who: string): HTMLElement {
  const byDay = usage.stepSeconds >= 86_400;
  const parts = PARTS.filter((part) => part.key !== '1xx' || usage.series.some((step) => step.statuses['1xx'] > 0));
  const steps: ChartStep[] = usage.series.map((step) => {
    const start = new Date(step.start);
    return {
      short: (byDay ? DAY : HOUR).format(start),
      long: (byDay ? DAY_LONG : HOUR_LONG).format(start),
      values: step.statuses,
    };
  });
  return stackedBars({
    title: `Calls per ${byDay ? 'day' : 'hour'} in ${choice.words}, ${who}`,
    stepHeading: byDay ? 'Day' : 'Hour',
    parts,
    steps,
    // About six labels under the bars, whatever their number: readable on a phone.
    labelEvery: Math.max(1, Math.ceil(steps.length / 6)),
    unit: 'calls',
  });
}

/** The counts of one row of the totals: each class of status that has any. */
function byStatus(statuses: Usage['items'][number]['statuses']): string {
  const seen = PARTS.filter((part) => statuses[part.key] > 0).map((part) => `${part.key}: ${COUNT.format(statuses[part.key])}`);
  return seen.length === 0 ? '—' : seen.join(', ');
}

/** The usage part of the page: the window, the chart with its table, the totals per key. */
export async function drawUsage(ctx: PageContext, account: string, choice: UsageChoice, keyId: string | undefined, names: () => Promise<Names>): Promise<Child> {
  const [usage, known] = await Promise.all([
    ctx.api.get<Usage>(`/accounts/${encodeURIComponent(account)}/usage`, { ...choice.query, keyId }),
    names(),
  ]);
  if (usage.enabled === false) return empty('This gateway does not count calls (its usage.enabled setting is off), so there is nothing to show.');
  const steps = usage.stepSeconds >= 86_400 ? 'by UTC day' : 'by hour';
  const range = h('p', null, 'From ', time(usage.from), ' to ', time(usage.to), `, ${steps}.`);
  const who = keyId === undefined ? 'every key' : keyLabel(known, keyId);
  if (usage.items.length === 0) return [range, empty(keyId === undefined ? `No calls in ${choice.words}.` : `No calls of this key in ${choice.words}.`)];
  const items = [...usage.items].sort((a, b) => b.requests + b.rateLimited - (a.requests + a.rateLimited) || a.keyId.localeCompare(b.keyId));
  return [
    range,
    usageChart(usage, choice, who),
    h('h3', null, `Calls per key in ${choice.words}`),
    table(`Calls per key in ${choice.words}`, ['Key', 'Kind', 'Requests', 'Rate-limited', 'By status'], items.map((item) => {
      const { text, kind } = keyName(known, item.keyId);
      return [text, kind, COUNT.format(item.requests), COUNT.format(item.rateLimited), byStatus(item.statuses)];
    })),
  ];
}
