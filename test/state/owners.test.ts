import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatDataFile } from '../../src/state/data-file/writer.js';
import { FileOwnerStore } from '../../src/state/owners/file.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import { createLogger } from '../../src/telemetry/log.js';
import { runOwnerStoreContract } from '../contracts/owners.contract.js';

runOwnerStoreContract('memory', async (data, { maxAuditEvents }) => ({ store: new MemoryOwnerStore(data, { maxAuditEvents }), close: async () => {} }));

// Every change goes through the real file (test/state/owners-file.test.ts tests the file itself).
runOwnerStoreContract('data file', async (data, { maxAuditEvents }) => {
  const dir = mkdtempSync(join(tmpdir(), 'owner-store-'));
  const file = join(dir, 'data.json');
  writeFileSync(file, formatDataFile(data));
  const store = new FileOwnerStore(file, data, { log: createLogger('silent'), maxAuditEvents });
  return { store, close: async () => rmSync(dir, { recursive: true, force: true }) };
});
