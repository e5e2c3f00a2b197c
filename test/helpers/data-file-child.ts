/**
 * A process of its own for test/state/owners-file.test.ts, which needs what one test
 * process cannot do to itself: die in the middle of a write, or run as a user whom file
 * permissions bind (the tests may run as root). Run as
 * `node --import ./test/helpers/resolve-ts.ts test/helpers/data-file-child.ts <scenario> <data file>`; prints one JSON line.
 *   crash-before-rename  changes acct_a, and is killed (SIGKILL) when the writer calls rename
 *   change               changes acct_a's name to "changed"; prints the outcome and the name it then serves
 *                        (with DROP_TO_UID set, as that user: root is bound by no permission)
 *   write-loop           names acct_a "v1", "v2", … without end, printing {"wrote": n} after each write
 */
import { syncBuiltinESMExports } from 'node:module';
import fsPromises from 'node:fs/promises';
import { readDataFile } from '../../src/state/data-file/data-file.js';
import { FileOwnerStore } from '../../src/state/owners/file.js';
import { createLogger } from '../../src/telemetry/log.js';

const [scenario, file] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: data-file-child.ts <scenario> <data file>');
const store = new FileOwnerStore(file, readDataFile(file), { log: createLogger('silent'), maxAuditEvents: 100 });
const rename = (name: string) => store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, name }, events: [], result: undefined }));

if (scenario === 'crash-before-rename') {
  // The writer's `rename` is a live binding of node:fs/promises: patched here, it is this one.
  fsPromises.rename = () => {
    process.kill(process.pid, 'SIGKILL');
    return new Promise(() => {});
  };
  syncBuiltinESMExports();
  await rename('never served');
  console.log(JSON.stringify({ survived: true }));
} else if (scenario === 'change') {
  // Run by root, it becomes this user only now, with every module loaded: the user need not
  // be able to read the checkout (a clone in a private temporary directory), only be bound by
  // the data file's directory's permissions.
  const uid = process.env.DROP_TO_UID;
  if (uid !== undefined) {
    process.setgid!(Number(uid));
    process.setuid!(Number(uid));
  }
  try {
    await rename('changed');
    console.log(JSON.stringify({ ok: true, name: (await store.readAccount('acct_a'))?.name }));
  } catch (err) {
    const { status, code } = err as { status?: number; code?: string };
    console.log(JSON.stringify({ ok: false, status, code, name: (await store.readAccount('acct_a'))?.name }));
  }
} else if (scenario === 'write-loop') {
  for (let n = 1; ; n++) {
    await rename(`v${n}`);
    console.log(JSON.stringify({ wrote: n }));
  }
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
