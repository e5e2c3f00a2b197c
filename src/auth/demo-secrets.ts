/**
 * The published demo secrets and owner passwords (state/data-file/demo-data.ts) at sign-in. A production gateway checks its
 * data file for them at start-up, but keys kept in Redis (KEY_SOURCE=redis, filled by
 * `gatewayctl migrate` or `keys:import`) are only read one by one, when a client names them.
 * So the check is made there, for every key source alike: under NODE_ENV=production, unless
 * `data.allowDemoData`, a demo secret is refused as a wrong secret would be (the same 401,
 * nothing to tell the caller it was a demo key), and the operator is told once per key. The
 * demo owners' passwords likewise, at the dashboard's sign-in (owner/sessions.ts), after the
 * password was checked: the same argon2 work and the same answer as a wrong password.
 *
 * Only what a matching sign-in presented is hashed again (one SHA-256): a wrong secret costs
 * nothing more, so the answer's timing is the same as before for an unknown key.
 */
import { secretDigest } from '../domain/secrets.js';
import { isDemoOwnerHash, isDemoSecretDigest } from '../state/data-file/demo-data.js';
import type { ApiKeyRecord } from '../state/keys/store.js';
import type { OwnerRecord } from '../state/owners/records.js';
import type { Logger } from '../telemetry/log.js';
import { decodeSecretHash } from './credentials.js';

export interface DemoSecretGuard {
  /** True when `key`, just matched with `apiSecret`, must be refused: the secret is a published one. */
  refusesSignIn(key: ApiKeyRecord, apiSecret: string): boolean;
  /** True when `key`'s current secret is a published one: its refresh tokens mint nothing more. */
  refusesKey(key: ApiKeyRecord): boolean;
  /** True when `owner`, whose password just matched, has a demo owner's published password. */
  refusesOwner(owner: OwnerRecord): boolean;
}

/** Keys and owners warned about, at most: each holds a demo secret, so few; the cap only bounds memory. */
const WARNED_MAX = 1000;

export function createDemoSecretGuard({ refuse, log }: { refuse: boolean; log: Logger }): DemoSecretGuard {
  const warned = new Set<string>();
  const refused = (name: string, fields: Record<string, string>, what: string, fix: string): true => {
    if (!warned.has(name) && warned.size < WARNED_MAX) {
      warned.add(name);
      log.warn(fields, `refused ${name}: its ${what} is published in the README as demo data, and NODE_ENV=production serves none without ALLOW_DEMO_DATA=true. ${fix}`);
    }
    return true;
  };
  const refusedKey = (key: ApiKeyRecord) => refused(`API key ${key.accountId}/${key.keyId}`, { accountId: key.accountId, keyId: key.keyId }, 'secret (a demo secret)',
    'Disable or delete the demo accounts (`gatewayctl accounts disable <accountId>`), roll the key (`gatewayctl keys roll`), or fill the key source with your own data (`gatewayctl migrate --file <your data file>`).');
  if (!refuse) return { refusesSignIn: () => false, refusesKey: () => false, refusesOwner: () => false };
  return {
    refusesSignIn(key, apiSecret) {
      const presented = decodeSecretHash(apiSecret);
      return presented !== undefined && isDemoSecretDigest(secretDigest(presented)) && refusedKey(key);
    },
    refusesKey: (key) => isDemoSecretDigest(key.secretDigest) && refusedKey(key),
    refusesOwner: (owner) => isDemoOwnerHash(owner.passwordHash) && refused(`the sign-in of owner ${owner.id}`, { ownerId: owner.id }, 'password (a demo owner\'s)',
      'Remove the demo owners from the data (or start on your own data: `gatewayctl migrate --file <your data file>`).'),
  };
}
