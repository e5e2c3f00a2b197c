import { MemoryRefreshTokenStore } from '../../src/stores/token-store.memory.js';
import { runTokenStoreContract } from '../contracts/token-store.contract.js';

// The contract passes its own `now` into every call; the clock the memory store reclaims
// entries by only has to stand at or before those instants.
runTokenStoreContract('memory', async () => ({
  store: new MemoryRefreshTokenStore({ clock: { now: () => Date.UTC(2026, 0, 1) }, maxTokens: 10_000 }),
  close: async () => {},
}));
