/**
 * Sign records, one address at a time: look it up, see the record exactly as `/api/sign`
 * serves it (the owner API's `…/served`, read by the code /api/sign uses, so what is shown is
 * what clients get), change its nonce and times, delete it, or create one for an address that
 * has none. The address is kept in the URL (`?address=`), so a lookup can be linked and
 * reloaded. Where the gateway does not write sign records, the owner API refuses reads too
 * (409 read_only_store), and the page says so rather than showing a failure.
 */
import { ApiError } from '../api.js';
import type { PageContext, PageDef } from '../app.js';
import { append, h, type Child } from '../dom.js';
import { fieldMessage, form, numberOf, textField, valueOf, type Field } from '../forms.js';
import type { ServedSignRecord, SignRecord } from '../types.js';
import { confirmAction, heading, section } from '../ui.js';

const DAY_MS = 24 * 60 * 60 * 1000;

function recordsPath(ctx: PageContext, address?: string): string {
  const base = `/accounts/${encodeURIComponent(ctx.account!.id)}/sign-records`;
  return address === undefined ? base : `${base}/${encodeURIComponent(address)}`;
}

function isStatus(error: unknown, status: number, code?: string): error is ApiError {
  return error instanceof ApiError && error.status === status && (code === undefined || error.code === code);
}

/** An ISO 8601 time as people type it back: without milliseconds when there are none. */
function typedTime(iso: string): string {
  return iso.replace(/\.000Z$/, 'Z');
}

interface TimeFields {
  nonce: Field;
  signedAt: Field;
  expiresAt: Field;
}

function timeFields(values: { signedNonce: number; signedAt: string; signedExpiredAt: string }): TimeFields {
  return {
    nonce: textField({ name: 'signedNonce', label: 'Signed nonce', value: String(values.signedNonce), hint: 'A whole number from 0.', inputmode: 'numeric', required: true, size: 20 }),
    signedAt: textField({ name: 'signedAt', label: 'Signed at', value: typedTime(values.signedAt), hint: 'ISO 8601 with Z or an offset, e.g. 2026-06-01T10:00:00Z or 2026-06-01T12:00:00+02:00. /api/sign shows it as YYYY-MM-DD HH:MM:SS.', required: true }),
    expiresAt: textField({ name: 'signedExpiredAt', label: 'Expires at', value: typedTime(values.signedExpiredAt), hint: 'ISO 8601 likewise, later than Signed at.', required: true }),
  };
}

function timesBody(fields: TimeFields): { signedNonce: number | string; signedAt: string; signedExpiredAt: string } {
  return { signedNonce: numberOf(fields.nonce), signedAt: valueOf(fields.signedAt), signedExpiredAt: valueOf(fields.expiresAt) };
}

function readOnlyState(error: ApiError): HTMLElement {
  return section('Sign records are written elsewhere',
    h('p', null, 'This gateway serves its sign records from a store it does not write (the directory upstream, or a store other than the one the owner API writes), so they cannot be created, changed or deleted here. The owner API does not read them either, so this lookup cannot show them: ask /api/sign?address=… with an access token of this account to see what clients get.'),
    h('p', { class: 'hint' }, 'The gateway says: ', error.message),
  );
}

