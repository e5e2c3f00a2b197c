// Makes the gateway's Ed25519 signing key for compose.yaml, once: the key lives in a named volume,
// never in the repository or the image, so every checkout gets its own and tokens survive
// restarts of the gateway. Run again, it keeps the existing key (exit 0). Also the way to make the
// next key when rotating: KEY_FILE=/keys/signing-2.pem (docs/deploy.md).
//
//   KEY_FILE   where to write the PKCS#8 PEM (default /keys/signing.pem)
//   KEY_OWNER  uid:gid to give it, so the unprivileged gateway can read it (default 1000:1000,
//              the `node` user of the official Node images); the file is mode 0600.
import { generateKeyPairSync } from 'node:crypto';
import { chownSync, existsSync, writeFileSync } from 'node:fs';

const file = process.env.KEY_FILE ?? '/keys/signing.pem';
const [uid, gid] = (process.env.KEY_OWNER ?? '1000:1000').split(':').map(Number);

if (existsSync(file)) {
  console.log(JSON.stringify({ msg: 'signing key present: kept', file }));
} else {
  const { privateKey } = generateKeyPairSync('ed25519');
  // 'wx': never overwrite a key a concurrent run has just written.
  writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { flag: 'wx', mode: 0o600 });
  chownSync(file, uid, gid);
  console.log(JSON.stringify({ msg: 'signing key made', file }));
}
