import type { DataFile } from './data-file.js';
import type { Directory, Role, RolePage, RoleQuery, SignRecord } from './directory.js';

/** Directory held in process memory, built from the data file. */
export class MemoryDirectory implements Directory {
  readonly #roles = new Map<string, Role[]>();
  readonly #signRecords = new Map<string, Map<string, SignRecord>>();

  constructor(data: DataFile) {
    for (const account of data.accounts) {
      this.#roles.set(account.id, account.roles.map((r) => Object.freeze({ ...r })).sort((a, b) => a.id - b.id));
      this.#signRecords.set(account.id, new Map(account.signRecords.map((s) => [
        s.address.toLowerCase(),
        Object.freeze({
          address: s.address.toLowerCase(),
          signedNonce: s.signedNonce,
          signedAt: Date.parse(s.signedAt),
          signedExpiredAt: Date.parse(s.signedExpiredAt),
        }),
      ])));
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
