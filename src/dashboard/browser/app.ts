/**
 * The dashboard's frame: the router (History API over the paths of pages.ts), the header
 * (account switcher, the account's sections, who is signed in, sign-out) and the rules every
 * page shares: signed-in pages send a signed-out visitor to sign-in and back; an owner whose
 * password must change goes to the password page first; an ended session returns to sign-in
 * saying so. After each navigation the page's h1 takes focus and the title is announced, as a
 * full page load would do for a screen reader.
 */
import { ApiError, type Api } from './api.js';
import { announce, h, replace } from './dom.js';
import { matchPage, pagePath, type PageName } from './pages.js';
import type { Auth, SignedIn } from './session.js';
import type { Account } from './types.js';
import { failed, loading, notice as showNotice } from './ui.js';


export type QueryValues = Record<string, string | undefined>;

export interface PageContext {
  readonly name: PageName;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly api: Api;
  readonly auth: Auth;
  /** Set on every page but the signed-out ones. */
  readonly who: SignedIn | undefined;
  /** The account of an `accounts/:account/…` page, read before the page draws. */
  readonly account: Account | undefined;
  /** Where the page draws (the <main> element, emptied). */
  readonly main: HTMLElement;
  /** A sentence left by the page before (e.g. "Role deleted."), shown once. */
  readonly notice: string | undefined;
  /** Aborted when the visitor leaves the page. */
  readonly signal: AbortSignal;
  href(name: PageName, params?: Record<string, string>, query?: QueryValues): string;
  navigate(name: PageName, params?: Record<string, string>, options?: { query?: QueryValues; notice?: string; replace?: boolean }): void;
  /** Draws the page again (after a change on it). */
  reload(notice?: string): void;
}

export interface PageDef {
  /** The document title's first part (and what is announced). */
  title: string | ((ctx: PageContext) => string);
  /** `signed-in` pages send others to sign-in; `signed-out` pages send the signed-in home. */
  access: 'signed-in' | 'signed-out' | 'anyone';
  render(ctx: PageContext): Promise<void> | void;
}

const SECTIONS: readonly { name: PageName; label: string }[] = [
  { name: 'account', label: 'Overview' },
  { name: 'roles', label: 'Roles' },
  { name: 'keys', label: 'API keys' },
  { name: 'settingsTokens', label: 'API settings tokens' },
  { name: 'webhooks', label: 'Webhooks' },
  { name: 'signRecords', label: 'Sign records' },
  { name: 'activity', label: 'Activity' },
];

/** The pages a section link stays lit for. */
const SECTION_OF: Partial<Record<PageName, PageName>> = { newRole: 'roles', role: 'roles', key: 'keys' };

export function startDashboard({ auth, pages }: { auth: Auth; pages: Record<PageName, PageDef> }): void {
  const frame = new Frame(auth, pages);
  frame.listen();
  void frame.render();
}

type Match = NonNullable<ReturnType<typeof matchPage>>;

/**
 * The frame's state (the page being left, the notice for the next one) and its steps: each
 * navigation renders the page of the address through `render`, which checks who may see it,
 * reads its account, draws the header, then lets the page draw.
 */
class Frame {
  readonly #auth: Auth;
  readonly #pages: Record<PageName, PageDef>;
  readonly #base = document.documentElement.dataset.base ?? '';
  readonly #main = document.getElementById('main')!;
  readonly #top = document.getElementById('top')!;
  #leaving = new AbortController();
  #pendingNotice: string | undefined;
  #firstDraw = true;

  constructor(auth: Auth, pages: Record<PageName, PageDef>) {
    this.#auth = auth;
    this.#pages = pages;
  }

