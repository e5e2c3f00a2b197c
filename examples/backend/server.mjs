// The example backend of compose.yaml: a dependency-free HTTP server that answers every request
// with what the gateway told it about the caller, so `docker compose up` shows a proxied,
// authenticated call end to end. It trusts the identity headers only because the gateway is the
// one way in (compose publishes no port of its own); a backend reachable otherwise should verify
// the signed assertion instead (docs/proxying.md, `assertion: true`).
import { createServer } from 'node:http';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '0.0.0.0';

// The gateway's default identity header names (proxy.identityHeaders.*).
const IDENTITY = { account: 'x-account-id', key: 'x-key-id', token: 'x-token-id', request: 'x-request-id' };
const FORWARDED = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded'];

const server = createServer((req, res) => {
  // Read and drop the body: the answer is about the headers.
  req.resume();
  req.on('end', () => {
    const identity = Object.fromEntries(Object.entries(IDENTITY).map(([name, header]) => [name, req.headers[header] ?? null]));
    const forwarded = Object.fromEntries(FORWARDED.filter((header) => header in req.headers).map((header) => [header, req.headers[header]]));
    const body = JSON.stringify({
      backend: 'example',
      method: req.method,
      path: req.url,
      identity,
      forwarded,
      // Never set by the gateway unless a route has forwardAuthorization: true.
      authorizationReceived: req.headers.authorization !== undefined,
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});

server.listen(port, host, () => {
  const { port: bound } = server.address();
  console.log(JSON.stringify({ msg: 'example backend listening', host, port: bound }));
});

// As PID 1 in a container Node gets no default SIGTERM handling: stop on it, or `docker compose
// down` waits its 10 s and kills.
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
