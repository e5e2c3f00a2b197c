/**
 * gatewayctl: the operator's command line, over the owner API of a running gateway (so it
 * works the same on file and on Redis state, and every change is validated and audited there
 * as any other). It authenticates with an admin token from GATEWAY_ADMIN_TOKEN, never from an
 * argument, so the token stays out of shell history and `ps`. Each command names an owner
 * operation (http/routes/owner/) and takes its method, path and schemas from that description,
 * so the command line cannot drift from the API. Offline: `admin-token` makes a new token and the
 * digest to put in `owner.adminTokenDigests`; `migrate`, `export` and `import` move the owners'
 * state between the stores (owner-data.ts).
 *
 * Replaces `npm run tokens:reset` (→ `reset`) and `npm run keys:create -- --redis` (→ `keys
 * create`), which wrote to Redis behind the gateway's back.
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { z } from 'zod';
import type { Config } from '../config/schema.js';
import { ID_PATTERN, ID_SPELLING } from '../domain/formats.js';
import { randomBase62 } from '../domain/random.js';
import { ADMIN_TOKEN_PREFIX, adminTokenDigest } from '../http/owner/caller.js';
import type { Operation } from '../http/owner/operation.js';
import { ownerOperations } from '../http/routes/owner/index.js';
import type { OwnerServices } from '../owner/service.js';
import { loadConfig } from '../config/load.js';
import { CopyRefused, exportData, importData, migrate, readExport, type StoreName } from './owner-data.js';
import { failedRun, runWhenExecuted, UsageError, type CommandRun } from './redis.js';

const USAGE = `usage: npm run ctl -- [--url <gateway>] [--json] <command> …

Over the owner API of a running gateway (admin token in GATEWAY_ADMIN_TOKEN):
  accounts create --name <name> [--id <accountId>]
  accounts list
  accounts disable <accountId>
  accounts enable <accountId>
  owners add <accountId> --email <email> [--password <initial password>]
  invites create <accountId> --email <email>
  keys list <accountId>
  keys create <accountId> --name <name> [--description <text>] [--scope <scope>]… [--certificate-sha256 <fingerprint>]
  keys bind <accountId> <keyId> --certificate-sha256 <fingerprint>   (signs in only with that client certificate: docs/tls.md)
  keys unbind <accountId> <keyId>
  keys roll <accountId> <keyId> --overlap <seconds>   (a new secret; the old one signs in for that long)
  keys reset <accountId> <keyId>                      (every token of the key so far is refused)
  keys disable <accountId> <keyId>
  keys enable <accountId> <keyId>
  keys revoke <accountId> <keyId>                     (deletes the key; its tokens stop at once)
  reset <accountId> [--key <keyId>]
  settings-tokens list <accountId>
  settings-tokens create <accountId> --name <name> [--scope <scope>]… [--expires-in <seconds>]
  settings-tokens revoke <accountId> <tokenId>
  roles list <accountId>
  roles create <accountId> --id <roleId> --slug <slug> --name <name> [--description <text>] [--public]
  roles delete <accountId> <roleId>
  sign-records get <accountId> <address>
  sign-records create <accountId> <address> --nonce <n> --signed-at <ISO time> --expires-at <ISO time>
  sign-records replace <accountId> <address> --nonce <n> --signed-at <ISO time> --expires-at <ISO time>
  sign-records delete <accountId> <address>
  audit <accountId> [--limit <n>]                     (newest first; default 50)
  usage <accountId> [--hours <1-24> | --days <1-30>] [--key <keyId>]

Offline (the gateway's own configuration: GATEWAY_CONFIG and the environment):
  admin-token                a new admin token and its digest
  migrate [--file <data file>] [--force] [--if-empty]
                             copies owners, accounts, keys, settings tokens, roles, sign records
                             and audit events from the data file into the configured Redis
  export --from file|redis [--file <data file>]
                             the same records as JSON lines, on standard output
  import --to file|redis [--file <data file>] [--force] [--if-empty] <export file | ->
                             an export into the data file or Redis

migrate and import write nothing when the target holds any record otherwise than the source
(changed since): --force replaces the target's version. They skip what is already there, and
read every record back to check it. --if-empty copies only into a target holding no account.

--url defaults to http://127.0.0.1:8080. --json prints the answer's message as JSON instead of text.`;

const OPTIONS = {
  url: { type: 'string', default: 'http://127.0.0.1:8080' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
  name: { type: 'string' },
  id: { type: 'string' },
  email: { type: 'string' },
  password: { type: 'string' },
  description: { type: 'string' },
  scope: { type: 'string', multiple: true },
  key: { type: 'string' },
  'expires-in': { type: 'string' },
  overlap: { type: 'string' },
  'certificate-sha256': { type: 'string' },
  slug: { type: 'string' },
  public: { type: 'boolean', default: false },
  nonce: { type: 'string' },
  'signed-at': { type: 'string' },
  'expires-at': { type: 'string' },
  limit: { type: 'string' },
  hours: { type: 'string' },
  days: { type: 'string' },
  file: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  force: { type: 'boolean', default: false },
  'if-empty': { type: 'boolean', default: false },
} as const;

type Values = ReturnType<typeof parseCommandLine>['values'];

function parseCommandLine(args: string[]) {
  try {
    return parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`);
  }
}

/** A new admin token (256 random bits) and the `sha256:` digest the gateway's configuration keeps. */
export function makeAdminToken(): { token: string; digest: string } {
  const token = `${ADMIN_TOKEN_PREFIX}${randomBase62(43)}`;
  return { token, digest: adminTokenDigest(token) };
}

