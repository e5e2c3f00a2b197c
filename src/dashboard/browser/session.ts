/**
 * Who is signed in to the dashboard. An owner signs in with the owner API's session (an
 * HttpOnly cookie the page never sees, plus the CSRF token kept here in memory; after a reload
 * `GET /owner/v1/session` gives it again). An operator signs in with an admin token: it is a
 * bearer credential, never sent by the browser on its own, kept in this tab's sessionStorage
 * only (gone when the tab closes, never shared with other tabs) so a reload does not sign out.
 */
import { ApiError, createApi, type Api, type Credential } from './api.js';
import type { Account, Page, Session } from './types.js';
import { passkeyAnswer, type SecondFactorInput } from './webauthn.js';

export type SignedIn =
  | { kind: 'owner'; session: Session }
  | { kind: 'operator'; token: string };

const OPERATOR_KEY = 'gateway-dashboard-admin-token';

export interface Auth {
  readonly api: Api;
  current(): SignedIn | undefined;
  /** Reads the session back after a reload; undefined when nobody is signed in. */
  restore(): Promise<SignedIn | undefined>;
  /** `factors`: the second factor (owner/second-factor.ts) after a 401 mfa_required. */
  signInOwner(email: string, password: string, factors?: SecondFactorInput): Promise<SignedIn>;
  /** A passkey alone (passwordless): the ceremony is run in this browser (webauthn.ts). */
  signInWithPasskey(): Promise<SignedIn>;
  /** Checks the token with a call that needs it before keeping it. */
  signInOperator(token: string): Promise<SignedIn>;
  /** After a password change: the new session (cookie and CSRF token) replaces the old. */
  replaceSession(session: Session): void;
  signOut(): Promise<void>;
  /** The accounts the caller may switch between (an operator's: the first 100). */
  accounts(): Promise<Account[]>;
  /**
   * Reads the accounts again at the next `accounts()`, after a change to them (a rename, an
   * accepted invite): an owner's come with the session, an operator's list is kept per tab.
   */
  refreshAccounts(): Promise<void>;
  /** Called when the gateway ends the session (expired, signed out elsewhere). */
  onEnded(listener: (error: ApiError) => void): void;
}

export function createAuth(): Auth {
  let current: SignedIn | undefined;
  let operatorAccounts: Account[] | undefined;
  const listeners: ((error: ApiError) => void)[] = [];
  const credential = (): Credential | undefined => {
    if (current?.kind === 'owner') return { kind: 'owner', csrfToken: current.session.csrfToken };
    if (current?.kind === 'operator') return { kind: 'operator', token: current.token };
    return undefined;
  };
  const forget = () => {
    current = undefined;
    operatorAccounts = undefined;
    sessionStorage.removeItem(OPERATOR_KEY);
  };
  const api = createApi({
    credential,
    onSignedOut: (error) => {
      if (current === undefined) return;
      forget();
      for (const listener of listeners) listener(error);
    },
  });

  return {
    api,
    current: () => current,
    async restore() {
      if (current !== undefined) return current;
      const token = sessionStorage.getItem(OPERATOR_KEY);
      if (token !== null) {
        current = { kind: 'operator', token };
        return current;
      }
      try {
        current = { kind: 'owner', session: await api.get<Session>('/session') };
      } catch (error) {
        // No session (401), or an operator-only gateway path (404): nobody is signed in.
        if (!(error instanceof ApiError) || (error.status !== 401 && error.status !== 404)) throw error;
      }
      return current;
    },
    async signInOwner(email, password, factors = {}) {
      const session = await api.send<Session>('POST', '/session', { email, password, ...factors });
      current = { kind: 'owner', session };
      return current;
    },
    async signInWithPasskey() {
      const session = await api.send<Session>('POST', '/session/passkey', await passkeyAnswer(api));
      current = { kind: 'owner', session };
      return current;
    },
    async signInOperator(token) {
      const page = await createApi({ credential: () => ({ kind: 'operator', token }), onSignedOut: () => {} }).get<Page<Account>>('/accounts', { limit: 100 });
      current = { kind: 'operator', token };
      operatorAccounts = page.items;
      sessionStorage.setItem(OPERATOR_KEY, token);
      return current;
    },
    replaceSession(session) {
      current = { kind: 'owner', session };
    },
    async signOut() {
      const was = current;
      if (was?.kind === 'owner') {
        try {
          await api.send('DELETE', '/session');
        } catch (error) {
          // Already ended is signed out all the same.
          if (!(error instanceof ApiError) || error.status !== 401) throw error;
        }
      }
      forget();
    },
    async accounts() {
      if (current?.kind === 'owner') return current.session.accounts;
      if (current?.kind !== 'operator') return [];
      operatorAccounts ??= (await api.get<Page<Account>>('/accounts', { limit: 100 })).items;
      return operatorAccounts;
    },
    async refreshAccounts() {
      operatorAccounts = undefined;
      if (current?.kind === 'owner') current = { kind: 'owner', session: await api.get<Session>('/session') };
    },
    onEnded(listener) {
      listeners.push(listener);
    },
  };
}
