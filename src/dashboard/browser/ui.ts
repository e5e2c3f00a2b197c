/**
 * The pieces pages share: headings, the states of a listing (loading, empty, failed), the
 * confirmation dialog, the shown-once secret with its copy button, paging links, dates.
 */
import { ApiError, describeError } from './api.js';
import { announce, h, replace, uniqueId, type Child } from './dom.js';

/** The page's heading: focused after each navigation, so screen readers start there. */
export function heading(text: string, ...extra: Child[]): HTMLElement {
  return h('div', { class: 'page-head' }, h('h1', { tabindex: -1 }, text), extra);
}

export function section(title: string, ...children: Child[]): HTMLElement {
  const id = uniqueId('section');
  return h('section', { 'aria-labelledby': id }, h('h2', { id }, title), children);
}

export function loading(what = 'Loading…'): HTMLElement {
  return h('p', { class: 'loading', role: 'status' }, what);
}

export function empty(text: string, ...action: Child[]): HTMLElement {
  return h('div', { class: 'empty' }, h('p', null, text), action);
}

/**
 * A failure in place of what could not be shown, with a way to try again. An ended session
 * never lands here: the dashboard goes back to sign-in instead.
 */
export function failed(error: unknown, retry?: () => void): HTMLElement {
  const unavailable = error instanceof ApiError && (error.code === 'store_unavailable' || error.status === 0);
  // describeError's sentence is for a change ("nothing was changed"); here something was read.
  const sentence = error instanceof ApiError && error.code === 'store_unavailable'
    ? 'The gateway cannot reach its store just now. Try again in a moment.'
    : describeError(error);
  return h('div', { class: 'error-state', role: 'alert' },
    h('p', null, h('strong', null, unavailable ? 'Not available right now. ' : 'Could not load this. '), sentence),
    retry === undefined ? null : h('button', { type: 'button', onclick: retry }, 'Try again'),
  );
}

/**
 * A one-line notice that a change was made (role=status, read politely). The region is put in
 * the page empty and its text a moment later: a live region that arrives with its text already
 * in it is not read by every screen reader, and after a delete the notice is the news.
 */
export function notice(text: string): HTMLElement {
  const region = h('p', { class: 'notice', role: 'status' });
  setTimeout(() => {
    region.textContent = text;
  }, 50);
  return region;
}

export interface ConfirmOptions {
  title: string;
  /** What happens, in words that name the consequence. */
  message: Child;
  confirmLabel: string;
  /** Destructive (red) by default. */
  tone?: 'danger' | 'normal';
}

/**
 * Asks before a change that cannot be taken back, in a modal <dialog>: focus goes to Cancel,
 * Escape cancels, and focus returns to what had it when the dialog closes.
 */
