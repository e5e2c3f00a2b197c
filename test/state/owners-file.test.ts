/**
 * The data file as the owner store's storage (src/state/owners/file.ts and
 * data-file-writer.ts), on real files in a temporary directory: every change on disk, atomic
 * writes (a killed process leaves the old file whole), own writes told from a human's edits,
 * which are never overwritten, failures that change nothing, and the demo file left alone.
 */
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataFileWriter, formatDataFile } from '../../src/state/data-file/writer.js';
import { dataFileSchema, readDataFile, watchDataFile, type DataFile } from '../../src/state/data-file/data-file.js';
import type { DirectoryChange } from '../../src/state/directory/store.js';
import { MemoryDirectory } from '../../src/state/directory/memory.js';
import { FileOwnerStore, type FileOwnerStoreOptions } from '../../src/state/owners/file.js';
import { createLogger } from '../../src/telemetry/log.js';
import { auditEvent, OWNER_STORE_FIXTURE } from '../contracts/owners.contract.js';
import { ManualClock } from '../helpers/clock.js';
import { logged, postJson, sha256Hex, startGateway, storedDigest } from '../helpers/gateway.js';
import { exitWithin, gatewayEnv, logLines, PROCESS_LIMIT_MS, ROOT, RUN_TS, startGatewayProcess, startNode, tempDir, waitForLog } from '../helpers/process.js';

const T0 = Date.UTC(2026, 10, 1, 12);
const DIGEST = (c: string) => `sha256:${c.repeat(64)}`;

/** A data file holding `data` in a fresh directory; returns its path. */
function writeDataFile(t: TestContext, data: DataFile = OWNER_STORE_FIXTURE, name = 'data.json'): string {
  const file = join(tempDir(t), name);
  writeFileSync(file, formatDataFile(data));
  return file;
}

function captureLog(): { log: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  const log = createLogger('info', { write: (line: string) => void raw.push(line) });
  return { log, lines: () => raw.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

function openStore(file: string, options: Partial<FileOwnerStoreOptions> = {}): FileOwnerStore {
  return new FileOwnerStore(file, readDataFile(file), { log: createLogger('silent'), maxAuditEvents: 1000, ...options });
}

function renameAccount(store: FileOwnerStore, accountId: string, name: string): Promise<void> {
  return store.updateAccount(accountId, (doc) => ({ doc: { ...doc, name }, events: [auditEvent(T0, 'account.update', accountId)], result: undefined }));
}

function tempFilesIn(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.endsWith('.tmp'));
}

/** A human's edit: the file read, changed and written back in place (or saved by rename, as editors do). */
function editByHand(file: string, edit: (data: Record<string, any>) => void, { byRename = false } = {}): void {
  const data = JSON.parse(readFileSync(file, 'utf8')) as Record<string, any>;
  edit(data);
  const text = JSON.stringify(data, null, 4);
  if (!byRename) return writeFileSync(file, text);
  writeFileSync(`${file}.swp`, text);
  renameSync(`${file}.swp`, file);
}

test('200 concurrent changes are all in the file, read afresh', async (t) => {
  const file = writeDataFile(t);
  const store = openStore(file);
  await Promise.all(Array.from({ length: 200 }, (_, i) => {
    const accountId = i % 2 === 0 ? 'acct_a' : 'acct_b';
    return store.updateAccount(accountId, (doc) => ({
      doc: { ...doc, apiKeys: [...doc.apiKeys, { id: `key_c${i}`, apiKey: `ak_concurrent_${i}`, secretDigest: DIGEST('e'), disabled: false, scopes: [] }] },
      events: [auditEvent(T0 + i, 'key.create', `key_c${i}`)],
      result: undefined,
    }));
  }));
  const onDisk = readDataFile(file);
  const keys = new Set(onDisk.accounts.flatMap((a) => a.apiKeys.map((k) => k.id)));
  for (let i = 0; i < 200; i++) assert.ok(keys.has(`key_c${i}`), `key_c${i} is on disk`);
  assert.equal(onDisk.accounts.find((a) => a.id === 'acct_a')!.audit.filter((e) => e.action === 'key.create').length, 100);
  assert.deepEqual(onDisk, store.data);
  assert.deepEqual(tempFilesIn(join(file, '..')), []);
});

test('group commit: concurrent changes share writes of the file, and each is on disk when it is acknowledged', async (t) => {
  const file = writeDataFile(t);
  const writes: number[] = [];
  const store = openStore(file, { onWrite: (changes) => void writes.push(changes) });
  const missingAtAcknowledgement: string[] = [];
  const addKey = (i: number) => store.updateAccount('acct_a', (doc) => ({
    doc: { ...doc, apiKeys: [...doc.apiKeys, { id: `key_g${i}`, apiKey: `ak_group_${i}`, secretDigest: DIGEST('e'), disabled: false, scopes: [] }] },
    events: [],
    result: undefined,
  }));
  const outcomes = await Promise.allSettled([
    ...Array.from({ length: 100 }, (_, i) => addKey(i).then(() => {
      // Acknowledged: the write holding this change is done (flushed before its rename), so the file on disk has it.
      if (!readFileSync(file, 'utf8').includes(`"key_g${i}"`)) missingAtAcknowledgement.push(`key_g${i}`);
    })),
    // A change that fails in the middle of a batch fails alone.
    store.updateAccount('acct_missing', (doc) => ({ doc, events: [], result: undefined })),
  ]);
  assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason.constructor.name), ['NotFound']);
  assert.deepEqual(missingAtAcknowledgement, []);
  // The first change found the store idle and went alone; the other 99 arrived during its write and shared the next.
  assert.deepEqual(writes, [1, 99]);
  const onDisk = readDataFile(file);
  assert.equal(onDisk.accounts.find((a) => a.id === 'acct_a')!.apiKeys.filter((k) => k.id.startsWith('key_g')).length, 100);
  assert.deepEqual(onDisk, store.data);
});

