/**
 * An owner's own sessions: listed (created, last seen, address, user agent, which one is the
 * caller's) and ended one by one. Sessions are named by their handle (owner/session-events.ts),
 * never by the id the cookie carries. Ending one is an owner change like any other (the
 * pipeline: audited `owner.session_end` in each account the owner manages); the store's
 * per-owner index keeps both bounded by owner.maxSessionsPerOwner.
 * test/http/owner-sessions-list.test.ts holds it.
 */
import { NotFound } from '../errors/errors.js';
import type { StoredSession } from '../state/sessions/store.js';
import type { OwnerDeps } from './deps.js';
import { createChangePipeline } from './pipeline.js';
import { appendOwnerEvents, sessionHandle } from './session-events.js';
import { sessionDigest } from './sessions.js';
import type { Actor, Caller } from './types.js';

export interface OwnSessionView {
  id: string;
  createdAt: string;
  /** To the minute: a session's use is recorded at most once a minute. */
  lastSeenAt: string;
  idleExpiresAt: string;
  expiresAt: string;
  ip?: string;
  userAgent?: string;
  /** The session this call came with. */
  current: boolean;
}

type OwnerCaller = Extract<Caller, { kind: 'owner' }>;

export interface SessionListService {
  /** The caller's live sessions, newest first. */
  listOwnSessions(caller: OwnerCaller, token: string): Promise<{ items: OwnSessionView[] }>;
  /** Ends one of the caller's sessions (the current one too: that is a sign-out); NotFound for any other id. */
  endOwnSession(actor: Actor & { caller: OwnerCaller }, token: string, id: string): Promise<OwnSessionView>;
}

function view({ digest, session }: StoredSession, current: string): OwnSessionView {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return {
    id: sessionHandle(digest),
    createdAt: iso(session.createdAt),
    lastSeenAt: iso(session.lastSeenAt ?? session.createdAt),
    idleExpiresAt: iso(session.idleExpiresAt),
    expiresAt: iso(session.expiresAt),
    ...(session.ip === undefined ? {} : { ip: session.ip }),
    ...(session.userAgent === undefined ? {} : { userAgent: session.userAgent }),
    current: digest === current,
  };
}

export function createSessionListService(deps: OwnerDeps): SessionListService {
  const { store, sessions } = deps;
  const change = createChangePipeline(deps);
  return {
    async listOwnSessions(caller, token) {
      const current = sessionDigest(token);
      return { items: (await sessions.listOwnerSessions(caller.ownerId)).map((s) => view(s, current)) };
    },

    endOwnSession(actor, token, id) {
      const ownerId = actor.caller.ownerId;
      return change(actor, {
        async load() {
          const found = (await sessions.listOwnerSessions(ownerId)).find((s) => sessionHandle(s.digest) === id);
          if (found === undefined) throw new NotFound('No such session: it may have ended already.');
          return found;
        },
        async persist({ loaded, event }) {
          await sessions.delete(loaded.digest);
          const audited = await appendOwnerEvents(store, ownerId, [event({ action: 'owner.session_end', target: { type: 'session', id } })]);
          return { audited, result: view(loaded, sessionDigest(token)) };
        },
      });
    },
  };
}
