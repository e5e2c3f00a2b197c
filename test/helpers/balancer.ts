/**
 * A round-robin HTTP load balancer for tests: a node:http server on 127.0.0.1 that sends each
 * request to the next upstream in turn, streaming the request body up and the answer down
 * unchanged (status, headers, body), as a plain layer-7 balancer in front of gateway instances
 * would. It keeps no affinity, so consecutive calls of one client land on different instances.
 *
 * Every forwarded request is recorded (which upstream, method, path, status), so a test can tell
 * where a call went. An upstream that cannot be reached is a 502 without a body; an upstream that
 * fails mid-answer cuts the connection, so the caller sees the failure instead of a short body.
 */
import { once } from 'node:events';
import { createServer, request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import type { TestContext } from 'node:test';

export interface Forwarded {
  /** Index in `upstreams`. */
  upstream: number;
  method: string;
  /** Path and query, as sent. */
  path: string;
  /** The upstream's status; undefined while the answer's head has not come, 502 when it never did. */
  status: number | undefined;
}

export interface Balancer {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Every request forwarded so far, in arrival order. */
  forwarded: Forwarded[];
  /** The upstream the next request will go to. */
  readonly next: number;
  close(): Promise<void>;
}

/** Per-connection headers (RFC 9110 7.6.1): they concern one hop, never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'transfer-encoding']);

function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = new Set((String(headers.connection ?? '')).split(',').map((name) => name.trim().toLowerCase()));
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.has(name)) out[name] = value;
  }
  return out;
}

/** Starts the balancer in front of `upstreams` (base URLs); closed when `t` ends. */
export async function startBalancer(t: TestContext, upstreams: string[]): Promise<Balancer> {
  const targets = upstreams.map((u) => new URL(u));
  const forwarded: Forwarded[] = [];
  let next = 0;

  const server = createServer((req, res) => {
    const index = next;
    next = (next + 1) % targets.length;
    const target = targets[index]!;
    const record: Forwarded = { upstream: index, method: req.method ?? 'GET', path: req.url ?? '/', status: undefined };
    forwarded.push(record);

    const up = request({
      host: target.hostname,
      port: target.port,
      method: req.method,
      path: req.url,
      // Without transfer-encoding, a body of unknown length is sent chunked by node itself.
      headers: endToEnd(req.headers),
    });
    up.on('response', (answer) => {
      record.status = answer.statusCode;
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.headers));
      pipeline(answer, res).catch(() => res.destroy());
    });
    up.on('error', () => {
      if (record.status === undefined) record.status = 502;
      if (!res.headersSent) res.writeHead(502, { 'content-length': '0' }).end();
      else res.destroy();
    });
    // The caller went away (an abort): the upstream request goes too.
    res.on('close', () => { if (!res.writableFinished) up.destroy(); });
    pipeline(req, up).catch(() => up.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  const close = async () => {
    if (!server.listening) return;
    const closed = once(server, 'close');
    server.close();
    server.closeAllConnections();
    await closed;
  };
  t.after(close);
  return { url: `http://127.0.0.1:${port}`, forwarded, get next() { return next; }, close };
}
