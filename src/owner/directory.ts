/**
 * Roles and sign records, written through the owner API into the store the gateway reads them
 * from (the data file or Redis), so `/api/roles` and `/api/sign` serve a change at once on this
 * instance and, through the store's notices, on every other. A store the gateway only reads (the
 * HTTP directory, or a directory kept apart from the owner store) refuses every write up front
 * with 409 read_only_store rather than pretending (the pipeline's writable step, owner/pipeline.ts), and every
 * read too: the owner store's copy is not what the gateway serves there.
 *
 * Roles are listed in id order, which is the order `/api/roles` pages them in: so ids are the
 * owner's to choose, and replacing a role under another id is how roles are reordered. Input is
 * validated by the HTTP layer's schemas; what only the store can tell (an id or slug taken, an
 * object gone) comes back as an outcome and becomes a 409 naming the field, or a 404.
 */
import { Conflict, InvalidRequest, NotFound, ReadOnlyStore } from '../errors/errors.js';
import type { Role, RoleQuery, SignRecord } from '../state/directory/store.js';
import type { OwnerStore, PutRoleOutcome, PutSignRecordOutcome } from '../state/owners/store.js';
import { loadAccount } from './access.js';
import type { OwnerDeps } from './deps.js';
import { createChangePipeline, trail, type Change } from './pipeline.js';
import type { Actor, Caller, Page, PageQuery } from './types.js';

/** Roles an account holds at most, made through the owner API (each one rewrites the data file, where it lives). */
const MAX_ROLES = 1000;

export interface RoleListQuery extends PageQuery {
  /** Case-insensitive substring of the name, as `/api/roles?name=` takes it. */
  nameContains?: string;
}

/** A sign record's times, as a replacement gives them (the address is the path's). */
export type SignRecordTimes = Omit<SignRecord, 'address'>;

export interface DirectoryService {
  /** One page in ascending id order; the cursor is the `nextCursor` of the page before. */
  listRoles(caller: Caller, accountId: string, query: RoleListQuery): Promise<Page<Role>>;
  getRole(caller: Caller, accountId: string, id: number): Promise<Role>;
  /** Conflict ("id" or "slug") when either is taken in the account. */
  createRole(actor: Actor, accountId: string, role: Role): Promise<Role>;
  /** Replaces role `id` as a whole; `role.id` may differ from `id`: the role moves there (a reorder). */
  replaceRole(actor: Actor, accountId: string, id: number, role: Role): Promise<Role>;
  deleteRole(actor: Actor, accountId: string, id: number): Promise<void>;
  /**
   * The checks of a read (the account reachable, and read_only_store where the owner store is
   * not what /api/sign and /api/roles serve), for a read answered from the served directory
   * itself: the `served` sign record (http/routes/owner/directory.ts).
   */
  checkRead(caller: Caller, accountId: string): Promise<void>;
  /** `address` in either case: records are kept and found lowercase. */
  getSignRecord(caller: Caller, accountId: string, address: string): Promise<SignRecord>;
  /** Conflict ("address") when the address has a record already. */
  createSignRecord(actor: Actor, accountId: string, record: SignRecord): Promise<SignRecord>;
  replaceSignRecord(actor: Actor, accountId: string, address: string, times: SignRecordTimes): Promise<SignRecord>;
  deleteSignRecord(actor: Actor, accountId: string, address: string): Promise<void>;
}

/**
 * The owner a write is made for, checked again by the store in the same step as the write: their
 * removal from the members may come between the change's load and it (undefined for an operator).
 */
function memberOf({ caller }: Actor): string | undefined {
  return caller.kind === 'owner' ? caller.ownerId : undefined;
}

export function createDirectoryService(deps: OwnerDeps): DirectoryService {
  const { store } = deps;
  const change = createChangePipeline(deps);

  /**
   * The account for a read. Where roles and sign records are served from another store than the
   * owner store (the HTTP upstream, or Redis beside a data file), what the owner store holds is
   * not what /api/roles and /api/sign answer: so reads are refused as writes are, rather than
   * showing records nobody is served.
   */
  async function loadForRead(caller: Caller, accountId: string): Promise<void> {
    if (store.directoryReadOnly !== undefined) throw new ReadOnlyStore(store.directoryReadOnly);
    await loadAccount(store, caller, accountId);
  }

  return {
    ...createRoleOperations(store, change, loadForRead),
    ...createSignRecordOperations(store, change, loadForRead),
    checkRead: loadForRead,
  };
}

type ReadCheck = (caller: Caller, accountId: string) => Promise<void>;

