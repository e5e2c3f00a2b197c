/**
 * The backend of bench/proxy.ts, behind every proxy, and also its `direct` target: node:http
 * with keep-alive, answering every request with the same small JSON body (about 100 bytes)
 * that names the path it was asked for, so a sanity check can see what reached it. A request
 * with a body (bench/memory.ts's upload) is read to its end, discarding it, and answered with
 * the number of bytes that arrived.
 *
 *   PORT=<port> node bench/servers/backend.ts
 *
 * Plain Node (its type stripping, no tsx loader), like the other servers under bench/servers:
 * what runs is what would run in production. It imports no file of the repo.
 */
import { createServer } from 'node:http';

const port = Number(process.env.PORT);
if (!Number.isInteger(port) || port <= 0) throw new Error('PORT must be set to a port number');

// Padding keeps the body near 100 bytes whatever the path's length.
const PAD = 'x'.repeat(64);

const server = createServer((req, res) => {
  const path = req.url ?? '/';
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => { bytes += chunk.length; });
    req.on('end', () => {
      const body = JSON.stringify({ ok: true, from: 'bench-backend', path, bytes });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    return;
  }
  const body = JSON.stringify({ ok: true, from: 'bench-backend', path, pad: PAD.slice(0, Math.max(0, 48 - path.length)) });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
// Longer than any pause between runs, so that a proxy's pooled connection is never closed by
// the backend just as the proxy reuses it (Node's 5 s default would race between rounds).
server.keepAliveTimeout = 300_000;
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
