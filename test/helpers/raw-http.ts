/**
 * A byte-level HTTP/1.1 client for the proxy tests: writes exactly the bytes a test gives it
 * over one TCP connection and parses the answers exactly as they arrived (every header line
 * in order and case, chunked bodies de-chunked, several answers on one connection), without
 * waiting for the server to close the connection as rawRequest does.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  /** Every header line in arrival order: [name as sent, value]. */
  headers: [string, string][];
  /** The body as it would reach an application (chunked framing removed). */
  body: Buffer;
  /** Every value of a header, compared without case. */
  all(name: string): string[];
  /** The one value of a header, or undefined; fails the test when the header is repeated. */
  get(name: string): string | undefined;
  /** The body parsed as JSON; the raw text in the failure message otherwise. */
  json(): any;
}

/** A raw connection: write bytes, read whole responses one after another. */
export class RawConnection {
  readonly socket: Socket;
  #buffer = Buffer.alloc(0);
  #ended = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;
  /** Resolves when the server has closed (or reset) the connection. */
  readonly closed: Promise<void>;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#notify();
    });
    socket.on('error', (err) => {
      this.#error = err;
      this.#notify();
    });
    this.closed = new Promise((resolve) => socket.once('close', () => {
      this.#ended = true;
      this.#notify();
      resolve();
    }));
  }

  static open(url: string): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.off('error', reject);
        resolve(new RawConnection(socket));
      });
      socket.once('error', reject);
    });
  }

  write(bytes: string | Buffer): void {
    this.socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** True once the server closed the connection. */
  get ended(): boolean {
    return this.#ended;
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async #more(deadline: number): Promise<void> {
    if (this.#ended) throw new Error(`the connection closed mid-response (${this.#error?.message ?? 'no error'}); had: ${JSON.stringify(this.#buffer.toString('latin1').slice(0, 500))}`);
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`no complete response in time; had: ${JSON.stringify(this.#buffer.toString('latin1').slice(0, 500))}`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, left);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async #line(deadline: number): Promise<string> {
    for (;;) {
      const end = this.#buffer.indexOf('\r\n');
      if (end !== -1) {
        const line = this.#buffer.subarray(0, end).toString('latin1');
        this.#buffer = this.#buffer.subarray(end + 2);
        return line;
      }
      await this.#more(deadline);
    }
  }

  async #bytes(n: number, deadline: number): Promise<Buffer> {
    while (this.#buffer.length < n) await this.#more(deadline);
    const out = this.#buffer.subarray(0, n);
    this.#buffer = this.#buffer.subarray(n);
    return out;
  }

  /**
   * The next complete response on the connection (interim 1xx answers skipped). `head`: the
   * request was a HEAD, so the response has no body whatever its headers say.
   */
  async response({ head = false, timeoutMs = 5000 }: { head?: boolean; timeoutMs?: number } = {}): Promise<RawResponse> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const statusLine = await this.#line(deadline);
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
      assert.ok(match, `not a status line: ${JSON.stringify(statusLine)}`);
      const status = Number(match[1]);
      const headers: [string, string][] = [];
      for (;;) {
        const line = await this.#line(deadline);
        if (line === '') break;
        const colon = line.indexOf(':');
        headers.push([line.slice(0, colon), line.slice(colon + 1).trim()]);
      }
      if (status >= 100 && status < 200) continue;
      const all = (name: string) => headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v);
      let body: Buffer;
      const te = all('transfer-encoding');
      const cl = all('content-length');
      if (head || status === 204 || status === 304) {
        body = Buffer.alloc(0);
      } else if (te.length > 0) {
        const parts: Buffer[] = [];
        for (;;) {
          const size = Number.parseInt((await this.#line(deadline)).split(';')[0]!, 16);
          if (size === 0) {
            while ((await this.#line(deadline)) !== '') { /* trailers */ }
            break;
          }
          parts.push(await this.#bytes(size, deadline));
          await this.#line(deadline);
        }
        body = Buffer.concat(parts);
      } else if (cl.length > 0) {
        body = await this.#bytes(Number(cl[0]), deadline);
      } else {
        while (!this.#ended) await this.#more(deadline);
        body = this.#buffer;
        this.#buffer = Buffer.alloc(0);
      }
      return {
        status,
        headers,
        body,
        all,
        get(name) {
          const values = all(name);
          assert.ok(values.length <= 1, `${name} sent ${values.length} times: ${JSON.stringify(values)}`);
          return values[0];
        },
        json() {
          const text = body.toString('utf8');
          try {
            return JSON.parse(text);
          } catch {
            assert.fail(`status ${status}: body is not JSON: ${JSON.stringify(text.slice(0, 500))}`);
          }
        },
      };
    }
  }
}

/** One request's bytes on a fresh connection, its one answer; the connection is then closed. */
export async function rawExchange(url: string, bytes: string | Buffer, options: { head?: boolean; timeoutMs?: number } = {}): Promise<RawResponse> {
  const connection = await RawConnection.open(url);
  try {
    connection.write(bytes);
    return await connection.response(options);
  } finally {
    connection.destroy();
  }
}
