/**
 * The dummy hash (owner/passwords.ts) is made when the session service is created, not at the
 * first unknown email: that first answer would otherwise cost two argon2 computations (make
 * the dummy, verify against it) where a wrong password costs one. A file of its own: the dummy
 * is made once per process, and scripts/run-tests.ts runs this file in its own (OWN_PROCESS).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Revocations } from '../../src/auth/revocation.js';
import { loadConfig } from '../../src/config/load.js';
import type { RateLimits } from '../../src/limits/rate-limits.js';
import { hashLoad } from '../../src/owner/passwords.js';
import { createSessionService } from '../../src/owner/sessions.js';
import { dataFileSchema } from '../../src/state/data-file/data-file.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { createLogger } from '../../src/telemetry/log.js';
import { ManualClock } from '../helpers/clock.js';

test('creating the session service starts making the dummy hash at once', async () => {
  assert.deepEqual(hashLoad(), { running: 0, waiting: 0 }, 'nothing hashed yet in this process');
  const clock = new ManualClock();
  createSessionService({
    store: new MemoryOwnerStore(dataFileSchema.parse({ accounts: [] }), { maxAuditEvents: 10 }),
    sessions: new MemorySessionStore({ clock }),
    revocations: {} as Revocations,
    clock,
    limits: {} as RateLimits,
    log: createLogger('silent'),
    config: loadConfig({ env: {}, overrides: {} }),
  });
  const { running, waiting } = hashLoad();
  assert.equal(running + waiting, 1, 'the dummy hash is being made before any sign-in');
  while (hashLoad().running > 0) await new Promise((resolve) => setTimeout(resolve, 5));
});
