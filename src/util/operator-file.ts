/**
 * Reading a file an operator names (the config file, a signing key's pemFile), which is read
 * again on every reload while the gateway serves: readFileSync would block the event loop for
 * good on a FIFO no one writes, and read /dev/zero until memory runs out. So the file is opened
 * without blocking, must be a regular file of a bounded size, and is read to that size only.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/** Why a file could not be read: the system's error code, or what is wrong with the file. */
export class OperatorFileError extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(reason);
    this.reason = reason;
    this.name = 'OperatorFileError';
  }
}

/** The file's text (UTF-8); OperatorFileError when it cannot be opened, is not a regular file, or is larger than `maxBytes`. */
export function readOperatorFile(path: string, maxBytes: number): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new OperatorFileError((err as NodeJS.ErrnoException).code ?? 'error');
  }
  try {
    const stats = fstatSync(fd);
    if (stats.isDirectory()) throw new OperatorFileError('EISDIR');
    if (!stats.isFile()) throw new OperatorFileError('not a regular file');
    if (stats.size > maxBytes) throw new OperatorFileError(`larger than ${maxBytes} bytes`);
    // Read to the size fstat gave, no further: a file growing meanwhile is cut, never followed.
    const buffer = Buffer.alloc(stats.size);
    let filled = 0;
    while (filled < buffer.length) {
      const read = readSync(fd, buffer, filled, buffer.length - filled, filled);
      if (read === 0) break;
      filled += read;
    }
    return buffer.toString('utf8', 0, filled);
  } catch (err) {
    if (err instanceof OperatorFileError) throw err;
    throw new OperatorFileError((err as NodeJS.ErrnoException).code ?? 'error');
  } finally {
    closeSync(fd);
  }
}