test('group commit: a change the schema refuses fails alone; the others of its batch are written', async (t) => {
  const file = writeDataFile(t);
  const writes: number[] = [];
  const store = openStore(file, { onWrite: (changes) => void writes.push(changes) });
  const outcomes = await Promise.allSettled([
    renameAccount(store, 'acct_a', 'first, alone'),
    renameAccount(store, 'acct_a', 'second'),
    renameAccount(store, 'acct_b', 'fourth'),
    // Longer than the schema allows (256): a caller's bug, never written.
    renameAccount(store, 'acct_b', 'x'.repeat(300)),
  ]);
  assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'fulfilled', 'fulfilled', 'rejected']);
  const onDisk = readDataFile(file);
  assert.deepEqual(onDisk.accounts.slice(0, 2).map((a) => a.name), ['second', 'fourth']);
  assert.equal(writes.reduce((sum, n) => sum + n, 0), 3, 'three changes written');
  assert.deepEqual(onDisk, store.data);
});

test('group commit: the checks across accounts hold within a batch (one apiKey in two accounts: the second change fails)', async (t) => {
  const file = writeDataFile(t);
  const store = openStore(file);
  await renameAccount(store, 'acct_a', 'first, alone');
  const addKey = (accountId: string, id: string) => store.updateAccount(accountId, (doc) => ({
    doc: { ...doc, apiKeys: [...doc.apiKeys, { id, apiKey: 'ak_the_same', secretDigest: DIGEST('e'), disabled: false, scopes: [] }] },
    events: [],
    result: undefined,
  }));
  const outcomes = await Promise.allSettled([addKey('acct_a', 'key_dup_1'), addKey('acct_b', 'key_dup_2'), renameAccount(store, 'acct_b', 'renamed')]);
  assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  const onDisk = readDataFile(file);
  assert.deepEqual(onDisk.accounts.flatMap((a) => a.apiKeys.filter((k) => k.apiKey === 'ak_the_same').map((k) => k.id)), ['key_dup_1']);
  assert.equal(onDisk.accounts[1]!.name, 'renamed');
  assert.deepEqual(onDisk, store.data);
});