  readonly href = (name: PageName, params: Record<string, string> = {}, query: QueryValues = {}): string => {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== '') search.set(key, value);
    const path = pagePath(name, params);
    return `${this.#base}/${path}${search.size > 0 ? `?${search}` : ''}`;
  };

  readonly navigate: PageContext['navigate'] = (name, params = {}, options = {}) => this.#go(this.href(name, params, options.query), options);

  #go(url: string, { replace: replacing = false, notice }: { replace?: boolean; notice?: string } = {}): void {
    this.#pendingNotice = notice;
    if (replacing) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
    void this.render();
  }

  /** An ended session, links to the dashboard's own pages, and the browser's back and forward. */
  listen(): void {
    this.#auth.onEnded((error) => {
      const next = location.pathname + location.search;
      this.#go(this.href('signIn', {}, { next }), { replace: true, notice: error.code === 'session_required' ? 'Your session has ended. Sign in again to go on.' : 'The admin token is no longer accepted. Sign in again.' });
    });
    // Links to the dashboard's own pages are followed without a page load.
    document.addEventListener('click', (event) => {
      if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      const link = (event.target as Element | null)?.closest('a');
      if (link === null || link === undefined || link.target !== '' || link.hasAttribute('download')) return;
      const url = new URL(link.href, location.href);
      if (url.origin !== location.origin || !(url.pathname === this.#base || url.pathname.startsWith(`${this.#base}/`))) return;
      if (url.pathname === location.pathname && url.search === location.search && url.hash !== '') return;
      event.preventDefault();
      this.#go(url.pathname + url.search);
    });
    window.addEventListener('popstate', () => void this.render());
  }

  /** Draws the page of the current address. */
  async render(): Promise<void> {
    this.#leaving.abort();
    this.#leaving = new AbortController();
    const signal = this.#leaving.signal;
    const notice = this.#pendingNotice;
    this.#pendingNotice = undefined;
    const match = matchPage(location.pathname.slice(this.#base.length).replace(/^\//, ''));
    if (match === undefined) {
      void this.#drawHeader(undefined, undefined, undefined);
      replace(this.#main, h('h1', { tabindex: -1 }, 'Page not found'), h('p', null, h('a', { href: this.href('home') }, 'Go to the dashboard')));
      this.#settle('Page not found');
      return;
    }
    const def = this.#pages[match.name];
    const restored = await this.#restore(signal);
    if (restored === undefined || signal.aborted) return;
    const { who } = restored;
    if (this.#redirected(def, match, who, notice)) return;
    let account: Account | undefined;
    if (match.params.account !== undefined) {
      const loaded = await this.#loadAccount(match, who, signal);
      if (loaded === undefined || signal.aborted) return;
      account = loaded;
    }
    await this.#drawHeader(who, account, match.name);
    if (signal.aborted) return;
    await this.#drawPage(def, match, { who, account, notice, signal });
  }

  /** Who is signed in (`who` undefined: no one); undefined when that could not be read, the failure drawn. */
  async #restore(signal: AbortSignal): Promise<{ who: SignedIn | undefined } | undefined> {
    try {
      return { who: await this.#auth.restore() };
    } catch (error) {
      // Not a signed-out visitor (that is no error): the gateway or its store could not answer.
      if (signal.aborted) return undefined;
      await this.#drawHeader(undefined, undefined, undefined);
      replace(this.#main, h('h1', { tabindex: -1 }, 'Could not load the dashboard'), failed(error, () => void this.render()));
      this.#settle('Could not load the dashboard');
      return undefined;
    }
  }

  /** Sends the visitor elsewhere when the page is not for them (yet); true when it did. */
  #redirected(def: PageDef, match: Match, who: SignedIn | undefined, notice: string | undefined): boolean {
    if (def.access === 'signed-in' && who === undefined) {
      this.#go(this.href('signIn', {}, { next: location.pathname + location.search }), { replace: true, ...(notice !== undefined ? { notice } : {}) });
      return true;
    }
    if (def.access === 'signed-out' && who !== undefined) {
      this.#go(this.href('home'), { replace: true });
      return true;
    }
    if (who?.kind === 'owner' && who.session.owner.mustChangePassword && match.name !== 'password' && def.access === 'signed-in') {
      this.#go(this.href('password'), { replace: true, notice: 'Choose a new password before anything else: the one you were given was only for the first sign-in.' });
      return true;
    }
    return false;
  }

  /** The account of an `accounts/:account/…` page; undefined when it could not be read (the failure drawn). */
  async #loadAccount(match: Match, who: SignedIn | undefined, signal: AbortSignal): Promise<Account | undefined> {
    replace(this.#main, loading());
    try {
      return await this.#auth.api.get<Account>(`/accounts/${encodeURIComponent(match.params.account!)}`);
    } catch (error) {
      if (signal.aborted) return undefined;
      if (error instanceof ApiError && error.code === 'session_required') return undefined;
      if (this.#mustEnroll(error)) return undefined;
      await this.#drawHeader(who, undefined, match.name);
      const notFound = error instanceof ApiError && error.status === 404;
      replace(this.#main, h('h1', { tabindex: -1 }, notFound ? 'Account not found' : 'Could not load the account'), notFound
        ? h('p', null, 'There is no such account, or it is not one you manage. ', h('a', { href: this.href('home') }, 'Go to your accounts'))
        : failed(error, () => void this.render()));
      this.#settle(notFound ? 'Account not found' : 'Could not load the account');
      return undefined;
    }
  }

  /** An owner a second factor is required of, without one (403 mfa_enrollment_required): to the enrollment page first. */
  #mustEnroll(error: unknown): boolean {
    if (!(error instanceof ApiError) || error.code !== 'mfa_enrollment_required') return false;
    this.#go(this.href('security'), { replace: true, notice: 'Set up a second factor before anything else: it is required of you.' });
    return true;
  }

  /** The page itself, under the header: its render, the notice left for it, then the title. */
  async #drawPage(def: PageDef, match: Match, { who, account, notice, signal }: { who: SignedIn | undefined; account: Account | undefined; notice: string | undefined; signal: AbortSignal }): Promise<void> {
    const main = this.#main;
    const ctx: PageContext = {
      name: match.name, params: match.params, query: new URLSearchParams(location.search), api: this.#auth.api, auth: this.#auth, who, account, main, notice, signal,
      href: this.href, navigate: this.navigate, reload: (again) => this.#go(location.pathname + location.search, { replace: true, ...(again !== undefined ? { notice: again } : {}) }),
    };
    replace(main);
    try {
      await def.render(ctx);
    } catch (error) {
      if (signal.aborted || (error instanceof ApiError && error.code === 'session_required')) return;
      if (this.#mustEnroll(error)) return;
      replace(main, h('h1', { tabindex: -1 }, 'Something went wrong'), failed(error, () => void this.render()));
    }
    if (signal.aborted) return;
    if (notice !== undefined) {
      const head = main.querySelector('.page-head') ?? main.querySelector('h1');
      const shown = showNotice(notice);
      if (head === null) main.prepend(shown);
      else head.after(shown);
    }
    this.#settle(typeof def.title === 'function' ? def.title(ctx) : def.title);
  }

  /** The title set, the heading focused and the page announced, as after a page load. */
  #settle(title: string): void {
    document.title = `${title} · Gateway dashboard`;
    const h1 = this.#main.querySelector('h1');
    if (!this.#firstDraw) {
      h1?.focus();
      announce(title);
    }
    this.#firstDraw = false;
  }

  async #drawHeader(who: SignedIn | undefined, account: Account | undefined, page: PageName | undefined): Promise<void> {
    const brand = h('a', { href: this.href('home'), class: 'brand' }, 'Gateway dashboard');
    if (who === undefined) {
      replace(this.#top, h('div', { class: 'bar' }, brand));
      return;
    }
    let accounts: Account[] = [];
    try {
      accounts = await this.#auth.accounts();
    } catch {
      // The switcher is a convenience: without it the header still works.
    }
    const person = who.kind === 'owner' ? who.session.owner.email : 'Operator (admin token)';
    const signOut = h('button', { type: 'button', class: 'link-button' }, 'Sign out');
    signOut.addEventListener('click', () => {
      this.#auth.signOut().then(() => this.navigate('signIn', {}, { notice: 'You are signed out.' }), (error: unknown) => {
        replace(this.#main, failed(error));
      });
    });
    replace(this.#top,
      h('div', { class: 'bar' }, brand,
        accounts.length > 0 ? this.#accountSwitcher(accounts, account) : null,
        h('div', { class: 'who' }, h('span', null, person), who.kind === 'owner' ? h('a', { href: this.href('password') }, 'Change password') : null, who.kind === 'owner' ? h('a', { href: this.href('security') }, 'Second factors') : null, who.kind === 'owner' ? h('a', { href: this.href('sessions') }, 'Sessions') : null, signOut),
      ),
      account === undefined ? null : h('nav', { class: 'sections', 'aria-label': `Account ${account.name || account.id}` },
        h('ul', null, SECTIONS.map((section) => {
          const current = page === section.name || SECTION_OF[page ?? 'home'] === section.name;
          return h('li', null, h('a', { href: this.href(section.name, { account: account.id }), 'aria-current': current ? 'page' : undefined }, section.label));
        })),
      ),
    );
  }

  /** A form (not a select that jumps on change, which keyboard users cannot browse): choose, then Open. */
  #accountSwitcher(accounts: readonly Account[], current: Account | undefined): HTMLElement {
    // With no account open, a placeholder (the first account shown selected would say it is
    // open); `required` keeps Open from submitting it.
    const select = h('select', { id: 'account-switcher', name: 'account', required: true },
      current === undefined ? h('option', { value: '', disabled: true }, 'Choose an account') : null,
      accounts.map((a) => h('option', { value: a.id }, a.name === '' ? a.id : `${a.name} (${a.id})`)));
    select.value = current?.id ?? '';
    const switcher = h('form', { class: 'switcher', 'aria-label': 'Switch account' },
      h('label', { for: 'account-switcher' }, 'Account'), select, h('button', { type: 'submit' }, 'Open'),
      h('a', { href: this.href('accounts') }, 'All accounts'));
    switcher.addEventListener('submit', (event) => {
      event.preventDefault();
      this.navigate('account', { account: select.value });
    });
    return switcher;
  }
}