/** A refusal from the gateway, as its envelope tells it. */
export class GatewayRefusal extends Error {
  override name = 'GatewayRefusal';
}

interface Client {
  /**
   * Calls the owner operation `operationId` (http/routes/owner/): its method and path come from
   * the operation's description, its path parameters and body are checked against the
   * operation's own schemas before anything is sent, so a mistyped argument is a usage error
   * naming the field, as the gateway would answer it.
   */
  run(operationId: string, params?: Record<string, string | number>, options?: { body?: unknown; query?: Record<string, string | number | undefined> }): Promise<any>;
}

/**
 * The owner API's operations, as data: only their descriptions are read here (method, path,
 * schemas), never their handlers, so the services they would call are not needed.
 */
const OPERATIONS: ReadonlyMap<string, Operation> = new Map(ownerOperations({} as OwnerServices, {
  config: { owner: {} as Config['owner'], dashboard: {} as Config['dashboard'] },
  signAnswers: async () => undefined,
}).map((op) => [op.operationId, op]));

function checked(schema: z.ZodType | undefined, value: unknown, what: string): void {
  if (schema === undefined || value === undefined) return;
  const parsed = schema.safeParse(value);
  if (parsed.success) return;
  const issue = parsed.error.issues[0]!;
  throw new UsageError(`${what}${issue.path.length > 0 ? ` ${issue.path.join('.')}` : ''}: ${issue.message}`);
}

