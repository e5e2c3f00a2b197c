import { MemoryDirectory } from '../../src/state/directory/memory.js';
import { runDirectoryContract } from '../contracts/directory.contract.js';

// The other implementations' runs are beside it: directory-redis, directory-http, directory-cache.
runDirectoryContract('memory', async (data) => ({ directory: new MemoryDirectory(data), close: async () => {} }));
