/**
 * Sign records and roles, read-only: the dashboard and the signature collector write them
 * elsewhere. Every query is scoped to one account; nothing crosses accounts.
 */
export interface SignRecord {
  /** Lowercase; the route echoes the caller's own spelling as `did`. */
  address: string;
  signedNonce: number;
  /** Epoch milliseconds. */
  signedAt: number;
  signedExpiredAt: number;
}

export interface Role {
  id: number;
  slug: string;
  name: string;
  description: string;
  public: boolean;
}

export interface RoleQuery {
  /** Zero-based index of the first item. */
  offset: number;
  limit: number;
  /** Case-insensitive substring of `name`; absent lists every role. */
  nameContains?: string;
}

export interface RolePage {
  items: Role[];
  /** Count of all roles matching the query, on every page. */
  total: number;
}

export interface Directory {
  /** The record of `address` (lowercase) in the account; undefined when it has none. */
  findSignRecord(accountId: string, address: string): Promise<SignRecord | undefined>;
  /** One page of the account's roles in ascending `id` order; past the end, no items. */
  listRoles(accountId: string, query: RoleQuery): Promise<RolePage>;
}

/**
 * A change to what a store holds, as its writer announces it (Redis pub/sub) or as the gateway
 * finds it (a reloaded data file). `account` covers everything of the account.
 */
export type DirectoryChange =
  | { kind: 'roles'; accountId: string }
  | { kind: 'sign'; accountId: string; address: string }
  | { kind: 'account'; accountId: string };

export interface DirectoryChangeListener {
  onChange(change: DirectoryChange): void;
  /** Changes may have gone unheard (a reconnect, a reloaded file): nothing read before is to be trusted. */
  onGap(): void;
}

/** Where change notices come from; the cache layer listens to every source there is. */
export interface DirectoryChanges {
  watch(listener: DirectoryChangeListener): void;
}
