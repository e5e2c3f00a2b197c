/**
 * The contract of AcmeStore and ChallengeStore (src/state/acme/store.ts), run once per
 * implementation: the account key made once and kept (also when asked twice at once), the
 * certificate read back and replaced, read by a second store on the same state (a restart, or
 * another instance), one order lock at a time released only by its holder's token, and the
 * HTTP-01 answers set, read and deleted. Each run gets state of its own.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AcmeCertificate, AcmeStore, ChallengeStore } from '../../src/state/acme/store.js';

export interface AcmeStoresUnderTest {
  store: AcmeStore;
  challenges: ChallengeStore;
  /** Another store on the same state: this process after a restart, or another instance. */
  peer(): Promise<AcmeStore>;
  close(): Promise<void>;
}

const certificate = (n: number): AcmeCertificate => ({
  serverNames: ['a.gateway.test', `n${n}.gateway.test`],
  certPem: `-----BEGIN CERTIFICATE-----\nMIIB${n}\n-----END CERTIFICATE-----\n`,
  keyPem: `-----BEGIN PRIVATE KEY-----\nMIGH${n}\n-----END PRIVATE KEY-----\n`,
});
const expiresAt = Date.now() + 90 * 86_400_000;

export function runAcmeStoreContract(name: string, make: () => Promise<AcmeStoresUnderTest>, options: { skip?: string | false } = {}): void {
  test(`AcmeStore contract: ${name}`, options, async (t) => {
    const { store, challenges, peer, close } = await make();
    t.after(close);

    await t.test('the account key is made once and kept; asked twice at once, both get the same', async () => {
      let made = 0;
      const makeKey = async () => `account-key-${++made}`;
      const [first, second] = await Promise.all([store.accountKey(makeKey), store.accountKey(makeKey)]);
      assert.equal(first, second);
      assert.equal(await store.accountKey(async () => assert.fail('a kept key is not made again')), first);
      assert.equal(await (await peer()).accountKey(async () => assert.fail('a kept key is not made again')), first);
    });

    await t.test('no certificate before one is saved; a saved one reads back, on a peer too; a later save replaces it', async () => {
      assert.equal(await store.certificate(), undefined);
      await store.saveCertificate(certificate(1), expiresAt);
      assert.deepEqual(await store.certificate(), certificate(1));
      await store.saveCertificate(certificate(2), expiresAt);
      assert.deepEqual(await store.certificate(), certificate(2));
      assert.deepEqual(await (await peer()).certificate(), certificate(2));
    });

    await t.test('one order lock at a time; a wrong token releases nothing; its holder\'s token does', async () => {
      const token = await store.lockOrder(60_000);
      assert.equal(typeof token, 'string');
      assert.equal(await store.lockOrder(60_000), undefined, 'held');
      await store.unlockOrder('not-the-token');
      assert.equal(await store.lockOrder(60_000), undefined, 'still held');
      await store.unlockOrder(token!);
      const next = await store.lockOrder(60_000);
      assert.equal(typeof next, 'string');
      assert.notEqual(next, token);
      await store.unlockOrder(next!);
    });

    await t.test('HTTP-01 answers: set, read, deleted; an unknown token has none', async () => {
      const token = 'tok_contract_0123456789abcdef';
      assert.equal(await challenges.get(token), undefined);
      await challenges.set(token, `${token}.thumbprint`, 60_000);
      assert.equal(await challenges.get(token), `${token}.thumbprint`);
      assert.equal(await challenges.get(`${token}x`), undefined);
      await challenges.delete(token);
      assert.equal(await challenges.get(token), undefined);
    });
  });
}