test('restart: a new store read from the written file holds every change', async (t) => {
  const file = writeDataFile(t);
  const store = openStore(file);
  assert.equal(await store.createAccount({ id: 'acct_new', name: 'New', enabled: true, createdAt: '2026-11-01T00:00:00.000Z', apiKeys: [], members: [], invites: [], settingsTokens: [], webhooks: [] }, [auditEvent(T0, 'account.create', 'acct_new')]), true);
  assert.equal(await store.createOwner({ id: 'own_carol', email: 'carol@example.com', passwordHash: 'h', mustChangePassword: true, disabled: false, createdAt: '2026-11-01T00:00:00.000Z' }), true);
  await store.updateOwner('own_carol', (owner) => ({ owner: { ...owner, mustChangePassword: false }, result: undefined }));
  await store.updateAccount('acct_new', (doc) => ({
    doc: {
      ...doc,
      members: [{ ownerId: 'own_carol', addedAt: '2026-11-01T00:00:00.000Z' }],
      settingsTokens: [{ id: 'st_new', name: 'ci', digest: DIGEST('7'), start: 'gwst_abcd', scopes: ['read'], createdAt: '2026-11-01T00:00:00.000Z' }],
    },
    events: [auditEvent(T0 + 1, 'member.add', 'own_carol')],
    result: undefined,
  }));
  assert.equal(await store.putRole('acct_new', { id: 1, slug: 'one', name: 'One', description: '', public: true }, undefined, [auditEvent(T0 + 2, 'role.create')]), 'ok');
  assert.equal(await store.putRole('acct_a', { id: 20, slug: 'r2', name: 'Moved', description: '', public: false }, 2, []), 'ok');
  assert.equal(await store.deleteRole('acct_a', 3, []), true);
  assert.equal(await store.putSignRecord('acct_new', { address: `0x${'ab'.repeat(20)}`, signedNonce: 5, signedAt: T0, signedExpiredAt: T0 + 1000 }, 'create', []), 'ok');
  assert.equal(await store.deleteSignRecord('acct_a', '0x52908400098527886e0f7030069857d2e4169ee7', []), true);
  await store.appendAudit('acct_new', [auditEvent(T0 + 3, 'account.reset', 'acct_new')]);

  const restarted = openStore(file);
  assert.deepEqual(restarted.data, store.data);
  assert.equal((await restarted.findOwnerByEmail('carol@example.com'))?.mustChangePassword, false);
  assert.deepEqual(await restarted.accountsOf('own_carol'), ['acct_new']);
  assert.equal((await restarted.findSettingsToken(DIGEST('7')))?.accountId, 'acct_new');
  assert.deepEqual((await restarted.listRoles('acct_a', { offset: 0, limit: 10 })).items.map((r) => r.id), [1, 4, 5, 20]);
  assert.equal((await restarted.getSignRecord('acct_new', `0x${'ab'.repeat(20)}`))?.signedNonce, 5);
  assert.equal(await restarted.getSignRecord('acct_a', '0x52908400098527886e0f7030069857d2e4169ee7'), undefined);
  assert.deepEqual((await restarted.listAudit('acct_new', { limit: 10 })).map((e) => e.action), ['account.reset', 'role.create', 'member.add', 'account.create']);
});

test('the file stays pretty-printed JSON a human can edit, with the permissions the operator gave it', async (t) => {
  const file = writeDataFile(t);
  chmodSync(file, 0o640);
  const store = openStore(file);
  await renameAccount(store, 'acct_a', 'Renamed');
  const text = readFileSync(file, 'utf8');
  assert.ok(text.startsWith('{\n  "accounts": [\n    {\n      "id": "acct_a",'), text.slice(0, 80));
  assert.equal(text, formatDataFile(readDataFile(file)));
  assert.equal(statSync(file).mode & 0o777, 0o640);
});

