/**
 * Certificates for the TLS tests, made by openssl in a temporary directory: a CA of the test's
 * own and leaf certificates it signs, with the names (SAN) and the lifetime a test asks for.
 * Nothing is checked in: each file makes what it needs, once.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';

export interface Leaf {
  certFile: string;
  keyFile: string;
  /** The leaf's SHA-256 fingerprint as node:tls's getPeerCertificate() spells it (AA:BB:…). */
  fingerprint256: string;
}

export interface TestCa {
  dir: string;
  /** The CA's certificate (PEM text): what a client trusts (`ca`). */
  caPem: string;
  /** A leaf for `names` (DNS names, or IP addresses), valid for `days` (1 at least). */
  leaf(name: string, names: string[], days?: number): Leaf;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA in a directory of its own, removed when the test file ends. */
export function makeTestCa(): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-tls-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '30', '-subj', '/CN=Gateway Test CA'], dir);
  const caPem = readFileSync(join(dir, 'ca.pem'), 'utf8');
  return {
    dir,
    caPem,
    leaf(name, names, days = 30) {
      const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
      writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n`);
      openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${names[0]}`], dir);
      openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', String(days), '-extfile', `${name}.ext`], dir);
      const printed = execFileSync('openssl', ['x509', '-in', `${name}.pem`, '-noout', '-fingerprint', '-sha256'], { cwd: dir, encoding: 'utf8' });
      // The form node:tls gives (AA:BB:…, 32 bytes): tests compare the two as strings.
      const fingerprint256 = printed.trim().split('=')[1] ?? '';
      assert.match(fingerprint256, /^(?:[0-9A-F]{2}:){31}[0-9A-F]{2}$/, `openssl printed ${printed}`);
      return { certFile: join(dir, `${name}.pem`), keyFile: join(dir, `${name}.key`), fingerprint256 };
    },
  };
}