/**
 * What every role and sign-record change starts from: the account as the caller reaches it, and
 * a store that takes roles and sign records (the pipeline checks `writes: 'directory'`).
 */
function directoryChange(store: OwnerStore, actor: Actor, accountId: string): { writes: 'directory'; load: () => Promise<void> } {
  return { writes: 'directory', load: async () => void (await loadAccount(store, actor.caller, accountId)) };
}

function createRoleOperations(store: OwnerStore, change: Change, loadForRead: ReadCheck): Pick<DirectoryService, 'listRoles' | 'getRole' | 'createRole' | 'replaceRole' | 'deleteRole'> {
  /**
   * The offset of the first role (matching the query) with an id above `afterId`. The cursor's
   * offset is trusted only when the roles around it show that nothing before it moved; otherwise
   * (roles added, removed or moved since) the offset is searched for, a few one-role reads, so a
   * page never repeats or skips a role because of a change elsewhere in the list.
   */
  async function offsetAfter(accountId: string, { offset, afterId }: RoleCursor, filter: Omit<RoleQuery, 'offset' | 'limit'>): Promise<number> {
    const read = (at: number, limit: number) => store.listRoles(accountId, { offset: at, limit, ...filter });
    if (offset > 0) {
      const { items: [before, at] } = await read(offset - 1, 2);
      if (before !== undefined && before.id <= afterId && (at === undefined || at.id > afterId)) return offset;
    }
    let low = 0;
    let high = (await read(0, 1)).total;
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      const role = (await read(middle, 1)).items[0];
      if (role === undefined || role.id > afterId) high = middle;
      else low = middle + 1;
    }
    return low;
  }

  return {
    async listRoles(caller, accountId, { limit, cursor, nameContains }) {
      await loadForRead(caller, accountId);
      const filter = nameContains === undefined || nameContains === '' ? {} : { nameContains };
      const offset = cursor === undefined ? 0 : await offsetAfter(accountId, decodeRoleCursor(cursor), filter);
      const page = await store.listRoles(accountId, { offset, limit, ...filter });
      const last = page.items.at(-1);
      const next = offset + page.items.length;
      return {
        items: page.items,
        ...(last !== undefined && next < page.total ? { nextCursor: encodeRoleCursor({ offset: next, afterId: last.id }) } : {}),
      };
    },

    async getRole(caller, accountId, id) {
      await loadForRead(caller, accountId);
      const role = await store.getRole(accountId, id);
      if (role === undefined) throw new NotFound('No such role.');
      return role;
    },

    createRole: (actor, accountId, role) => change(actor, {
      ...directoryChange(store, actor, accountId),
      // Checked before the write, not inside it: concurrent creations may pass it together, so
      // the bound is MAX_ROLES plus the creations in flight, not exact.
      async apply() {
        if ((await store.listRoles(accountId, { offset: 0, limit: 1 })).total >= MAX_ROLES) {
          throw new Conflict(`An account holds at most ${MAX_ROLES} roles: delete some first.`);
        }
      },
      async persist({ event }) {
        const events = [event({ action: 'role.create', target: { type: 'role', id: String(role.id) }, changes: roleChanges(undefined, role) })];
        settleRole(await store.putRole(accountId, role, undefined, events, memberOf(actor)), 'No such account.');
        return trail(accountId, events, role);
      },
    }),

    replaceRole: (actor, accountId, id, role) => change(actor, {
      ...directoryChange(store, actor, accountId),
      async apply() {
        const before = await store.getRole(accountId, id);
        if (before === undefined) throw new NotFound('No such role.');
        return before;
      },
      async persist({ prepared: before, event }) {
        // The event names the role by the id it was changed under; a move shows in `changes.id`.
        const events = [event({ action: 'role.update', target: { type: 'role', id: String(id) }, changes: roleChanges(before, role) })];
        settleRole(await store.putRole(accountId, role, id, events, memberOf(actor)), 'No such role.');
        return trail(accountId, events, role);
      },
    }),

    deleteRole: (actor, accountId, id) => change(actor, {
      ...directoryChange(store, actor, accountId),
      async persist({ event }) {
        const events = [event({ action: 'role.delete', target: { type: 'role', id: String(id) } })];
        if (!(await store.deleteRole(accountId, id, events, memberOf(actor)))) throw new NotFound('No such role.');
        return trail(accountId, events, undefined);
      },
    }),
  };
}