test('a symlinked data file stays a symlink; the file it points to is written', async (t) => {
  const target = writeDataFile(t, OWNER_STORE_FIXTURE, 'real.json');
  const link = join(tempDir(t), 'data.json');
  symlinkSync(target, link);
  const store = openStore(link);
  await renameAccount(store, 'acct_a', 'Through the link');
  assert.ok(statSync(link, { throwIfNoEntry: true }).isFile());
  assert.equal(realpathSync(link), realpathSync(target));
  assert.equal(readDataFile(target).accounts[0]!.name, 'Through the link');
});

test('a foreign edit between two own writes is kept, in the file and in what the store serves', async (t) => {
  const file = writeDataFile(t);
  const store = openStore(file);
  await renameAccount(store, 'acct_a', 'first own write');
  editByHand(file, (data) => {
    data.accounts[1].name = 'named by hand';
    data.accounts.push({ id: 'acct_hand', apiKeys: [] });
  });
  await renameAccount(store, 'acct_a', 'second own write');
  let onDisk = readDataFile(file);
  assert.deepEqual(onDisk.accounts.map((a) => [a.id, a.name]), [['acct_a', 'second own write'], ['acct_b', 'named by hand'], ['acct_gone', undefined], ['acct_hand', undefined]]);
  assert.equal((await store.readAccount('acct_hand'))?.id, 'acct_hand');

  // Saved by rename (a new inode), as editors do.
  editByHand(file, (data) => { data.accounts[2].name = 'renamed file'; }, { byRename: true });
  assert.equal(await store.putRole('acct_b', { id: 1, slug: 'one', name: 'One', description: '', public: false }, undefined, []), 'ok');
  onDisk = readDataFile(file);
  assert.equal(onDisk.accounts[2]!.name, 'renamed file');
  assert.deepEqual(onDisk.accounts[1]!.roles.map((r) => r.id), [1, 9]);
  assert.equal(onDisk.accounts[1]!.name, 'named by hand');
});

test('a change is decided on the edited version: a role id a human took meanwhile is id_taken', async (t) => {
  const file = writeDataFile(t);
  const store = openStore(file);
  editByHand(file, (data) => { data.accounts[1].roles.push({ id: 10, slug: 'hand', name: 'By hand', description: '', public: false }); });
  assert.equal(await store.putRole('acct_b', { id: 10, slug: 'api', name: 'By API', description: '', public: false }, undefined, []), 'id_taken');
  assert.equal(readDataFile(file).accounts[1]!.roles.find((r) => r.id === 10)?.name, 'By hand');
});

test('an invalid foreign edit is never overwritten: changes answer 503 until the file is valid again', async (t) => {
  const file = writeDataFile(t);
  const store = openStore(file);
  writeFileSync(file, '{ "accounts": [ half written');
  await assert.rejects(renameAccount(store, 'acct_a', 'lost'), { status: 503, code: 'store_unavailable' });
  assert.equal(readFileSync(file, 'utf8'), '{ "accounts": [ half written');
  assert.equal((await store.readAccount('acct_a'))?.name, 'Account A');

  writeFileSync(file, formatDataFile({ ...OWNER_STORE_FIXTURE, accounts: OWNER_STORE_FIXTURE.accounts.map((a) => (a.id === 'acct_b' ? { ...a, name: 'fixed by hand' } : a)) }));
  await renameAccount(store, 'acct_a', 'after the fix');
  const onDisk = readDataFile(file);
  assert.equal(onDisk.accounts[0]!.name, 'after the fix');
  assert.equal(onDisk.accounts[1]!.name, 'fixed by hand');
});

test('a version the check refuses (demo keys in production) is neither served nor overwritten', async (t) => {
  const file = writeDataFile(t);
  const store = openStore(file, { check: (data) => { if (data.accounts.some((a) => a.id === 'acct_refused')) throw new Error('refused'); } });
  editByHand(file, (data) => { data.accounts.push({ id: 'acct_refused', apiKeys: [] }); });
  await assert.rejects(renameAccount(store, 'acct_a', 'lost'), { status: 503 });
  assert.equal(await store.readAccount('acct_refused'), undefined);
  assert.ok(readDataFile(file).accounts.some((a) => a.id === 'acct_refused'));
});

