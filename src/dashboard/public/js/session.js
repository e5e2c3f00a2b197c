/**
 * Who is signed in to the dashboard. An owner signs in with the owner API's session (an
 * HttpOnly cookie the page never sees, plus the CSRF token kept here in memory; after a reload
 * `GET /owner/v1/session` gives it again). An operator signs in with an admin token: it is a
 * bearer credential, never sent by the browser on its own, kept in this tab's sessionStorage
 * only (gone when the tab closes, never shared with other tabs) so a reload does not sign out.
 */
import { ApiError, createApi } from './api.js';
const OPERATOR_KEY = 'gateway-dashboard-admin-token';
export function createAuth() {
    let current;
    let operatorAccounts;
    const listeners = [];
    const credential = () => {
        if (current?.kind === 'owner')
            return { kind: 'owner', csrfToken: current.session.csrfToken };
        if (current?.kind === 'operator')
            return { kind: 'operator', token: current.token };
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
            if (current === undefined)
                return;
            forget();
            for (const listener of listeners)
                listener(error);
        },
    });
    return {
        api,
        current: () => current,
        async restore() {
            if (current !== undefined)
                return current;
            const token = sessionStorage.getItem(OPERATOR_KEY);
            if (token !== null) {
                current = { kind: 'operator', token };
                return current;
            }
            try {
                current = { kind: 'owner', session: await api.get('/session') };
            }
            catch (error) {
                // No session (401), or an operator-only gateway path (404): nobody is signed in.
                if (!(error instanceof ApiError) || (error.status !== 401 && error.status !== 404))
                    throw error;
            }
            return current;
        },
        async signInOwner(email, password) {
            const session = await api.send('POST', '/session', { email, password });
            current = { kind: 'owner', session };
            return current;
        },
        async signInOperator(token) {
            const page = await createApi({ credential: () => ({ kind: 'operator', token }), onSignedOut: () => { } }).get('/accounts', { limit: 100 });
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
                }
                catch (error) {
                    // Already ended is signed out all the same.
                    if (!(error instanceof ApiError) || error.status !== 401)
                        throw error;
                }
            }
            forget();
        },
        async accounts() {
            if (current?.kind === 'owner')
                return current.session.accounts;
            if (current?.kind !== 'operator')
                return [];
            operatorAccounts ??= (await api.get('/accounts', { limit: 100 })).items;
            return operatorAccounts;
        },
        async refreshAccounts() {
            operatorAccounts = undefined;
            if (current?.kind === 'owner')
                current = { kind: 'owner', session: await api.get('/session') };
        },
        onEnded(listener) {
            listeners.push(listener);
        },
    };
}