function createSignRecordOperations(store: OwnerStore, change: Change, loadForRead: ReadCheck): Pick<DirectoryService, 'getSignRecord' | 'createSignRecord' | 'replaceSignRecord' | 'deleteSignRecord'> {
  return {
    async getSignRecord(caller, accountId, address) {
      await loadForRead(caller, accountId);
      const record = await store.getSignRecord(accountId, address.toLowerCase());
      if (record === undefined) throw new NotFound('No such sign record.');
      return record;
    },

    createSignRecord: (actor, accountId, given) => change(actor, {
      ...directoryChange(store, actor, accountId),
      async persist({ event }) {
        const record = { ...given, address: given.address.toLowerCase() };
        const events = [event({ action: 'sign_record.create', target: { type: 'sign_record', id: record.address }, changes: signChanges(undefined, record) })];
        settleSign(await store.putSignRecord(accountId, record, 'create', events, memberOf(actor)), 'No such account.');
        return trail(accountId, events, record);
      },
    }),

    replaceSignRecord(actor, accountId, address, times) {
      const record = { address: address.toLowerCase(), ...times };
      return change(actor, {
        ...directoryChange(store, actor, accountId),
        async apply() {
          const before = await store.getSignRecord(accountId, record.address);
          if (before === undefined) throw new NotFound('No such sign record.');
          return before;
        },
        async persist({ prepared: before, event }) {
          const events = [event({ action: 'sign_record.update', target: { type: 'sign_record', id: record.address }, changes: signChanges(before, record) })];
          settleSign(await store.putSignRecord(accountId, record, 'replace', events, memberOf(actor)), 'No such sign record.');
          return trail(accountId, events, record);
        },
      });
    },

    deleteSignRecord: (actor, accountId, address) => change(actor, {
      ...directoryChange(store, actor, accountId),
      async persist({ event }) {
        const lower = address.toLowerCase();
        const events = [event({ action: 'sign_record.delete', target: { type: 'sign_record', id: lower } })];
        if (!(await store.deleteSignRecord(accountId, lower, events, memberOf(actor)))) throw new NotFound('No such sign record.');
        return trail(accountId, events, undefined);
      },
    }),
  };
}

/** `missing`: what a not_found outcome means to this call (the account for a creation, else the role). */
function settleRole(outcome: PutRoleOutcome, missing: string): void {
  switch (outcome) {
    case 'ok':
      return;
    case 'id_taken':
      throw new Conflict('Another role of this account has this id.', 'id');
    case 'slug_taken':
      throw new Conflict('Another role of this account has this slug.', 'slug');
    case 'not_found':
      throw new NotFound(missing);
  }
}

function settleSign(outcome: PutSignRecordOutcome, missing: string): void {
  switch (outcome) {
    case 'ok':
      return;
    case 'exists':
      throw new Conflict('This address has a sign record already: replace it (PUT) instead.', 'address');
    case 'not_found':
      throw new NotFound(missing);
  }
}

function roleChanges(before: Role | undefined, after: Role): Record<string, [unknown, unknown]> {
  return {
    id: [before?.id, after.id],
    slug: [before?.slug, after.slug],
    name: [before?.name, after.name],
    description: [before?.description, after.description],
    public: [before?.public, after.public],
  };
}

/** Times as ISO text, as the owner API shows them. */
function signChanges(before: SignRecord | undefined, after: SignRecord): Record<string, [unknown, unknown]> {
  const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
  return {
    signedNonce: [before?.signedNonce, after.signedNonce],
    signedAt: [iso(before?.signedAt), iso(after.signedAt)],
    signedExpiredAt: [iso(before?.signedExpiredAt), iso(after.signedExpiredAt)],
  };
}

/**
 * Where the next page starts: after role `afterId`, expected at `offset`. Opaque to callers
 * (base64url), so its spelling may change; a cursor that does not decode is a 400 naming it.
 */
interface RoleCursor {
  offset: number;
  afterId: number;
}

const CURSOR_TEXT = /^(0|[1-9][0-9]{0,15})\.(0|[1-9][0-9]{0,15})$/;

function encodeRoleCursor({ offset, afterId }: RoleCursor): string {
  return Buffer.from(`${offset}.${afterId}`, 'utf8').toString('base64url');
}

function decodeRoleCursor(cursor: string): RoleCursor {
  const match = CURSOR_TEXT.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  const offset = Number(match?.[1]);
  const afterId = Number(match?.[2]);
  if (match === null || !Number.isSafeInteger(offset) || !Number.isSafeInteger(afterId)) {
    throw new InvalidRequest('The cursor is not one this listing gave: start again without it.', { field: 'cursor' });
  }
  return { offset, afterId };
}