test('a leftover temporary file (a crash mid-write) is left alone and changes nothing', async (t) => {
  const file = writeDataFile(t);
  const leftover = join(file, '..', '.data.json.99999.0123456789ab.tmp');
  writeFileSync(leftover, '{ "accounts": [ cut short');
  const store = openStore(file);
  await renameAccount(store, 'acct_a', 'written');
  assert.equal(readDataFile(file).accounts[0]!.name, 'written');
  assert.equal(readFileSync(leftover, 'utf8'), '{ "accounts": [ cut short');
  assert.equal(openStore(file).data.accounts[0]!.name, 'written');
});

test('a process killed just before the rename leaves the old file whole, and a new store starts from it', async (t) => {
  const file = writeDataFile(t);
  const before = readFileSync(file, 'utf8');
  const child = startNode(t, ['test/helpers/data-file-child.ts', 'crash-before-rename', file]);
  const exit = await exitWithin(child);
  assert.equal(exit.signal, 'SIGKILL', `stdout: ${child.stdout()} stderr: ${child.stderr()}`);
  assert.equal(readFileSync(file, 'utf8'), before);
  // The crash came after the new version was fully written to its temporary file.
  const leftovers = tempFilesIn(join(file, '..'));
  assert.equal(leftovers.length, 1);
  assert.equal(readDataFile(join(file, '..', leftovers[0]!)).accounts[0]!.name, 'never served');
  const store = openStore(file);
  assert.equal((await store.readAccount('acct_a'))?.name, 'Account A');
  await renameAccount(store, 'acct_a', 'after the crash');
  assert.equal(readDataFile(file).accounts[0]!.name, 'after the crash');
});

test('a process killed at any moment while it writes leaves a valid file: the last version written or the one after', async (t) => {
  // Big enough that a kill often lands inside a write.
  const accounts = Array.from({ length: 2000 }, (_, i) => ({ id: `acct_${i}`, name: `Account ${i}`, apiKeys: [{ id: `key_${i}`, apiKey: `ak_loop_${i}`, secretDigest: DIGEST('a') }] }));
  const file = writeDataFile(t, dataFileSchema.parse({ accounts: [{ id: 'acct_a', apiKeys: [] }, ...accounts] }));
  for (const wanted of [3, 9]) {
    const child = startNode(t, ['test/helpers/data-file-child.ts', 'write-loop', file]);
    await waitForLog(child, (line) => line.wrote === wanted);
    child.process.kill('SIGKILL');
    await exitWithin(child);
    const printed = logLines(child).map((line) => line.wrote as number);
    const last = Math.max(...printed);
    const name = readDataFile(file).accounts[0]!.name;
    assert.ok(name === `v${last}` || name === `v${last + 1}`, `file holds ${name}, the child last reported v${last}`);
    assert.equal(readDataFile(file).accounts.length, 2001);
  }
});

test('a directory the gateway may not write: 503, the file and the served state unchanged, no temporary file', async (t) => {
  const file = writeDataFile(t);
  const dir = join(file, '..');
  const before = readFileSync(file, 'utf8');
  // Root writes anywhere whatever the mode: the change is then made by a child running as nobody.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    chownSync(dir, 65534, 65534);
    chownSync(file, 65534, 65534);
  }
  chmodSync(dir, 0o555);
  let result;
  try {
    result = spawnSync(process.execPath, [...RUN_TS, 'test/helpers/data-file-child.ts', 'change', file], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: PROCESS_LIMIT_MS,
      ...(asRoot ? { env: { ...process.env, DROP_TO_UID: '65534' } } : {}),
    });
  } finally {
    // Before tempDir's clean-up, which could not empty the directory otherwise.
    chmodSync(dir, 0o755);
  }
  assert.equal(result.status, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { ok: false, status: 503, code: 'store_unavailable', name: 'Account A' });
  assert.equal(readFileSync(file, 'utf8'), before);
  assert.deepEqual(tempFilesIn(dir), []);
});

