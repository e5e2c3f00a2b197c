/**
 * The audit events of an owner's own sessions (`owner.session_end`, `owner.session_evict`),
 * recorded as a password change is: in the audit trail of each account the owner manages, and
 * heard by the change listeners (the mail part's security notices). A session is named by its
 * handle (sessionHandle), never by its id or its digest.
 */
import { secretDigest } from '../domain/secrets.js';
import type { StoredSession } from '../state/sessions/store.js';
import type { OwnerDeps } from './deps.js';
import { createChangePipeline, type AuditTrail, type PersistStep } from './pipeline.js';
import type { Actor } from './types.js';

/**
 * What owners see of a session: 24 hex digits of a SHA-256 of its digest. The digest is already
 * a hash of the id the cookie carries; hashing it again keeps even the store's key out of
 * answers, and 96 bits name one session of the owner's few without a collision.
 */
export function sessionHandle(digest: string): string {
  return `ses_${secretDigest(Buffer.from(digest, 'utf8')).slice(-24)}`;
}

/** Appends an owner's own events to each account they manage; answers the trails written. */
export async function appendOwnerEvents(store: OwnerDeps['store'], ownerId: string, events: Parameters<OwnerDeps['store']['appendAudit']>[1]): Promise<AuditTrail[]> {
  const audited: AuditTrail[] = [];
  for (const accountId of await store.accountsOf(ownerId)) {
    await store.appendAudit(accountId, events);
    audited.push({ accountId, events });
  }
  return audited;
}

/** Records the sessions a new sign-in's cap ended (SessionStore.create), as `owner.session_evict` by the owner signing in. */
export type EvictionRecorder = (actor: Actor & { caller: { kind: 'owner' } }, evicted: readonly StoredSession[]) => Promise<void>;

export function createEvictionRecorder(deps: OwnerDeps): EvictionRecorder {
  const change = createChangePipeline(deps);
  const { store, log } = deps;
  return async (actor, evicted) => {
    if (evicted.length === 0) return;
    const ownerId = actor.caller.ownerId;
    const handles = evicted.map((e) => sessionHandle(e.digest));
    // The sessions have ended whatever happens here: a store that takes no writes (the demo
    // file) keeps the log line only, and the sign-in that ended them is not refused.
    if (store.readOnly !== undefined) {
      log.info({ ownerId, sessions: handles }, 'owner sessions evicted past owner.maxSessionsPerOwner (not audited: read-only owner store)');
      return;
    }
    await change(actor, {
      load: async () => undefined,
      persist: async ({ event }: PersistStep<undefined, undefined>) => ({
        audited: await appendOwnerEvents(store, ownerId, handles.map((id) => event({ action: 'owner.session_evict', target: { type: 'session', id } }))),
        result: undefined,
      }),
    });
  };
}