function connect(url: string, token: string | undefined): Client {
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new UsageError(`--url "${url}" is not a URL`);
  }
  async function call(method: string, path: string, body?: unknown): Promise<any> {
      if (token === undefined || token === '') throw new UsageError('set GATEWAY_ADMIN_TOKEN to an admin token (make one with: npm run ctl -- admin-token)');
      const target = new URL(`/owner/v1${path}`, base);
      let res: Response;
      try {
        res = await fetch(target, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(30_000),
        });
      } catch (err) {
        throw new GatewayRefusal(`cannot reach the gateway at ${base.origin}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
      }
      const text = await res.text();
      let answer: { success?: boolean; message?: any } | undefined;
      try {
        answer = JSON.parse(text) as typeof answer;
      } catch {
        answer = undefined;
      }
      if (answer?.success === true && res.ok) return answer.message;
      const m = answer?.message;
      const why = m !== undefined && typeof m.code === 'string'
        ? `${m.code}: ${m.description}${m.field !== undefined ? ` (field "${m.field}")` : ''}`
        : text.slice(0, 200);
      throw new GatewayRefusal(`${method} ${target.pathname} answered ${res.status} ${why}`);
  }
  return {
    run(operationId, params = {}, { body, query } = {}) {
      const op = OPERATIONS.get(operationId);
      if (op === undefined) throw new TypeError(`no owner operation ${operationId}`);
      checked(op.params, Object.fromEntries(Object.entries(params).map(([k, v]) => [k, String(v)])), 'argument');
      checked(op.body, body, 'option');
      const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(String(params[name])));
      const search = new URLSearchParams(Object.entries(query ?? {}).filter(([, v]) => v !== undefined).map(([k, v]): [string, string] => [k, String(v)])).toString();
      return call(op.method.toUpperCase(), `${path.slice('/owner/v1'.length)}${search === '' ? '' : `?${search}`}`, body);
    },
  };
}

function need(value: string | undefined, what: string): string {
  if (value === undefined || value === '') throw new UsageError(`${what} is required\n${USAGE}`);
  return value;
}

function accountArg(positionals: string[], index: number): string {
  const id = need(positionals[index], '<accountId>');
  if (!ID_PATTERN.test(id)) throw new UsageError(`"${id}": account ids are ${ID_SPELLING}`);
  return id;
}

function wholeNumber(value: string | undefined, option: string, { min = 0, max = Number.MAX_SAFE_INTEGER } = {}): number {
  const text = need(value, option);
  const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`${option} is a whole number from ${min} to ${max}`);
  return n;
}

/** The body of a sign record's create or replace. */
function signTimes(values: Values) {
  return { signedNonce: wholeNumber(values.nonce, '--nonce'), signedAt: need(values['signed-at'], '--signed-at'), signedExpiredAt: need(values['expires-at'], '--expires-at') };
}

/** Every page of a listing operation, following `nextCursor`. */
async function listAll(client: Client, operationId: string, params: Record<string, string>): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.run(operationId, params, { query: { limit: 100, cursor } });
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return items;
}

/**
 * Text from the gateway as the terminal shows it: control and bidi characters written as
 * `\u{…}`, so a name (set by an owner, or by hand in the data file) can neither send escape
 * sequences to the operator's terminal nor forge lines or cells of a table.
 */
function printable(text: string): string {
  return text.replace(/[\p{Cc}\p{Cs}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
}

function table(rows: any[], columns: string[]): string {
  const cell = (v: unknown) => printable(v === undefined ? '-' : Array.isArray(v) ? (v.length === 0 ? '-' : v.join(',')) : String(v));
  return [columns.join('\t'), ...rows.map((row) => columns.map((c) => cell(row[c])).join('\t'))].join('\n');
}

/** What a command printed: the text for people, the message for --json. */
interface Output {
  text: string;
  json: unknown;
  asJson: boolean;
  /** Written to standard error (an export's summary: its standard output is the export). */
  notice?: string;
}

export async function run(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Output> {
  const { values, positionals } = parseCommandLine(args);
  const output = await runParsed(values, positionals, env);
  return { ...output, asJson: values.json };
}

/**
 * The command on its arguments and environment, as what it writes and its exit code: main()
 * hands that to the process, and tests run it in theirs. A refusal (the gateway's, or a copy's)
 * exits 1 with its message; any other error as every command reports it (failedRun).
 */
export async function runGatewayctl(args: string[], env: NodeJS.ProcessEnv): Promise<CommandRun> {
  try {
    const output = await run(args, env);
    return {
      code: 0,
      stdout: `${output.asJson && output.json !== undefined ? JSON.stringify(output.json, null, 2) : output.text}\n`,
      stderr: output.notice === undefined ? '' : `${output.notice}\n`,
    };
  } catch (err) {
    if (err instanceof GatewayRefusal || err instanceof CopyRefused) return { code: 1, stdout: '', stderr: `gatewayctl: ${err.message}\n` };
    return failedRun(err);
  }
}

async function runParsed(values: Values, positionals: string[], env: NodeJS.ProcessEnv): Promise<Omit<Output, 'asJson'>> {
  if (values.help || positionals.length === 0) return { text: USAGE, json: { usage: USAGE } };
  const [command, sub] = positionals;
  if (command === 'admin-token') {
    const { token, digest } = makeAdminToken();
    return {
      text: [
        `Admin token: ${token}`,
        '             (shown this once; give it to the operator as GATEWAY_ADMIN_TOKEN)',
        `Digest:      ${digest}`,
        `Add the digest to owner.adminTokenDigests (env OWNER_ADMIN_TOKEN_DIGESTS='["${digest}"]') and restart the gateway.`,
      ].join('\n'),
      json: { token, digest },
    };
  }
  if (command === 'migrate' || command === 'export' || command === 'import') return runOffline(command, values, positionals, env);
  const client = connect(values.url, env.GATEWAY_ADMIN_TOKEN);
  return dispatch(client, command!, sub, positionals, values);
}

function storeArg(value: string | undefined, option: string): StoreName {
  if (value !== 'file' && value !== 'redis') throw new UsageError(`${option} is file or redis\n${USAGE}`);
  return value;
}

/** migrate, export and import: the stores themselves, through the gateway's configuration (owner-data.ts). */
async function runOffline(command: 'migrate' | 'export' | 'import', values: Values, positionals: string[], env: NodeJS.ProcessEnv): Promise<Omit<Output, 'asJson'>> {
  const warnings: string[] = [];
  const options = { force: values.force, ifEmpty: values['if-empty'], warn: (line: string) => warnings.push(line) };
  const done = (text: string) => ({ text, json: { result: text }, ...(warnings.length > 0 ? { notice: warnings.join('\n') } : {}) });
  if (command === 'migrate') return done(await migrate(values.file, options));
  const config = loadConfig({ env });
  if (command === 'export') {
    const { text, counts } = await exportData(storeArg(values.from, '--from'), values.file, config, new Date());
    return { text, json: undefined, notice: `Exported ${counts.owners} owners and ${counts.accounts} accounts.` };
  }
  const path = need(positionals[1], '<export file> (or - for standard input)');
  return done(await importData(readExport(path), path === '-' ? 'standard input' : path, storeArg(values.to, '--to'), values.file, config, options));
}

/** What a command of the owner API is given: the client, the words of the command line, its options. */
interface Invocation {
  client: Client;
  /** The command's second word (`create` of `keys create`). */
  sub: string | undefined;
  positionals: string[];
  values: Values;
}

type Answer = Omit<Output, 'asJson'>;

/**
 * The commands that call the owner API, as data: each command's words (`reset`, `audit` and
 * `usage` have one, the others two) and what it does.
 */
const COMMANDS: Readonly<Record<string, (call: Invocation) => Promise<Answer>>> = {
  'accounts create': async ({ client, values }) => {
    const account = await client.run('createAccount', {}, { body: { name: need(values.name, '--name'), ...(values.id === undefined ? {} : { id: values.id }) } });
    return { text: `Created account ${account.id} ("${account.name}").`, json: account };
  },
  'accounts list': async ({ client }) => {
    const items = await listAll(client, 'listAccounts', {});
    return { text: table(items, ['id', 'name', 'enabled', 'createdAt']), json: items };
  },
  'accounts disable': setAccountEnabled,
  'accounts enable': setAccountEnabled,
  'owners add': async ({ client, positionals, values }) => {
    const account = accountArg(positionals, 2);
    const chosen = values.password;
    // A generated one keeps the password out of shell history; the owner must change it anyway.
    const initialPassword = chosen ?? randomBase62(20);
    const member = await client.run('addOwner', { accountId: account }, { body: { email: need(values.email, '--email'), initialPassword } });
    const lines = [`Added ${member.email} as an owner of ${account} (owner id ${member.ownerId}).`];
    if (chosen === undefined) lines.push(`Initial password: ${initialPassword}`, '                  (if the owner is new: give it to them; it must be changed at the first sign-in)');
    return { text: lines.join('\n'), json: chosen === undefined ? { ...member, initialPassword } : member };
  },
  'invites create': async ({ client, positionals, values }) => {
    const answer = await client.run('createInvite', { accountId: accountArg(positionals, 2) }, { body: { email: need(values.email, '--email') } });
    return { text: [`Invite ${answer.invite.id} for ${answer.invite.email}, valid until ${answer.invite.expiresAt}:`, answer.url, '(shown this once)'].join('\n'), json: answer };
  },
  'keys list': async ({ client, positionals }) => {
    const items = await listAll(client, 'listKeys', { accountId: accountArg(positionals, 2) });
    return { text: table(items, ['id', 'apiKey', 'name', 'enabled', 'scopes', 'createdAt', 'previousValidUntil']), json: items };
  },
  'keys create': async ({ client, positionals, values }) => {
    const certificate = values['certificate-sha256'];
    const body = { name: need(values.name, '--name'), ...(values.description === undefined ? {} : { description: values.description }), ...scopesOf(values), ...(certificate === undefined ? {} : { certificateSha256: certificate }) };
    const answer = await client.run('createKey', { accountId: accountArg(positionals, 2) }, { body });
    return {
      text: [
        `Key ${answer.key.id} of account ${positionals[2]!}:`,
        `API key:    ${answer.key.apiKey}`,
        `API secret: ${answer.apiSecret}`,
        '            (shown this once; the gateway keeps only a digest)',
        `Clients sign in with apiSecret = SHA-256 of the secret: ${createHash('sha256').update(answer.apiSecret, 'utf8').digest('hex')}`,
      ].join('\n'),
      json: answer,
    };
  },
  'reset': async ({ client, positionals, values }) => {
    const account = accountArg(positionals, 1);
    const answer = values.key === undefined
      ? await client.run('resetAccount', { accountId: account })
      : await client.run('resetKey', { accountId: account, keyId: values.key });
    const what = answer.keyId === undefined ? `every key of account ${answer.accountId} (and its API settings tokens)` : `key ${answer.keyId} of account ${answer.accountId}`;
    return { text: `Reset the tokens of ${what} at ${answer.resetAt}: every token issued until then is refused.`, json: answer };
  },
  'settings-tokens create': async ({ client, positionals, values }) => {
    const expires = values['expires-in'];
    if (expires !== undefined && !/^[1-9]\d*$/.test(expires)) throw new UsageError('--expires-in is a whole number of seconds');
    const body = { name: need(values.name, '--name'), ...scopesOf(values), ...(expires === undefined ? {} : { expiresInSeconds: Number(expires) }) };
    const answer = await client.run('createSettingsToken', { accountId: accountArg(positionals, 2) }, { body });
    return {
      text: [
        `API settings token ${answer.settingsToken.id} ("${answer.settingsToken.name}"${answer.settingsToken.expiresAt === undefined ? ', never expires' : `, expires ${answer.settingsToken.expiresAt}`}):`,
        answer.token,
        '(shown this once; send it as "Authorization: Bearer <token>")',
      ].join('\n'),
      json: answer,
    };
  },
  'keys roll': async ({ client, positionals, values }) => {
    const account = accountArg(positionals, 2);
    const keyId = need(positionals[3], '<keyId>');
    const answer = await client.run('rollKey', { accountId: account, keyId }, { body: { overlapSeconds: wholeNumber(values.overlap, '--overlap', { max: 2_592_000 }) } });
    return {
      text: [
        `New secret of key ${answer.key.id}${answer.key.previousValidUntil === undefined ? ' (the old one no longer signs in)' : ` (the old one signs in until ${answer.key.previousValidUntil})`}:`,
        `API secret: ${answer.apiSecret}`,
        '            (shown this once; the gateway keeps only a digest)',
        `Clients sign in with apiSecret = SHA-256 of the secret: ${createHash('sha256').update(answer.apiSecret, 'utf8').digest('hex')}`,
      ].join('\n'),
      json: answer,
    };
  },
  'keys reset': async ({ client, positionals }) => {
    const answer = await client.run('resetKey', { accountId: accountArg(positionals, 2), keyId: need(positionals[3], '<keyId>') });
    return { text: `Reset the tokens of key ${answer.keyId} of account ${answer.accountId} at ${answer.resetAt}: every token issued until then is refused.`, json: answer };
  },
  'keys bind': bindKey,
  'keys unbind': bindKey,
  'keys disable': setKeyEnabled,
  'keys enable': setKeyEnabled,
  'keys revoke': async ({ client, positionals }) => {
    const answer = await client.run('deleteKey', { accountId: accountArg(positionals, 2), keyId: need(positionals[3], '<keyId>') });
    return { text: `Revoked (deleted) key ${answer.id}: its access tokens are refused at once.`, json: answer };
  },
  'settings-tokens list': async ({ client, positionals }) => {
    const items = await listAll(client, 'listSettingsTokens', { accountId: accountArg(positionals, 2) });
    return { text: table(items, ['id', 'name', 'start', 'status', 'scopes', 'createdAt', 'expiresAt', 'lastUsedAt']), json: items };
  },
  'settings-tokens revoke': async ({ client, positionals }) => {
    const answer = await client.run('revokeSettingsToken', { accountId: accountArg(positionals, 2), tokenId: need(positionals[3], '<tokenId>') });
    return { text: `Revoked API settings token ${answer.id}.`, json: answer };
  },
  'roles list': async ({ client, positionals }) => {
    const items = await listAll(client, 'listAccountRoles', { accountId: accountArg(positionals, 2) });
    return { text: table(items, ['id', 'slug', 'name', 'public', 'description']), json: items };
  },
  'roles create': async ({ client, positionals, values }) => {
    const body = {
      id: wholeNumber(values.id, '--id'), slug: need(values.slug, '--slug'), name: need(values.name, '--name'),
      ...(values.description === undefined ? {} : { description: values.description }), public: values.public,
    };
    const role = await client.run('createAccountRole', { accountId: accountArg(positionals, 2) }, { body });
    return { text: `Created role ${role.id} (${role.slug}).`, json: role };
  },
  'roles delete': async ({ client, positionals }) => {
    const answer = await client.run('deleteAccountRole', { accountId: accountArg(positionals, 2), roleId: need(positionals[3], '<roleId>') });
    return { text: `Deleted role ${answer.id}.`, json: answer };
  },
  'sign-records get': async ({ client, positionals }) => {
    const record = await client.run('getAccountSignRecord', { accountId: accountArg(positionals, 2), address: need(positionals[3], '<address>') });
    return { text: table([record], ['address', 'signedNonce', 'signedAt', 'signedExpiredAt']), json: record };
  },
  'sign-records create': async ({ client, positionals, values }) => {
    const record = await client.run('createAccountSignRecord', { accountId: accountArg(positionals, 2) }, { body: { address: need(positionals[3], '<address>'), ...signTimes(values) } });
    return { text: `Created the sign record of ${record.address} (nonce ${record.signedNonce}).`, json: record };
  },
  'sign-records replace': async ({ client, positionals, values }) => {
    const record = await client.run('replaceAccountSignRecord', { accountId: accountArg(positionals, 2), address: need(positionals[3], '<address>') }, { body: signTimes(values) });
    return { text: `Replaced the sign record of ${record.address} (nonce ${record.signedNonce}).`, json: record };
  },
  'sign-records delete': async ({ client, positionals }) => {
    const answer = await client.run('deleteAccountSignRecord', { accountId: accountArg(positionals, 2), address: need(positionals[3], '<address>') });
    return { text: `Deleted the sign record of ${answer.address}.`, json: answer };
  },
  'audit': async ({ client, positionals, values }) => {
    const account = accountArg(positionals, 1);
    const limit = values.limit === undefined ? 50 : wholeNumber(values.limit, '--limit', { min: 1, max: 10_000 });
    const items: any[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.run('listAudit', { accountId: account }, { query: { limit: Math.min(100, limit - items.length), cursor } });
      items.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor !== undefined && items.length < limit);
    const rows = items.map((e) => ({ ...e, actor: `${e.actor.type}${e.actor.id === undefined ? '' : `:${e.actor.id}`}`, target: `${e.target.type}:${e.target.id}` }));
    return { text: table(rows, ['at', 'action', 'actor', 'target', 'ip']), json: items };
  },
  'usage': async ({ client, positionals, values }) => {
    if (values.hours !== undefined && values.days !== undefined) throw new UsageError('usage takes --hours or --days, not both');
    const window = values.days !== undefined
      ? { days: wholeNumber(values.days, '--days', { min: 1, max: 30 }) }
      : { hours: values.hours === undefined ? 24 : wholeNumber(values.hours, '--hours', { min: 1, max: 24 }) };
    const usage = await client.run('getAccountUsage', { accountId: accountArg(positionals, 1) }, { query: { ...window, keyId: values.key } });
    const head = `Usage of ${accountArg(positionals, 1)} from ${usage.from} to ${usage.to}${usage.enabled ? '' : ' (usage counting is off: usage.enabled)'}:`;
    const rows = usage.items.map((item: { statuses: Record<string, number> }) => ({ ...item, ...item.statuses }));
    return { text: `${head}\n${table(rows, ['keyId', 'requests', 'rateLimited', '1xx', '2xx', '3xx', '4xx', '5xx'])}`, json: usage };
  },
};

/** `accounts disable` and `accounts enable`. */
async function setAccountEnabled({ client, sub, positionals }: Invocation): Promise<Answer> {
  const enabled = sub === 'enable';
  const account = await client.run('updateAccount', { accountId: accountArg(positionals, 2) }, { body: { enabled } });
  return {
    text: enabled ? `Enabled account ${account.id}.` : `Disabled account ${account.id}: its keys no longer sign in and every token issued to it is refused.`,
    json: account,
  };
}

/** `keys bind` (to a client certificate) and `keys unbind`. */
async function bindKey({ client, sub, positionals, values }: Invocation): Promise<Answer> {
  const certificateSha256 = sub === 'bind' ? need(values['certificate-sha256'], '--certificate-sha256') : null;
  const key = await client.run('updateKey', { accountId: accountArg(positionals, 2), keyId: need(positionals[3], '<keyId>') }, { body: { certificateSha256 } });
  return {
    text: key.certificateSha256 === undefined ? `Key ${key.id} is bound to no client certificate.`
      : `Key ${key.id} is bound to the client certificate with SHA-256 ${key.certificateSha256}: it signs in only with it, and its earlier tokens are refused.`,
    json: key,
  };
}

/** `keys disable` and `keys enable`. */
async function setKeyEnabled({ client, sub, positionals }: Invocation): Promise<Answer> {
  const enabled = sub === 'enable';
  const key = await client.run('updateKey', { accountId: accountArg(positionals, 2), keyId: need(positionals[3], '<keyId>') }, { body: { enabled } });
  return { text: enabled ? `Enabled key ${key.id}.` : `Disabled key ${key.id}: it no longer signs in and its access tokens are refused.`, json: key };
}

function scopesOf(values: Values): { scopes?: string[] } {
  return values.scope === undefined ? {} : { scopes: values.scope };
}

async function dispatch(client: Client, command: string, sub: string | undefined, positionals: string[], values: Values): Promise<Answer> {
  const name = ['reset', 'audit', 'usage'].includes(command) ? command : `${command} ${sub ?? ''}`.trim();
  // Own properties only: `constructor` is no command.
  const commandOf = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (commandOf === undefined) throw new UsageError(`unknown command "${[command, sub].filter(Boolean).join(' ')}"\n${USAGE}`);
  return commandOf({ client, sub, positionals, values });
}

async function main(): Promise<void> {
  const { code, stdout, stderr } = await runGatewayctl(process.argv.slice(2), process.env);
  process.stderr.write(stderr);
  process.stdout.write(stdout);
  process.exitCode = code;
}

runWhenExecuted(import.meta.url, main);
