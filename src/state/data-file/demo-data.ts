/**
 * The demo data's API keys are a public credential: config/demo-data.json ships in the image,
 * and the README prints their secrets. Under NODE_ENV=production (the Docker image's default,
 * listening on all interfaces) the gateway refuses to start while its key source holds any of
 * them, unless `data.allowDemoData` says so; test/startup.test.ts holds it.
 *
 * With keys in Redis (KEY_SOURCE=redis) the start-up check cannot see them: a production gateway
 * refuses a demo secret at each sign-in instead (auth/demo-secrets.ts), by the same digests.
 *
 * A key counts as demo data by its secret, not by the file's path or the key's name: a copy of
 * the demo file under another name, or one demo key pasted into a real file, serves the same
 * published secret. Each published secret is listed here in clear, as the README gives it, and
 * test/unit/demo-data.test.ts checks that every key of the shipped file is among them.
 */
import { hashSecret, secretDigest } from '../../domain/secrets.js';
import type { DataFile } from './data-file.js';

const PUBLISHED_DEMO_SECRETS = ['sk_demo_alice_secret', 'sk_demo_alice_disabled_secret', 'sk_demo_bob_secret'];
const DEMO_DIGESTS = new Set(PUBLISHED_DEMO_SECRETS.map((secret) => secretDigest(hashSecret(secret))));
/**
 * The demo owners' password hashes (their passwords, `alice demo passphrase` and `bob demo
 * passphrase`, are printed in the README for the dashboard). Recognised by the hash string as
 * shipped: verifying every owner against the published passwords would cost an argon2 run each.
 */
const DEMO_OWNER_HASHES = new Set([
  '$argon2id$v=19$m=19456,t=2,p=1$mQdoESWDcPgYyZFIb2ruIQ$txxv5QQCcXjozaAOiIQqDepd7K4oA2PD28m1CBDNd2M',
  '$argon2id$v=19$m=19456,t=2,p=1$ud+CIXa1WVR1uyciFku9Ig$6mNEQEJcx8pUtJcwTl1unCQHKnJhCcv5cZ+7wpAMn9o',
]);

/** True for the digest (as stored, "sha256:…") of a published demo secret. */
export function isDemoSecretDigest(digest: string): boolean {
  return DEMO_DIGESTS.has(digest);
}

/** True for a demo owner's password hash, as shipped. */
export function isDemoOwnerHash(passwordHash: string): boolean {
  return DEMO_OWNER_HASHES.has(passwordHash);
}

export class DemoDataError extends Error {
  override name = 'DemoDataError';
}

/**
 * "<account>/<key id>" of every API key in `data` whose secret is a published demo secret, and
 * "owner <id>" of every owner whose password is a published demo password.
 */
export function findDemoKeys(data: DataFile): string[] {
  return [
    ...data.accounts.flatMap((account) => account.apiKeys.filter((key) => DEMO_DIGESTS.has(key.secretDigest)).map((key) => `${account.id}/${key.id}`)),
    ...data.owners.filter((owner) => DEMO_OWNER_HASHES.has(owner.passwordHash)).map((owner) => `owner ${owner.id}`),
  ];
}

/**
 * Throws DemoDataError when a production gateway would serve demo keys without being told to;
 * returns the warning to log when it was told to, else undefined.
 */
export function checkDemoData(data: DataFile, { file, isProduction, allowDemoData }: { file: string; isProduction: boolean; allowDemoData: boolean }): string | undefined {
  if (!isProduction) return undefined;
  const demoKeys = findDemoKeys(data);
  if (demoKeys.length === 0) return undefined;
  const what = `the data file ${file} holds demo API keys or owners whose secrets or passwords are published in the README (${demoKeys.join(', ')})`;
  if (allowDemoData) return `${what}: serving them because ALLOW_DEMO_DATA=true; anyone who can reach the gateway can sign in with them (give it real data with GATEWAY_DATA_FILE)`;
  throw new DemoDataError([
    `${what}; with NODE_ENV=production the gateway will not serve them.`,
    'Give it real data instead:',
    '  - a data file of your own accounts: GATEWAY_DATA_FILE=/path/to/data.json (setting data.file), with keys made by',
    '    `npm run keys:create -- --account <id>` (in the image: `node dist/cli/create-key.js --account <id>`);',
    '  - or everything in Redis: KEY_SOURCE=redis and DIRECTORY_STORE=redis with REDIS_URL, filled from your data file',
    '    (owners, accounts, keys, roles, sign records) by `npm run ctl -- migrate --file <your data file>`',
    '    (in the image: `node dist/cli/gatewayctl.js migrate --file <your data file>`).',
    'To run the demo anyway (never on a reachable address), set ALLOW_DEMO_DATA=true (setting data.allowDemoData).',
  ].join('\n'));
}
