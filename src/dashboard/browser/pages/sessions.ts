/**
 * The signed-in owner's sessions (listOwnSessions): when each began and was last used, from
 * which address and browser, this one marked; any of them can be ended (endOwnSession).
 * Ending this one is signing out. Operators sign in with a token and have no sessions.
 */
import type { PageDef } from '../app.js';
import { h } from '../dom.js';
import type { OwnSession } from '../types.js';
import { confirmThen, heading, problemBox, table, time } from '../ui.js';

export const sessionPages: Record<'sessions', PageDef> = {
  sessions: {
    title: 'Your sessions',
    access: 'signed-in',
    async render(ctx) {
      ctx.main.append(heading('Your sessions'));
      if (ctx.who?.kind !== 'owner') {
        ctx.main.append(h('p', null, 'Operators sign in with an admin token and have no sessions here.'));
        return;
      }
      const { items } = await ctx.api.get<{ items: OwnSession[] }>('/sessions');
      const problem = problemBox();
      const end = (session: OwnSession, label: string) => confirmThen(problem, {
        title: session.current ? 'End this session?' : `End the session of ${label}?`,
        message: h('p', null, session.current ? 'You are signed out here, as with Sign out.' : 'That browser or device is signed out at once and must sign in again.'),
        confirmLabel: 'End session',
      }, async () => {
        await ctx.api.send<OwnSession>('DELETE', `/sessions/${encodeURIComponent(session.id)}`);
        if (session.current) ctx.navigate('signIn', {}, { notice: 'That session has ended: you are signed out.' });
        else ctx.reload('Session ended: that browser is signed out.');
      });
      ctx.main.append(
        h('p', null, 'Where you are signed in now. End any session you do not recognise, then change your password. Signing in more often than the gateway allows ends your oldest session.'),
        problem,
        table('Your sessions', ['Browser', 'Address', 'Signed in', 'Last used', 'Actions'], items.map((session) => {
          const label = session.userAgent ?? 'an unknown browser';
          return [
            h('span', null, label, session.current ? h('span', { class: 'badge' }, ' This session') : null),
            session.ip === undefined ? '—' : h('code', null, session.ip),
            time(session.createdAt),
            time(session.lastSeenAt),
            h('button', { type: 'button', class: 'danger', onclick: () => void end(session, label) }, 'End', h('span', { class: 'visually-hidden' }, session.current ? ' this session' : ` session of ${label}, signed in ${session.createdAt}`)),
          ];
        })),
      );
    },
  },
};
