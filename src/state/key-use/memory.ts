/**
 * Last sign-ins in process memory: a gateway running alone, since it started. Bounded by the
 * number of keys that signed in (an entry per key, each a number), which the key directory
 * bounds already: only an existing key's sign-in is recorded.
 */
import type { KeyUseStore } from './store.js';

export class MemoryKeyUseStore implements KeyUseStore {
  readonly #accounts = new Map<string, Map<string, number>>();

  async record(accountId: string, keyId: string, at: number): Promise<void> {
    let keys = this.#accounts.get(accountId);
    if (keys === undefined) this.#accounts.set(accountId, keys = new Map());
    if ((keys.get(keyId) ?? -Infinity) < at) keys.set(keyId, at);
  }

  async read(accountId: string): Promise<Map<string, number>> {
    return new Map(this.#accounts.get(accountId));
  }
}
