/**
 * The access-token deny list in process memory, for a gateway that runs alone: listeners are
 * called at once. A restart forgets it, and needs to: every access token issued before the
 * start is refused anyway (state/revocation/memory.ts, the epoch).
 */
import type { DeniedToken, DenyOutcome, DenylistListener, TokenDenylist } from './store.js';

export class MemoryTokenDenylist implements TokenDenylist {
  readonly #entries = new Map<string, number>();
  readonly #listeners: DenylistListener[] = [];
  readonly #maxEntries: number;

  constructor({ maxEntries }: { maxEntries: number }) {
    this.#maxEntries = maxEntries;
  }

  async deny({ jti, expiresAt }: DeniedToken, now: number): Promise<DenyOutcome> {
    const known = this.#entries.get(jti);
    if (known === undefined || known <= now) {
      if (this.#entries.size >= this.#maxEntries) this.#dropExpired(now);
      if (this.#entries.size >= this.#maxEntries) return 'full';
    }
    this.#entries.set(jti, Math.max(known ?? 0, expiresAt));
    for (const listener of this.#listeners) listener.onDenied({ jti, expiresAt });
    return known === undefined || known <= now ? 'denied' : 'known';
  }

  async list(now: number): Promise<DeniedToken[]> {
    this.#dropExpired(now);
    return [...this.#entries].map(([jti, expiresAt]) => ({ jti, expiresAt }));
  }

  watch(listener: DenylistListener): void {
    this.#listeners.push(listener);
  }

  #dropExpired(now: number): void {
    for (const [jti, expiresAt] of this.#entries) if (expiresAt <= now) this.#entries.delete(jti);
  }
}