/** The record as /api/sign serves it, and the forms to change or delete it. */
function foundState(ctx: PageContext, address: string, record: SignRecord, served: ServedSignRecord): Child {
  const fields = timeFields(record);
  const deleteForm = form({
    label: 'Delete record',
    fields: [],
    submitLabel: 'Delete record',
    tone: 'danger',
    async onSubmit() {
      const sure = await confirmAction({
        title: `Delete the sign record of ${record.address}?`,
        message: h('p', null, `/api/sign stops serving ${record.address} at once: clients asking for it get "no sign record" (404) for every key of this account. This cannot be undone.`),
        confirmLabel: 'Delete record',
      });
      if (!sure) return;
      await ctx.api.send('DELETE', recordsPath(ctx, record.address));
      ctx.navigate('signRecords', { account: ctx.account!.id }, { query: { address }, notice: `Sign record of ${record.address} deleted.` });
    },
  });
  return [
    section('What /api/sign serves',
      h('p', null, 'The record exactly as /api/sign?address=', h('code', null, address), ' answers an access token of this account:'),
      // Focusable, so keyboard users can scroll it sideways on a narrow screen.
      h('pre', { class: 'served', tabindex: 0 }, JSON.stringify(served, null, 2)),
    ),
    section('Change the record',
      form({
        label: `Change the sign record of ${record.address}`,
        fields: [fields.nonce, fields.signedAt, fields.expiresAt],
        submitLabel: 'Save changes',
        async onSubmit() {
          await ctx.api.send<SignRecord>('PUT', recordsPath(ctx, record.address), timesBody(fields));
          ctx.reload(`Sign record of ${record.address} saved.`);
        },
      }),
    ),
    h('section', { class: 'danger-zone', 'aria-labelledby': 'delete-record-title' },
      h('h2', { id: 'delete-record-title' }, 'Delete this record'),
      h('p', null, '/api/sign stops serving this address for every key of this account.'),
      deleteForm,
    ),
  ];
}

/** No record: say so, and offer to create one for this address (times suggested from now). */
function notFoundState(ctx: PageContext, address: string): Child {
  const now = Math.floor(Date.now() / 1000) * 1000;
  const fields = timeFields({ signedNonce: 0, signedAt: new Date(now).toISOString(), signedExpiredAt: new Date(now + 30 * DAY_MS).toISOString() });
  return [
    h('div', { class: 'empty' }, h('p', null, 'No sign record for ', h('code', null, address), ': /api/sign answers "no sign record" (404) for it.')),
    section('Create a record for this address',
      form({
        label: `Create a sign record for ${address}`,
        fields: [fields.nonce, fields.signedAt, fields.expiresAt],
        submitLabel: 'Create record',
        async onSubmit() {
          const created = await ctx.api.send<SignRecord>('POST', recordsPath(ctx), { address, ...timesBody(fields) });
          ctx.reload(`Sign record of ${created.address} created.`);
        },
      }),
    ),
  ];
}

export const signRecordPages: Record<'signRecords', PageDef> = {
  signRecords: {
    title: 'Sign records',
    access: 'signed-in',
    async render(ctx) {
      const address = (ctx.query.get('address') ?? '').trim();
      const lookup = textField({ name: 'address', label: 'Address', value: address, hint: '0x and 40 hex digits, in any case (e.g. 0x8617e340b3d01fa5f11f306f4090fd50e238070d).', required: true, size: 44 });
      const lookupForm = form({
        label: 'Look up a sign record',
        fields: [lookup],
        submitLabel: 'Look up',
        async onSubmit() {
          const typed = valueOf(lookup);
          if (typed === '') throw new ApiError(400, 'invalid_request', 'Enter an address: 0x and 40 hex digits.', 'address');
          // Asked first, so a malformed address is refused at the field, where it was typed.
          try {
            await ctx.api.get(recordsPath(ctx, typed));
          } catch (error) {
            if (!isStatus(error, 404) && !isStatus(error, 409, 'read_only_store')) throw error;
          }
          ctx.navigate('signRecords', { account: ctx.account!.id }, { query: { address: typed } });
        },
      });

      let result: Child = null;
      if (address !== '') {
        try {
          const record = await ctx.api.get<SignRecord>(recordsPath(ctx, address));
          const served = await ctx.api.get<ServedSignRecord>(`${recordsPath(ctx, address)}/served`);
          result = foundState(ctx, address, record, served);
        } catch (error) {
          if (isStatus(error, 409, 'read_only_store')) result = readOnlyState(error);
          else if (isStatus(error, 404)) result = notFoundState(ctx, address);
          else if (error instanceof ApiError && error.field === 'address') lookup.setError(fieldMessage(error, lookup));
          else throw error;
        }
      }
      append(ctx.main, [
        heading('Sign records'),
        h('p', null, 'A sign record is what /api/sign answers for an address: its signed nonce and when it was signed and expires. Look one up to see it as clients get it, change it or delete it.'),
        lookupForm,
        result,
      ]);
    },
  },
};