test('a write that fails after its temporary file is made removes it and is a 503', async (t) => {
  const dir = tempDir(t);
  // rename() cannot replace a directory with a file, whoever runs it.
  const target = join(dir, 'data.json');
  mkdirSync(join(target, 'inside'), { recursive: true });
  const writer = new DataFileWriter(target, { log: createLogger('silent') });
  await assert.rejects(writer.write(OWNER_STORE_FIXTURE), { status: 503, code: 'store_unavailable' });
  assert.deepEqual(tempFilesIn(dir), []);
  assert.equal(writer.isOwnVersion(formatDataFile(OWNER_STORE_FIXTURE)), false);
});

test('a version on disk is the writer\'s own from the moment it is there, before write() has returned', async (t) => {
  // The rename is done on the thread pool: the file holds the new version before the main
  // thread hears of it, and a watcher's poll in between took the store's own write for a
  // foreign edit and reloaded it (the project's CI caught it under load). A reader on
  // setImmediate, which runs before the main thread takes in the rename's completion, looks
  // at each version as soon as it is there.
  const dir = tempDir(t);
  const target = join(dir, 'data.json');
  writeFileSync(target, formatDataFile(OWNER_STORE_FIXTURE));
  const writer = new DataFileWriter(target, { log: createLogger('silent') });
  const foreign: number[] = [];
  for (let i = 0; i < 100; i++) {
    const data = { ...OWNER_STORE_FIXTURE, accounts: OWNER_STORE_FIXTURE.accounts.map((a) => ({ ...a, name: `version ${i}` })) };
    const expected = formatDataFile(data);
    let done = false;
    const watching = (async () => {
      while (!done) {
        await new Promise((resolve) => setImmediate(resolve));
        const text = readFileSync(target, 'utf8');
        if (text === expected) {
          if (!writer.isOwnVersion(text)) foreign.push(i);
          return;
        }
      }
    })();
    await writer.write(data);
    done = true;
    await watching;
  }
  assert.deepEqual(foreign, [], 'versions taken for foreign edits');
});

test('a read-only store (the file shared by several instances) never writes it, whoever calls', async (t) => {
  const file = writeDataFile(t);
  const before = readFileSync(file, 'utf8');
  const store = openStore(file, { readOnly: 'several instances' });
  await assert.rejects(renameAccount(store, 'acct_a', 'lost'), { status: 409, code: 'read_only_store' });
  assert.equal(readFileSync(file, 'utf8'), before);
  assert.equal((await store.readAccount('acct_a'))?.name, 'Account A');
});

test('the shipped demo file is never written: changes stay in memory, one warning says so', async (t) => {
  const demo = join(ROOT, 'config', 'demo-data.json');
  const before = readFileSync(demo);
  const link = join(tempDir(t), 'data.json');
  symlinkSync(demo, link);
  for (const file of [demo, link]) {
    const { log, lines } = captureLog();
    const store = openStore(file, { log });
    assert.equal(store.isWritingFile, false, file);
    await renameAccount(store, 'acct_alice', 'changed in memory');
    await store.appendAudit('acct_alice', [auditEvent(T0, 'account.reset')]);
    assert.equal((await store.readAccount('acct_alice'))?.name, 'changed in memory');
    assert.equal(lines().filter((l) => l.level === 40 && /demo file/.test(String(l.msg))).length, 1);
  }
  assert.deepEqual(readFileSync(demo), before);
  // A copy of it elsewhere is the operator's own file, and written.
  const copy = writeDataFile(t, readDataFile(demo));
  assert.equal(openStore(copy).isWritingFile, true);
});

