import { MemoryOwnerStore } from '../../src/stores/owner-store.memory.js';
import { runOwnerStoreContract } from '../contracts/owner-store.contract.js';

runOwnerStoreContract('memory', async (data, { maxAuditEvents }) => ({ store: new MemoryOwnerStore(data, { maxAuditEvents }), close: async () => {} }));
