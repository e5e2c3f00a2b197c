/**
 * The one way an owner change is made. Every operation that changes the owner store describes
 * itself as data (what it loads, who may make it, the work before the write, the write) and
 * `change` runs the steps in one order for all of them:
 *
 *   load → authorize → check writable → apply → persist → audit → notify
 *
 * - load: what the change starts from (the account the caller reaches, the invite, the owner);
 *   a NotFound here is the answer for what the caller may not see.
 * - authorize: what only some callers may do (an operator's operations: Forbidden).
 * - check writable: a store that takes no writes refuses with 409 read_only_store before any
 *   work or hashing (and roles and sign records where they belong to another store).
 * - apply: the work outside any store change: checks that read, new secrets, password hashes.
 * - persist: the write, with its audit events in the same store change (owner/audit.ts makes
 *   them through `event`; stores/owner-store.ts writes both atomically, or neither).
 * - audit: every event written becomes a log line, where history outlives the store's cap.
 * - notify: the change's own announcements (token resets every instance hears, sign-outs),
 *   then every listener the owner service was given (OwnerDeps.listeners).
 *
 * A refusal at any step before persist writes nothing and audits nothing. The time of the
 * change is taken once, after apply, so its events, its records and its answer agree.
 * test/unit/owner-pipeline.test.ts holds the order.
 */
import type { AuditEvent } from '../state/owners/records.js';
import type { AccountDoc, AccountUpdate, OwnerStore } from '../state/owners/store.js';
import type { Logger } from '../telemetry/log.js';
import type { Clock } from '../util/clock.js';
import { requireReachable, requireWritable } from './access.js';
import { logEvents, makeEvent, type EventInput } from './audit.js';
import type { Actor, Caller } from './types.js';

/** The events one change wrote to one account's audit trail. */
export interface AuditTrail {
  accountId: string;
  events: readonly AuditEvent[];
}

/** What a change's listeners hear, once per change that wrote an event (each event names its actor). */
export interface ChangeNotice {
  /** The events written, account by account, in the order written. */
  audited: readonly AuditTrail[];
}

/**
 * Hears every owner change after it is written and logged. A listener's failure is logged and
 * reaches no caller: the change is made and recorded, and an error answer would invite a retry
 * of a change that happened.
 */
export type ChangeListener = (notice: ChangeNotice) => void | Promise<void>;

/** What persist writes and answers. */
export interface Persisted<S> {
  /** The events the write stored with the change (none: the change changed nothing). */
  audited: readonly AuditTrail[];
  result: S;
}

/** What persist is given. */
export interface PersistStep<L, P> {
  loaded: L;
  prepared: P;
  /** The time of the change. */
  now: number;
  /** An audit event of this change: by the actor (or `by`), at `now` (or `at`). */
  event(input: EventInput, options?: { by?: Actor; at?: number }): AuditEvent;
}

export interface OwnerChange<L, P, S, R> {
  /** Which writes the change needs: the owner store's (the default), or roles and sign records (`directory`). */
  writes?: 'owner' | 'directory';
  load(): Promise<L>;
  /** Throws (Forbidden) when the caller may not make this change. */
  authorize?(loaded: L): void;
  /** The work before the write, outside any store change. */
  apply?(loaded: L): Promise<P>;
  /** The write and its events, as one store change where the store makes them one. */
  persist(step: PersistStep<L, P>): Promise<Persisted<S>>;
  /** The change's own announcements, after it is written and logged; what it answers is the operation's answer (absent: persist's result). A failure reaches the caller. */
  notify?(saved: S): Promise<R>;
}

export interface ChangeDeps {
  store: OwnerStore;
  clock: Clock;
  log: Logger;
  listeners?: readonly ChangeListener[];
}

/**
 * Runs one change. `actor` undefined: a public change (accepting an invite), whose caller is
 * known only once it has loaded and applied: its events name theirs with `by`.
 */
export type Change = <L, P, S, R = S>(actor: Actor | undefined, spec: OwnerChange<L, P, S, R>) => Promise<R>;

export function createChangePipeline({ store, clock, log, listeners = [] }: ChangeDeps): Change {
  async function tell(notice: ChangeNotice): Promise<void> {
    for (const listener of listeners) {
      try {
        await listener(notice);
      } catch (err) {
        log.warn({ err, audited: notice.audited.map(({ accountId, events }) => ({ accountId, ids: events.map((e) => e.id) })) }, 'owner change listener failed');
      }
    }
  }

  return async function change<L, P, S, R>(actor: Actor | undefined, spec: OwnerChange<L, P, S, R>): Promise<R> {
    const loaded = await spec.load();
    spec.authorize?.(loaded);
    requireWritable(store, { directory: spec.writes === 'directory' });
    const prepared = (spec.apply === undefined ? undefined : await spec.apply(loaded)) as P;
    const now = clock.now();
    const { audited, result } = await spec.persist({
      loaded,
      prepared,
      now,
      event(input, { by = actor, at = now } = {}) {
        if (by === undefined) throw new TypeError('An event of a change without a caller needs its actor (by).');
        return makeEvent(by, at, input);
      },
    });
    for (const { accountId, events } of audited) logEvents(log, accountId, events);
    const written = audited.filter(({ events }) => events.length > 0);
    try {
      return spec.notify === undefined ? (result as unknown as R) : await spec.notify(result);
    } finally {
      // Also when the change's own announcement failed: the change was written all the same.
      if (written.length > 0) await tell({ audited: written });
    }
  };
}

/** One account's events, as persist answers them. */
export function trail<S>(accountId: string, events: readonly AuditEvent[], result: S): Persisted<S> {
  return { audited: [{ accountId, events }], result };
}

/**
 * Persists one change of one account (OwnerStore.updateAccount): `edit` gets the account as it
 * is stored now, checked again as reachable by `reach` (a deletion, or the caller's removal from
 * the members, may have come since load), and answers the new account with its events, or no
 * account (nothing written, no event). `edit` may run more than once: it must be free of side
 * effects.
 */
export async function editAccount<S>(store: OwnerStore, reach: Caller | undefined, accountId: string, edit: (doc: AccountDoc) => AccountUpdate<S>): Promise<Persisted<S>> {
  let events: readonly AuditEvent[] = [];
  const result = await store.updateAccount(accountId, (current) => {
    const update = edit(reach === undefined ? current : requireReachable(reach, current));
    events = update.doc === undefined ? [] : update.events;
    return update;
  });
  return trail(accountId, events, result);
}
