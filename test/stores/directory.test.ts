import { MemoryDirectory } from '../../src/stores/directory.memory.js';
import { MemoryKeyDirectory } from '../../src/stores/key-directory.memory.js';
import { runDirectoryContract } from '../contracts/directory.contract.js';
import { runKeyDirectoryContract } from '../contracts/key-directory.contract.js';

runDirectoryContract('memory', async (data) => ({ directory: new MemoryDirectory(data), close: async () => {} }));
runKeyDirectoryContract('memory', async (data) => ({ keys: new MemoryKeyDirectory(data), close: async () => {} }));