test('changes made on the shipped demo file go to the save file (data.demoSaveFile), made with its directory', async (t) => {
  const demo = join(ROOT, 'config', 'demo-data.json');
  const before = readFileSync(demo);
  const saveTo = join(tempDir(t), 'data', 'gateway-data.json');
  const { log, lines } = captureLog();
  const store = openStore(demo, { log, saveDemoTo: saveTo });
  assert.equal(store.isWritingFile, true);
  await renameAccount(store, 'acct_alice', 'saved');
  await renameAccount(store, 'acct_bob', 'saved too');
  const saved = readDataFile(saveTo);
  assert.deepEqual(saved.accounts.map((a) => a.name), ['saved', 'saved too']);
  assert.equal(saved.accounts[0]!.apiKeys.length, readDataFile(demo).accounts[0]!.apiKeys.length, 'the demo data with the changes');
  assert.deepEqual(readFileSync(demo), before);
  assert.equal(lines().filter((l) => l.level === 30 && /demo data are saved/.test(String(l.msg))).length, 1);
  // A fresh store over the save file (what services.ts reads once it exists) has both changes.
  assert.equal((await openStore(saveTo).readAccount('acct_bob'))?.name, 'saved too');
});

test('own changes tell the directory exactly what changed; a version read from the file is a gap', async (t) => {
  const file = writeDataFile(t);
  const directory = new MemoryDirectory(readDataFile(file));
  const heard: (DirectoryChange | 'gap')[] = [];
  directory.watch({ onChange: (change) => heard.push(change), onGap: () => heard.push('gap') });
  const store = openStore(file, { onCommit: (next, changes) => directory.load(next, changes) });
  await store.putRole('acct_a', { id: 10, slug: 'ten', name: 'Ten', description: '', public: false }, undefined, []);
  await store.putSignRecord('acct_a', { address: `0x${'cd'.repeat(20)}`, signedNonce: 1, signedAt: T0, signedExpiredAt: T0 }, 'create', []);
  await store.createOwner({ id: 'own_x', email: 'x@example.com', passwordHash: 'h', mustChangePassword: false, disabled: false, createdAt: '2026-11-01T00:00:00.000Z' });
  assert.deepEqual(heard, [{ kind: 'roles', accountId: 'acct_a' }, { kind: 'sign', accountId: 'acct_a', address: `0x${'cd'.repeat(20)}` }]);
  assert.equal((await directory.listRoles('acct_a', { offset: 0, limit: 10 })).total, 6);
  editByHand(file, (data) => { data.accounts[0].roles = []; });
  await store.refresh();
  assert.deepEqual(heard.slice(2), ['gap']);
  assert.equal((await directory.listRoles('acct_a', { offset: 0, limit: 10 })).total, 0);
});

test('gateway: own writes are not reloaded by the watcher; a foreign edit is, and reaches the owner store', async (t) => {
  const file = writeDataFile(t, dataFileSchema.parse({ accounts: [{ id: 'acct_a', apiKeys: [] }] }));
  const gw = await startGateway(t, { overrides: { log: { level: 'debug' }, data: { file, watchIntervalMs: 10 } } });
  const store = gw.services.ownerStore;
  // The watcher's debug line for a version it finds to be this process's own.
  const ownSeen = () => logged(gw, 'data file changed by this process: already served').length;
  const until = async (done: () => boolean) => {
    const deadline = Date.now() + 10_000;
    while (!done() && Date.now() < deadline) await sleep(10);
    assert.ok(done(), 'the watcher looked within 10 s');
  };
  await store.updateAccount('acct_a', (doc) => ({
    doc: { ...doc, apiKeys: [{ id: 'key_own', apiKey: 'ak_own_write', secretDigest: storedDigest('own secret'), disabled: false, scopes: [] }] },
    events: [],
    result: undefined,
  }));
  // The key is served at once, without waiting for the watcher.
  const own = await postJson(`${gw.url}/api/signin`, { apiKey: 'ak_own_write', apiSecret: sha256Hex('own secret') });
  assert.equal(own.status, 200, JSON.stringify(own.body));
  // The watcher has seen the own write, and passed over it.
  await until(() => ownSeen() === 1);
  assert.deepEqual(logged(gw, 'data file reloaded'), []);

  editByHand(file, (data) => { data.accounts.push({ id: 'acct_hand', apiKeys: [] }); });
  await until(() => logged(gw, 'data file reloaded').length > 0);
  await (store as FileOwnerStore).refresh();
  assert.equal((await store.readAccount('acct_hand'))?.id, 'acct_hand');
  // The next own change keeps the edit, and is again not reloaded.
  await store.updateAccount('acct_a', (doc) => ({ doc: { ...doc, name: 'after' }, events: [], result: undefined }));
  assert.deepEqual(readDataFile(file).accounts.map((a) => [a.id, a.name]), [['acct_a', 'after'], ['acct_hand', undefined]]);
  await until(() => ownSeen() === 2);
  assert.equal(logged(gw, 'data file reloaded').length, 1);
});

