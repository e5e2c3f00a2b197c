/**
 * A webhook receiver on 127.0.0.1 for the tests: it keeps every request (headers, body, path),
 * answers 200 unless told otherwise (`answers`, used in turn), and lets a test wait for the
 * n-th request rather than for time.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingMessage['headers'];
  body: string;
  /** The request's path and query. */
  path: string;
}

export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  received: Received[];
  /** What the next requests are answered, in turn; 200 `ok` once they are used up. */
  answers: ((res: ServerResponse) => void)[];
  /** Resolves once `count` requests have come in all. */
  arrived(count: number): Promise<void>;
  close(): void;
}

export async function startWebhookReceiver(t?: { after(fn: () => void): void }): Promise<WebhookReceiver> {
  const received: Received[] = [];
  const answers: ((res: ServerResponse) => void)[] = [];
  let waiting: (() => void)[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), path: req.url ?? '' });
      (answers.shift() ?? ((r: ServerResponse) => r.end('ok')))(res);
      const woken = waiting;
      waiting = [];
      for (const wake of woken) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () => {
    server.closeAllConnections();
    server.close();
  };
  t?.after(close);
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    answers,
    async arrived(count) {
      while (received.length < count) await new Promise<void>((resolve) => waiting.push(resolve));
    },
    close,
  };
}
