/**
 * A gateway for the owner API's key and settings-token tests: the demo data with two owners
 * (alice's and bob's, each a member of one account) and an operator admin token, plus calls
 * to /owner/v1 with that token.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { adminTokenDigest } from '../../src/http/owner/caller.js';
import type { Actor } from '../../src/owner/types.js';
import { call, startGateway, type JsonResponse, type TestGateway } from './gateway.js';
import type { ManualClock } from './clock.js';
import { tempDir } from './process.js';

export const ADMIN_TOKEN = `gwadm_${'A1b2C3d4'.repeat(5)}xyz`;
export const OWNER_A = { id: 'owner_alice', email: 'alice@example.com' };
export const OWNER_B = { id: 'owner_bob', email: 'bob@example.com' };

/** The demo data file with owners alice (acct_alice) and bob (acct_bob); `edit` may change it further. */
export function ownerDataFile(t: TestContext, edit: (data: any) => void = () => {}): string {
  const data = JSON.parse(readFileSync(new URL('../../config/demo-data.json', import.meta.url), 'utf8'));
  const createdAt = '2026-01-01T00:00:00.000Z';
  data.owners = [OWNER_A, OWNER_B].map((o) => ({ ...o, passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$x$y', createdAt }));
  for (const account of data.accounts) {
    if (account.id === 'acct_alice') account.members = [{ ownerId: OWNER_A.id, addedAt: createdAt }];
    if (account.id === 'acct_bob') account.members = [{ ownerId: OWNER_B.id, addedAt: createdAt }];
  }
  edit(data);
  const file = join(tempDir(t), 'data.json');
  writeFileSync(file, JSON.stringify(data));
  return file;
}

export async function startOwnerGateway(t: TestContext, { overrides = {}, clock, edit }: { overrides?: Record<string, any>; clock?: ManualClock; edit?: (data: any) => void } = {}): Promise<TestGateway> {
  const file = ownerDataFile(t, edit);
  return startGateway(t, {
    ...(clock === undefined ? {} : { clock }),
    overrides: { ...overrides, data: { file, ...overrides.data }, owner: { adminTokenDigests: [adminTokenDigest(ADMIN_TOKEN)], ...overrides.owner } },
  });
}

/** Calls of the owner API as the operator. */
export function operator(gw: { url: string }) {
  const send = (method: string, path: string, body?: unknown): Promise<JsonResponse> => call(`${gw.url}/owner/v1${path}`, {
    method,
    token: ADMIN_TOKEN,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return {
    get: (path: string) => send('GET', path),
    post: (path: string, body: unknown = undefined) => send('POST', path, body),
    patch: (path: string, body: unknown) => send('PATCH', path, body),
    delete: (path: string) => send('DELETE', path),
  };
}

/** An owner as the owner service sees one (for the service-level isolation checks). */
export function ownerActor(owner: { id: string; email: string }): Actor {
  return { caller: { kind: 'owner', ownerId: owner.id, email: owner.email }, meta: { ip: '127.0.0.1', requestId: 'test' } };
}
