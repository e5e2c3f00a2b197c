/**
 * The outbox of a gateway alone: a JSON file of its own (`mail.outboxFile`, mode 0600: queued
 * mails hold links with one-time tokens), written after every change the way the data file is
 * (a temporary file, synced, renamed over), each write waiting for the one before. Claims stay
 * in this process (without Redis there is one process: several workers need Redis); a restart
 * forgets them, so a mail whose send was cut short is due again at its lease's end, as written.
 */
import { readFileSync } from 'node:fs';
import { writePrivateFile } from '../../util/private-file.js';
import { MemoryOutbox, type HeldMail } from './memory.js';
import type { NewMail, QueueItem } from './store.js';

/**
 * Reads the outbox kept in `file` (none yet: empty); throws, naming the file (and the setting
 * that names it), when it is not an outbox.
 */
export function openFileOutbox<N extends QueueItem = NewMail>(file: string, setting = 'mail.outboxFile'): FileOutbox<N> {
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  let held: HeldMail<N>[] = [];
  if (text !== undefined) {
    try {
      const parsed = JSON.parse(text) as { mails?: unknown };
      if (!Array.isArray(parsed.mails)) throw new Error('no "mails" list');
      held = parsed.mails as HeldMail<N>[];
    } catch (err) {
      throw new Error(`${setting} ${file} is not an outbox (${(err as Error).message}): move it aside to start afresh`);
    }
  }
  return new FileOutbox<N>(file, held);
}

export class FileOutbox<N extends QueueItem = NewMail> extends MemoryOutbox<N> {
  readonly #file: string;
  #last: Promise<void> = Promise.resolve();

  constructor(file: string, initial: readonly HeldMail<N>[]) {
    super(initial);
    this.#file = file;
  }

  protected override changed(): Promise<void> {
    // The state at the time of this change, written after every write begun before it.
    const mails = [...this.held.values()].map(({ mail, dueAt }) => ({ mail, dueAt }));
    const text = `${JSON.stringify({ mails }, null, 2)}\n`;
    const write = this.#last.then(() => writePrivateFile(this.#file, text));
    this.#last = write.catch(() => undefined);
    return write;
  }
}

