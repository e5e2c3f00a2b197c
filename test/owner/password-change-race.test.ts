/**
 * A password change ends every other session of the owner, including one whose sign-in (with
 * the old password) was checked before the change and stored only after the change had ended
 * the sessions it could see. The sign-in's session store is held at its write to make exactly
 * that interleaving.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../src/errors/errors.js';
import { hashPassword } from '../../src/owner/passwords.js';
import { createSessionService } from '../../src/owner/sessions.js';
import type { OwnerSession, SessionStore } from '../../src/state/sessions/store.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { OWNER_A, startOwnerGateway } from '../helpers/owner-keys.js';

const OLD = 'the old long passphrase';
const NEW = 'the new long passphrase';
const meta = { ip: '127.0.0.1', requestId: 'test' };

test('a sign-in with the old password that lands after a password change gets no session', async (t) => {
  const passwordHash = await hashPassword(OLD);
  const gw = await startOwnerGateway(t, { edit: (data) => { for (const o of data.owners) if (o.id === OWNER_A.id) o.passwordHash = passwordHash; } });
  const { services, clock } = gw;
  const memory = new MemorySessionStore({ clock });
  let hold: { reached: () => void; release: Promise<void> } | undefined;
  const sessions: SessionStore = {
    find: (digest) => memory.find(digest),
    touch: (digest, at) => memory.touch(digest, at),
    delete: (digest) => memory.delete(digest),
    deleteOwnerSessions: (ownerId, keep) => memory.deleteOwnerSessions(ownerId, keep),
    listOwnerSessions: (ownerId) => memory.listOwnerSessions(ownerId),
    async create(digest: string, session: OwnerSession, options?: { maxPerOwner?: number }) {
      if (hold !== undefined) {
        const { reached, release } = hold;
        hold = undefined;
        reached();
        await release;
      }
      return memory.create(digest, session, options);
    },
  };
  const service = createSessionService({ store: services.ownerStore, sessions, revocations: services.revocations, clock, limits: services.limits, log: services.log, config: services.config });

  const mine = await service.signIn(OWNER_A.email, OLD, meta);
  let release!: () => void;
  const reached = new Promise<void>((resolve) => {
    hold = { reached: resolve, release: new Promise<void>((r) => { release = r; }) };
  });
  const late = service.signIn(OWNER_A.email, OLD, meta).then((s) => s, (err: unknown) => err);
  await reached;
  clock.advance(1);
  const resumed = await service.resume(mine.token);
  assert.ok(resumed !== undefined && resumed.caller.kind === 'owner');
  await service.changePassword(resumed.caller, mine.token, { currentPassword: OLD, newPassword: NEW }, meta);
  release();
  const outcome = await late;
  const session = outcome instanceof GatewayError ? undefined : await service.resume((outcome as { token: string }).token);
  assert.equal(session, undefined, 'the late sign-in has no session that works');
});
