/**
 * A state file only its owner may read (mode 0600: certificates and keys, queued mail), written
 * whole or not at all: into a new temporary file beside it, synced, then renamed over it, so a
 * crash leaves the old file or the new one, never half of either.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export async function writePrivateFile(file: string, text: string): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    // The umask may have taken bits off the mode given to open; never any added.
    await chmod(temp, 0o600);
    await rename(temp, file);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}