test('watcher: an edit made as the watch begins is seen; a version seen twice (a poll between an editor\'s truncate and its write) is reloaded once', (t) => {
  // The project's CI caught two reloads of one edit: a poll stat'ed the truncated file but read
  // the whole new text, and the next poll saw the write's mtime and read that text again. A
  // touch without a change in content is the same second sight, made on purpose.
  const file = writeDataFile(t, dataFileSchema.parse({ accounts: [{ id: 'acct_a', apiKeys: [] }] }));
  const { log, lines } = captureLog();
  const clock = new ManualClock();
  const versions: string[][] = [];
  const stop = watchDataFile(file, 1000, log, (data) => versions.push(data.accounts.map((a) => a.id)), { timers: clock });
  t.after(stop);
  const reloads = () => lines().filter((line) => line.msg === 'data file reloaded').length;

  // At once, before any poll: the baseline was taken when the watch began.
  editByHand(file, (data) => { data.accounts.push({ id: 'acct_b', apiKeys: [] }); });
  clock.advance(999);
  assert.deepEqual(versions, []);
  clock.advance(1);
  assert.deepEqual(versions, [['acct_a', 'acct_b']]);

  const later = new Date(statSync(file).mtimeMs + 5_000);
  utimesSync(file, later, later);
  clock.advance(1000);
  assert.deepEqual(versions, [['acct_a', 'acct_b']]);
  assert.equal(reloads(), 1);

  // A different version is still news; a missing file keeps the last one served.
  editByHand(file, (data) => { data.accounts.pop(); });
  clock.advance(1000);
  assert.deepEqual(versions, [['acct_a', 'acct_b'], ['acct_a']]);
  renameSync(file, `${file}.away`);
  clock.advance(1000);
  renameSync(`${file}.away`, file);
  clock.advance(1000);
  assert.deepEqual(versions, [['acct_a', 'acct_b'], ['acct_a']]);
  assert.equal(reloads(), 2);
  stop();
  editByHand(file, (data) => { data.accounts.push({ id: 'acct_c', apiKeys: [] }); });
  clock.advance(5000);
  assert.equal(versions.length, 2, 'nothing is read once the watch has stopped');
});

test('process: a data file that does not exist yet is created empty, in a directory that exists', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'new-data.json');
  const gw = await startGatewayProcess(t, { GATEWAY_DATA_FILE: file });
  assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), { accounts: [], owners: [] });
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.ok(gw.logs().some((line) => line.level === 40 && line.msg === 'the data file did not exist: created it with no accounts' && line.file === file));
  assert.deepEqual(tempFilesIn(dir), []);
});

test('process: a data file in a directory that does not exist stops the start', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'missing-dir', 'data.json');
  const child = startNode(t, ['src/main.ts'], { env: gatewayEnv({ GATEWAY_DATA_FILE: file, PORT: '0', HOST: '127.0.0.1' }) });
  const exit = await exitWithin(child);
  assert.equal(exit.code, 1, child.stderr());
  assert.match(child.stderr() + child.stdout(), /invalid data file .*missing-dir/);
  assert.deepEqual(readdirSync(dir), []);
});