export function confirmAction(options: ConfirmOptions): Promise<boolean> {
  return new Promise((resolve) => {
    const before = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    const titleId = uniqueId('dialog-title');
    const messageId = uniqueId('dialog-message');
    const cancel = h('button', { type: 'button', value: 'cancel' }, 'Cancel');
    const confirm = h('button', { type: 'button', class: options.tone === 'normal' ? 'primary' : 'danger' }, options.confirmLabel);
    const dialog = h('dialog', { 'aria-labelledby': titleId, 'aria-describedby': messageId, class: 'confirm' },
      h('h2', { id: titleId }, options.title),
      h('div', { id: messageId }, options.message),
      h('div', { class: 'actions' }, cancel, confirm),
    );
    let answer = false;
    cancel.addEventListener('click', () => dialog.close());
    confirm.addEventListener('click', () => {
      answer = true;
      dialog.close();
    });
    dialog.addEventListener('close', () => {
      dialog.remove();
      before?.focus();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

/** Where an action that is no form's (a danger zone's button) says why it was refused. */
export function problemBox(): HTMLElement {
  return h('div', { class: 'form-error', role: 'alert', hidden: true });
}

/**
 * Asks first (confirmAction), then makes the change; a refusal shows in `problem` (a
 * problemBox). An ended session shows nothing here: the dashboard goes back to sign-in.
 */
export async function confirmThen(problem: HTMLElement, question: ConfirmOptions, change: () => Promise<void>): Promise<void> {
  if (!(await confirmAction(question))) return;
  problem.hidden = true;
  try {
    await change();
  } catch (error) {
    if (error instanceof ApiError && error.code === 'session_required') return;
    problem.hidden = false;
    replace(problem, describeError(error));
  }
}

/**
 * A secret the gateway hands out once (an API secret, a settings token): shown in a read-only
 * box with a copy button, and said plainly that it will not be shown again.
 */
export function shownOnce({ title, label, value, note, kept = 'the gateway keeps only a digest of it' }: { title: string; label: string; value: string; note?: Child; kept?: string }): HTMLElement {
  const id = uniqueId('secret');
  const box = h('input', { id, type: 'text', readonly: true, class: 'secret', spellcheck: 'false', autocomplete: 'off' });
  box.value = value;
  const status = h('span', { class: 'copy-status', role: 'status' });
  const copy = h('button', { type: 'button', class: 'primary' }, 'Copy', h('span', { class: 'visually-hidden' }, ` ${label}`));
  copy.addEventListener('click', () => {
    box.select();
    const done = () => {
      status.textContent = 'Copied';
      announce(`${label} copied to the clipboard`);
    };
    if (navigator.clipboard === undefined) {
      status.textContent = 'Select the text and copy it';
      return;
    }
    navigator.clipboard.writeText(value).then(done, () => {
      status.textContent = 'Copying was refused: select the text and copy it';
    });
  });
  const headingId = uniqueId('secret-title');
  return h('section', { class: 'shown-once', 'aria-labelledby': headingId },
    h('h2', { id: headingId }, title),
    h('p', null, h('strong', null, 'This is the only time it is shown. '), `Copy it now and keep it somewhere safe; ${kept}.`),
    h('div', { class: 'field' }, h('label', { for: id }, label), h('div', { class: 'copy-row' }, box, copy, status)),
    note,
  );
}

/**
 * Puts a shown-once secret in `slot` and moves the focus to its box: after a create or a roll,
 * keyboard and screen-reader users land on what they must copy now.
 */
export function revealOnce(slot: HTMLElement, options: Parameters<typeof shownOnce>[0]): void {
  const shown = shownOnce(options);
  replace(slot, shown);
  const box = shown.querySelector('input');
  box?.focus();
  box?.scrollIntoView({ block: 'center' });
}

/** "Next page" and "First page" links for a cursor listing (cursors only go forward). */
export function pager({ nextHref, firstHref, label }: { nextHref: string | undefined; firstHref: string | undefined; label: string }): HTMLElement | null {
  if (nextHref === undefined && firstHref === undefined) return null;
  return h('nav', { class: 'pager', 'aria-label': label },
    firstHref === undefined ? null : h('a', { href: firstHref }, 'First page'),
    nextHref === undefined ? null : h('a', { href: nextHref, rel: 'next' }, 'Next page'),
  );
}

const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** A time for people (local), with the exact UTC time in the element's datetime. */
export function time(iso: string | undefined): HTMLElement | string {
  if (iso === undefined) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return h('time', { datetime: date.toISOString() }, DATE.format(date));
}

/** The same time as plain text, for sentences (a notice or a dialog's message is text only). */
export function when(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : DATE.format(date);
}

/** Replaces `target`'s content with what `load` draws, showing loading and failure states. */
export async function draw(target: HTMLElement, load: () => Promise<Child>): Promise<void> {
  replace(target, loading());
  try {
    replace(target, await load());
  } catch (error) {
    if (error instanceof ApiError && error.code === 'session_required') return;
    replace(target, failed(error, () => void draw(target, load)));
  }
}

/**
 * A table in a box that scrolls sideways on a narrow screen; the box is a labelled, focusable
 * region so keyboard users can scroll it too.
 */
export function table(label: string, head: readonly string[], rows: readonly (readonly Child[])[]): HTMLElement {
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': label, tabindex: 0 },
    h('table', null,
      h('caption', { class: 'visually-hidden' }, label),
      h('thead', null, h('tr', null, head.map((text) => h('th', { scope: 'col' }, text)))),
      h('tbody', null, rows.map((cells) => h('tr', null, cells.map((cell) => h('td', null, cell))))),
    ),
  );
}
