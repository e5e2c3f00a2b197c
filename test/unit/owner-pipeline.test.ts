/**
 * The owner change pipeline (src/owner/pipeline.ts): its steps run in one order, a refusal
 * before persist writes and audits nothing, and the listeners hear each written change once,
 * after it is stored and logged, with its events.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Revocations } from '../../src/auth/revocation.js';
import { loadConfig } from '../../src/config/load.js';
import { Conflict, Forbidden, ReadOnlyStore } from '../../src/errors/errors.js';
import type { RateLimits } from '../../src/limits/rate-limits.js';
import { createKeyService } from '../../src/owner/keys.js';
import { createChangePipeline, editAccount, type ChangeListener, type ChangeNotice } from '../../src/owner/pipeline.js';
import type { Actor } from '../../src/owner/types.js';
import { dataFileSchema } from '../../src/state/data-file/data-file.js';
import { MemoryOwnerStore } from '../../src/state/owners/memory.js';
import { MemorySessionStore } from '../../src/state/sessions/memory.js';
import { createLogger } from '../../src/telemetry/log.js';
import { ManualClock } from '../helpers/clock.js';

const OPERATOR: Actor = { caller: { kind: 'operator' }, meta: { ip: '192.0.2.1', requestId: 'req-1' } };

/** A store on one account, counting its writes; `steps` records the pipeline's steps as they happen. */
function setUp(options: { readOnly?: string; directoryReadOnly?: string; listeners?: ChangeListener[] } = {}) {
  const clock = new ManualClock();
  const steps: string[] = [];
  let writes = 0;
  const store = new MemoryOwnerStore(dataFileSchema.parse({ accounts: [{ id: 'acct_a', name: 'A' }] }), {
    maxAuditEvents: 100,
    persist: async () => void (writes += 1),
    ...(options.readOnly === undefined ? {} : { readOnly: options.readOnly }),
    ...(options.directoryReadOnly === undefined ? {} : { directoryReadOnly: options.directoryReadOnly }),
  });
  const logged: { msg: string; audit?: { action: string } }[] = [];
  const log = createLogger('info', {
    write(line: string) {
      const entry = JSON.parse(line) as { msg: string; audit?: { action: string } };
      logged.push(entry);
      if (entry.msg === 'audit') steps.push(`audit ${entry.audit?.action}`);
    },
  });
  const heard: ChangeNotice[] = [];
  const listeners: ChangeListener[] = [
    async (notice) => {
      steps.push('listener');
      heard.push(notice);
    },
    ...(options.listeners ?? []),
  ];
  const change = createChangePipeline({ store, clock, log, listeners });
  return { clock, store, steps, heard, logged, writes: () => writes, change };
}

/** A rename of acct_a, each step recorded; `refuse` throws at that step. */
function rename(t: ReturnType<typeof setUp>, { refuse, writes }: { refuse?: 'authorize' | 'apply' | 'persist' | 'notify'; writes?: 'owner' | 'directory' } = {}) {
  const { store, steps, change } = t;
  return change(OPERATOR, {
    ...(writes === undefined ? {} : { writes }),
    async load() {
      steps.push('load');
      return (await store.readAccount('acct_a'))!;
    },
    authorize() {
      steps.push('authorize');
      if (refuse === 'authorize') throw new Forbidden('Only an operator may do this.');
    },
    async apply(doc) {
      steps.push('apply');
      return `${doc.name} renamed`;
    },
    persist: ({ prepared, event }) => {
      steps.push('persist');
      return editAccount(store, OPERATOR.caller, 'acct_a', (doc) => {
        if (refuse === 'persist') throw new Conflict('Refused inside the store change.');
        return { doc: { ...doc, name: prepared }, events: [event({ action: 'account.update', target: { type: 'account', id: 'acct_a' }, changes: { name: [doc.name, prepared] } })], result: prepared };
      });
    },
    async notify(name) {
      steps.push('notify');
      if (refuse === 'notify') throw new Error('the reset failed');
      return { name };
    },
  });
}

test('the steps run in order: load, authorize, apply, persist, audit, the change\'s own notify, then the listeners', async () => {
  const t = setUp();
  assert.deepEqual(await rename(t), { name: 'A renamed' });
  assert.deepEqual(t.steps, ['load', 'authorize', 'apply', 'persist', 'audit account.update', 'notify', 'listener']);
  assert.equal(t.writes(), 1);
});

test('a refusal at authorize writes nothing, audits nothing and notifies no one', async () => {
  const t = setUp();
  await assert.rejects(rename(t, { refuse: 'authorize' }), Forbidden);
  assert.deepEqual(t.steps, ['load', 'authorize']);
  assert.equal(t.writes(), 0);
  assert.deepEqual(await t.store.listAudit('acct_a', { limit: 10 }), []);
  assert.deepEqual(t.logged.filter((e) => e.msg === 'audit'), []);
  assert.deepEqual(t.heard, []);
});

