/**
 * The ClientHello reader (src/tls/client-hello.ts) against Node's own ClientHellos (captured
 * by a plain TCP server from node:tls clients), then against every cut of one and random
 * changes to one: it answers or says undefined, never throws, and never reads a name or
 * protocol a cut record does not hold whole.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { connect } from 'node:tls';
import { readClientHello, recordLength } from '../../src/tls/client-hello.js';

/** The first bytes a node:tls client sends (its ClientHello record, whole). */
async function clientHelloOf(options: { servername?: string; ALPNProtocols?: string[] }): Promise<Buffer> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const received = new Promise<Buffer>((resolve) => {
    server.once('connection', (socket) => {
      let head = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const length = recordLength(head);
        if (length !== undefined && head.length >= length) {
          resolve(head.subarray(0, length));
          socket.destroy();
        }
      });
    });
  });
  const client = connect({ host: '127.0.0.1', port, ...options });
  client.on('error', () => {});
  const hello = await received;
  client.destroy();
  server.close();
  return hello;
}

test('reads the server name and the ALPN protocols of real ClientHellos', async () => {
  const acmeHello = await clientHelloOf({ servername: 'A.Gateway.test', ALPNProtocols: ['acme-tls/1'] });
  assert.deepEqual(readClientHello(acmeHello), { serverName: 'a.gateway.test', protocols: ['acme-tls/1'] });
  const browserLike = await clientHelloOf({ servername: 'api.example.test', ALPNProtocols: ['h2', 'http/1.1'] });
  assert.deepEqual(readClientHello(browserLike), { serverName: 'api.example.test', protocols: ['h2', 'http/1.1'] });
  // An IP address is never sent as SNI (RFC 6066 §3), and no ALPN was offered.
  assert.deepEqual(readClientHello(await clientHelloOf({ servername: '' })), { serverName: undefined, protocols: [] });
});

test('a cut record is never read; bytes that are not a TLS handshake need nothing more', async () => {
  const hello = await clientHelloOf({ servername: 'a.gateway.test', ALPNProtocols: ['acme-tls/1'] });
  for (let cut = 0; cut < hello.length; cut++) assert.equal(readClientHello(hello.subarray(0, cut)), undefined, `cut at ${cut}`);
  assert.equal(recordLength(Buffer.from('GET / HTTP/1.1\r\n')), 0);
  assert.equal(recordLength(Buffer.from([0x16, 0x03])), undefined, 'a header not yet whole: wait');
  assert.equal(recordLength(Buffer.from([0x16, 0x03, 0x01, 0xff, 0xff])), 0, 'longer than a record may be');
});

test('random changes to a ClientHello never throw, and whatever is read is what the bytes hold', async () => {
  const hello = await clientHelloOf({ servername: 'a.gateway.test', ALPNProtocols: ['acme-tls/1'] });
  for (let run = 0; run < 2000; run++) {
    const changed = Buffer.from(hello);
    for (let n = randomInt(1, 4); n > 0; n--) changed[randomInt(0, changed.length)] = randomInt(0, 256);
    const read = readClientHello(changed);
    if (read === undefined) continue;
    for (const protocol of read.protocols) assert.ok(changed.includes(Buffer.from(protocol, 'latin1')), 'a protocol read is in the bytes');
    if (read.serverName !== undefined) assert.ok(changed.toString('latin1').toLowerCase().includes(read.serverName));
  }
});
