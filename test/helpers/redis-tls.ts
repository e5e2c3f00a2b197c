/**
 * TLS for the Redis tests: a CA, a server certificate for 127.0.0.1 and a client certificate,
 * made with `openssl` in a temporary directory (removed in t.after), and the redis-server and
 * redis-cli arguments that use them. The servers speak TLS only (`--port 0`) and require a
 * client certificate signed by the CA (`--tls-auth-clients yes`).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { readFileSync } from 'node:fs';
import type { Cleanup } from './redis-topologies.js';

export interface TlsFiles {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A second CA, unrelated: the gateway must refuse servers it did not sign. */
  otherCa: string;
}

function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { cwd, timeout: 30_000 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`openssl ${args.join(' ')}: ${err.message} ${stderr}`));
      else resolve();
    });
  });
}

/** Makes the files (EC P-256 keys: quick to make) and removes them in t.after. */
export async function makeTlsFiles(t: Cleanup): Promise<TlsFiles> {
  const dir = await mkdtemp(join(tmpdir(), 'gw-redis-tls-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const key = (name: string) => openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', name], dir);
  const selfSigned = async (name: string, subject: string) => {
    await key(`${name}.key`);
    await openssl(['req', '-x509', '-new', '-key', `${name}.key`, '-subj', subject, '-days', '2', '-out', `${name}.crt`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  };
  const signed = async (name: string, subject: string, extensions: string) => {
    await key(`${name}.key`);
    await openssl(['req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`], dir);
    await writeFile(join(dir, `${name}.ext`), extensions);
    await openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2',
      '-extfile', `${name}.ext`, '-out', `${name}.crt`], dir);
  };
  await selfSigned('ca', '/CN=gateway test CA');
  await selfSigned('other-ca', '/CN=some other CA');
  // One certificate for the servers, used by them as clients of each other too (replication,
  // the sentinels, the Cluster bus): both purposes.
  await signed('server', '/CN=redis test server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  await signed('client', '/CN=gateway', 'extendedKeyUsage=clientAuth\n');
  return {
    dir,
    ca: join(dir, 'ca.crt'),
    serverCert: join(dir, 'server.crt'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.crt'),
    clientKey: join(dir, 'client.key'),
    otherCa: join(dir, 'other-ca.crt'),
  };
}

/** redis-server arguments for a TLS-only server on `port` (after redisArgs, whose --port they override). */
export function tlsServerArgs(files: TlsFiles, port: number): string[] {
  return [
    '--port', '0', '--tls-port', String(port),
    '--tls-cert-file', files.serverCert, '--tls-key-file', files.serverKey, '--tls-ca-cert-file', files.ca,
    '--tls-auth-clients', 'yes',
  ];
}

/** The same as lines of a config file (sentinels take theirs from one). */
export function tlsConfigLines(files: TlsFiles, port: number): string[] {
  return [
    'port 0', `tls-port ${port}`,
    `tls-cert-file ${files.serverCert}`, `tls-key-file ${files.serverKey}`, `tls-ca-cert-file ${files.ca}`,
    'tls-auth-clients yes',
    // A sentinel speaks TLS to the master and the replicas too.
    'tls-replication yes',
  ];
}

/** redis-cli arguments to reach these servers. */
export function tlsCliArgs(files: TlsFiles): string[] {
  return ['--tls', '--cacert', files.ca, '--cert', files.clientCert, '--key', files.clientKey];
}

/** A raw PING over TLS with the client certificate, so the helper does not depend on the client under test. */
export function answersTlsPing(files: TlsFiles, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({
      host: '127.0.0.1', port,
      ca: readFileSync(files.ca), cert: readFileSync(files.clientCert), key: readFileSync(files.clientKey),
    });
    const done = (ok: boolean) => { socket.destroy(); resolve(ok); };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('data', (d: Buffer) => done(d.toString().startsWith('+PONG') || d.toString().startsWith('-NOAUTH')));
    socket.on('secureConnect', () => socket.write('PING\r\n'));
  });
}
