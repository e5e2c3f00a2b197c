import { toSignRecord, type DataFile } from '../data-file/data-file.js';
import type { Directory, DirectoryChange, DirectoryChangeListener, DirectoryChanges, Role, RolePage, RoleQuery, SignRecord } from './store.js';

/**
 * Directory held in process memory, built from the data file (the "file" store). `load`
 * replaces everything at once when the file changes, and tells the cache to read again: all
 * of it, or only what `changes` names when the gateway made the change itself (the owner API).
 */
export class MemoryDirectory implements Directory, DirectoryChanges {
  #roles = new Map<string, Role[]>();
  #signRecords = new Map<string, Map<string, SignRecord>>();
  readonly #listeners: DirectoryChangeListener[] = [];

  constructor(data: DataFile) {
    this.load(data);
  }

  watch(listener: DirectoryChangeListener): void {
    this.#listeners.push(listener);
  }

  load(data: DataFile, changes?: readonly DirectoryChange[]): void {
    const roles = new Map<string, Role[]>();
    const signRecords = new Map<string, Map<string, SignRecord>>();
    for (const account of data.accounts) {
      roles.set(account.id, account.roles.map((r) => Object.freeze({ ...r })).sort((a, b) => a.id - b.id));
      signRecords.set(account.id, new Map(account.signRecords.map((s) => {
        const record = toSignRecord(s);
        return [record.address, record];
      })));
    }
    this.#roles = roles;
    this.#signRecords = signRecords;
    for (const listener of this.#listeners) {
      if (changes === undefined) listener.onGap();
      else for (const change of changes) listener.onChange(change);
    }
  }

  async findSignRecord(accountId: string, address: string): Promise<SignRecord | undefined> {
    return this.#signRecords.get(accountId)?.get(address);
  }

  async listRoles(accountId: string, { offset, limit, nameContains }: RoleQuery): Promise<RolePage> {
    let roles = this.#roles.get(accountId) ?? [];
    if (nameContains !== undefined) {
      const needle = nameContains.toLowerCase();
      roles = roles.filter((r) => r.name.toLowerCase().includes(needle));
    }
    return { items: roles.slice(offset, offset + limit), total: roles.length };
  }
}