test('a store that takes no writes refuses after authorize, before apply: nothing written, audited or heard', async () => {
  const t = setUp({ readOnly: 'Redis is configured: the data file is only read.' });
  await assert.rejects(rename(t), (err) => err instanceof ReadOnlyStore && err.status === 409 && err.code === 'read_only_store');
  assert.deepEqual(t.steps, ['load', 'authorize']);
  assert.equal(t.writes(), 0);
  assert.deepEqual(await t.store.listAudit('acct_a', { limit: 10 }), []);
  assert.deepEqual(t.logged.filter((e) => e.msg === 'audit'), []);
  assert.deepEqual(t.heard, []);
});

test('a directory change is refused where only roles and sign records are read-only; an owner-store change is not', async () => {
  const t = setUp({ directoryReadOnly: 'Roles and sign records come from the directory upstream.' });
  await assert.rejects(rename(t, { writes: 'directory' }), ReadOnlyStore);
  assert.deepEqual(t.steps, ['load', 'authorize']);
  assert.equal(t.writes(), 0);
  assert.deepEqual(await rename(t), { name: 'A renamed' });
  assert.equal(t.writes(), 1);
});

test('a refusal inside the store change writes and audits nothing, and no one hears of it', async () => {
  const t = setUp();
  await assert.rejects(rename(t, { refuse: 'persist' }), Conflict);
  assert.deepEqual(t.steps, ['load', 'authorize', 'apply', 'persist']);
  assert.equal(t.writes(), 0);
  assert.deepEqual(await t.store.listAudit('acct_a', { limit: 10 }), []);
  assert.deepEqual(t.heard, []);
});

test('the listeners hear a change once, after it is stored, with the events stored with it', async () => {
  const t = setUp({
    listeners: [async (notice) => {
      // Stored before anyone hears of it.
      const stored = await t.store.listAudit('acct_a', { limit: 10 });
      assert.deepEqual(stored.map((e) => e.id), notice.audited[0]!.events.map((e) => e.id));
    }],
  });
  await rename(t);
  assert.equal(t.heard.length, 1);
  const [{ accountId, events }] = t.heard[0]!.audited as [ChangeNotice['audited'][number]];
  assert.equal(accountId, 'acct_a');
  assert.deepEqual(events, await t.store.listAudit('acct_a', { limit: 10 }));
  assert.equal(events.length, 1);
  assert.deepEqual(
    { action: events[0]!.action, actor: events[0]!.actor, target: events[0]!.target, changes: events[0]!.changes, ip: events[0]!.ip, requestId: events[0]!.requestId, at: events[0]!.at },
    { action: 'account.update', actor: { type: 'operator' }, target: { type: 'account', id: 'acct_a' }, changes: { name: ['A', 'A renamed'] }, ip: '192.0.2.1', requestId: 'req-1', at: new Date(t.clock.now()).toISOString() },
  );
});

test('a change that wrote no event is heard by no one', async () => {
  const t = setUp();
  const answer = await t.change(OPERATOR, {
    load: async () => undefined,
    persist: () => editAccount(t.store, OPERATOR.caller, 'acct_a', () => ({ events: [], result: 'unchanged' })),
  });
  assert.equal(answer, 'unchanged');
  assert.equal(t.writes(), 0);
  assert.deepEqual(t.heard, []);
});

test('a failed listener is logged and fails nothing; a failed notify of the change reaches the caller, and the listeners still hear', async () => {
  const failing = setUp({ listeners: [() => { throw new Error('mail relay down'); }] });
  assert.deepEqual(await rename(failing), { name: 'A renamed' });
  assert.equal(failing.logged.filter((e) => e.msg === 'owner change listener failed').length, 1);

  const t = setUp();
  await assert.rejects(rename(t, { refuse: 'notify' }), /the reset failed/);
  assert.deepEqual(t.steps, ['load', 'authorize', 'apply', 'persist', 'audit account.update', 'notify', 'listener']);
  assert.equal(t.heard.length, 1, 'the change was written: it is heard');
});

test('an owner service\'s change reaches the listeners given in its deps (key creation)', async () => {
  const clock = new ManualClock();
  const store = new MemoryOwnerStore(dataFileSchema.parse({ accounts: [{ id: 'acct_a', name: 'A' }] }), { maxAuditEvents: 100 });
  const heard: ChangeNotice[] = [];
  const keys = createKeyService({
    store,
    sessions: new MemorySessionStore({ clock }),
    revocations: { reset: async () => clock.now() } as unknown as Revocations,
    clock,
    limits: {} as RateLimits,
    log: createLogger('silent'),
    config: loadConfig({ env: {}, overrides: {} }),
    listeners: [(notice) => void heard.push(notice)],
  });
  const { key } = await keys.create(OPERATOR, 'acct_a', { name: 'ci' });
  assert.deepEqual(heard.map((n) => n.audited.map(({ accountId, events }) => [accountId, events.map((e) => [e.action, e.target.id])])), [[['acct_a', [['key.create', key.id]]]]]);
  await keys.resetKey(OPERATOR, 'acct_a', key.id);
  assert.deepEqual(heard.at(-1)!.audited[0]!.events.map((e) => e.action), ['key.reset']);
});
