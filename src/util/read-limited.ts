/** Reading a body from an outside service (an issuer's keys, a directory), bounded in size. */
import type { Readable } from 'node:stream';
import getRawBody from 'raw-body';

/**
 * The body as text, up to `limit` bytes. A refused body's stream is destroyed: left open, the
 * connection would stay busy, and the call's timeout would later raise an error on the stream
 * with no listener, which ends the process.
 */
export async function readLimited(body: Readable, limit: number): Promise<string> {
  try {
    return await getRawBody(body, { limit, encoding: 'utf8' });
  } catch (err) {
    body.destroy();
    throw err;
  }
}
