/**
 * gatewayctl: the operator's command line, over the owner API of a running gateway (so it
 * works the same on file and on Redis state, and every change is validated and audited there
 * as any other). It authenticates with an admin token from GATEWAY_ADMIN_TOKEN, never from an
 * argument, so the token stays out of shell history and `ps`. Only `admin-token` is offline:
 * it makes a new token and the digest to put in `owner.adminTokenDigests`.
 *
 * Replaces `npm run tokens:reset` (→ `reset`) and `npm run keys:create -- --redis` (→ `keys
 * create`), which wrote to Redis behind the gateway's back.
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { ADDRESS_PATTERN, ID_PATTERN, ID_SPELLING } from '../domain/formats.js';
import { randomBase62 } from '../domain/random.js';
import { ADMIN_TOKEN_PREFIX, adminTokenDigest } from '../http/owner/caller.js';
import { loadConfig } from '../config/load.js';
import { CopyRefused, exportData, importData, migrate, readExport, type StoreName } from './owner-data.js';
import { runWhenExecuted, UsageError } from './redis.js';

const USAGE = `usage: npm run ctl -- [--url <gateway>] [--json] <command> …

Over the owner API of a running gateway (admin token in GATEWAY_ADMIN_TOKEN):
  accounts create --name <name> [--id <accountId>]
  accounts list
  accounts disable <accountId>
  accounts enable <accountId>
  owners add <accountId> --email <email> [--password <initial password>]
  invites create <accountId> --email <email>
  keys list <accountId>
  keys create <accountId> --name <name> [--description <text>] [--scope <scope>]…
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
  usage <accountId> [--hours <1-24>]

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
  slug: { type: 'string' },
  public: { type: 'boolean', default: false },
  nonce: { type: 'string' },
  'signed-at': { type: 'string' },
  'expires-at': { type: 'string' },
  limit: { type: 'string' },
  hours: { type: 'string' },
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
  call(method: string, path: string, body?: unknown): Promise<any>;
}

function connect(url: string): Client {
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new UsageError(`--url "${url}" is not a URL`);
  }
  return {
    async call(method, path, body) {
      const token = process.env.GATEWAY_ADMIN_TOKEN;
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
  return encodeURIComponent(id);
}

/** A positional id (a key's, a settings token's), encoded for the path. */
function idArg(positionals: string[], index: number, what: string): string {
  const id = need(positionals[index], what);
  if (!ID_PATTERN.test(id)) throw new UsageError(`"${id}": ${what} is ${ID_SPELLING}`);
  return encodeURIComponent(id);
}

function roleIdArg(value: string | undefined, what: string): number {
  const text = need(value, what);
  if (!/^(?:0|[1-9][0-9]{0,15})$/.test(text)) throw new UsageError(`${what} is a whole number from 0`);
  return Number(text);
}

function addressArg(positionals: string[], index: number): string {
  const address = need(positionals[index], '<address>');
  if (!ADDRESS_PATTERN.test(address)) throw new UsageError(`"${address}": an address is 0x and 40 hex digits`);
  return address;
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

/** Every page of a listing, following `nextCursor`. */
async function listAll(client: Client, path: string): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.call('GET', `${path}?limit=100${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
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

export async function run(args: string[]): Promise<Output> {
  const { values, positionals } = parseCommandLine(args);
  const output = await runParsed(values, positionals);
  return { ...output, asJson: values.json };
}

async function runParsed(values: Values, positionals: string[]): Promise<Omit<Output, 'asJson'>> {
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
  if (command === 'migrate' || command === 'export' || command === 'import') return runOffline(command, values, positionals);
  const client = connect(values.url);
  return dispatch(client, command!, sub, positionals, values);
}

function storeArg(value: string | undefined, option: string): StoreName {
  if (value !== 'file' && value !== 'redis') throw new UsageError(`${option} is file or redis\n${USAGE}`);
  return value;
}

/** migrate, export and import: the stores themselves, through the gateway's configuration (owner-data.ts). */
async function runOffline(command: 'migrate' | 'export' | 'import', values: Values, positionals: string[]): Promise<Omit<Output, 'asJson'>> {
  const warnings: string[] = [];
  const options = { force: values.force, ifEmpty: values['if-empty'], warn: (line: string) => warnings.push(line) };
  const done = (text: string) => ({ text, json: { result: text }, ...(warnings.length > 0 ? { notice: warnings.join('\n') } : {}) });
  if (command === 'migrate') return done(await migrate(values.file, options));
  const config = loadConfig();
  if (command === 'export') {
    const { text, counts } = await exportData(storeArg(values.from, '--from'), values.file, config, new Date());
    return { text, json: undefined, notice: `Exported ${counts.owners} owners and ${counts.accounts} accounts.` };
  }
  const path = need(positionals[1], '<export file> (or - for standard input)');
  return done(await importData(readExport(path), path === '-' ? 'standard input' : path, storeArg(values.to, '--to'), values.file, config, options));
}

async function dispatch(client: Client, command: string, sub: string | undefined, positionals: string[], values: Values): Promise<Omit<Output, 'asJson'>> {
  const scopes = values.scope === undefined ? {} : { scopes: values.scope };
  switch (['reset', 'audit', 'usage'].includes(command) ? command : `${command} ${sub ?? ''}`.trim()) {
    case 'accounts create': {
      const account = await client.call('POST', '/accounts', { name: need(values.name, '--name'), ...(values.id === undefined ? {} : { id: values.id }) });
      return { text: `Created account ${account.id} ("${account.name}").`, json: account };
    }
    case 'accounts list': {
      const items = await listAll(client, '/accounts');
      return { text: table(items, ['id', 'name', 'enabled', 'createdAt']), json: items };
    }
    case 'accounts disable':
    case 'accounts enable': {
      const enabled = sub === 'enable';
      const account = await client.call('PATCH', `/accounts/${accountArg(positionals, 2)}`, { enabled });
      return {
        text: enabled ? `Enabled account ${account.id}.` : `Disabled account ${account.id}: its keys no longer sign in and every token issued to it is refused.`,
        json: account,
      };
    }
    case 'owners add': {
      const account = accountArg(positionals, 2);
      const chosen = values.password;
      // A generated one keeps the password out of shell history; the owner must change it anyway.
      const initialPassword = chosen ?? randomBase62(20);
      const member = await client.call('POST', `/accounts/${account}/owners`, { email: need(values.email, '--email'), initialPassword });
      const lines = [`Added ${member.email} as an owner of ${decodeURIComponent(account)} (owner id ${member.ownerId}).`];
      if (chosen === undefined) lines.push(`Initial password: ${initialPassword}`, '                  (if the owner is new: give it to them; it must be changed at the first sign-in)');
      return { text: lines.join('\n'), json: chosen === undefined ? { ...member, initialPassword } : member };
    }
    case 'invites create': {
      const answer = await client.call('POST', `/accounts/${accountArg(positionals, 2)}/invites`, { email: need(values.email, '--email') });
      return { text: [`Invite ${answer.invite.id} for ${answer.invite.email}, valid until ${answer.invite.expiresAt}:`, answer.url, '(shown this once)'].join('\n'), json: answer };
    }
    case 'keys list': {
      const items = await listAll(client, `/accounts/${accountArg(positionals, 2)}/keys`);
      return { text: table(items, ['id', 'apiKey', 'name', 'enabled', 'scopes', 'createdAt', 'previousValidUntil']), json: items };
    }
    case 'keys create': {
      const body = { name: need(values.name, '--name'), ...(values.description === undefined ? {} : { description: values.description }), ...scopes };
      const answer = await client.call('POST', `/accounts/${accountArg(positionals, 2)}/keys`, body);
      return {
        text: [
          `Key ${answer.key.id} of account ${decodeURIComponent(positionals[2]!)}:`,
          `API key:    ${answer.key.apiKey}`,
          `API secret: ${answer.apiSecret}`,
          '            (shown this once; the gateway keeps only a digest)',
          `Clients sign in with apiSecret = SHA-256 of the secret: ${createHash('sha256').update(answer.apiSecret, 'utf8').digest('hex')}`,
        ].join('\n'),
        json: answer,
      };
    }
    case 'reset': {
      const account = accountArg(positionals, 1);
      const answer = values.key === undefined
        ? await client.call('POST', `/accounts/${account}/reset`)
        : await client.call('POST', `/accounts/${account}/keys/${encodeURIComponent(values.key)}/reset`);
      const what = answer.keyId === undefined ? `every key of account ${answer.accountId} (and its API settings tokens)` : `key ${answer.keyId} of account ${answer.accountId}`;
      return { text: `Reset the tokens of ${what} at ${answer.resetAt}: every token issued until then is refused.`, json: answer };
    }
    case 'settings-tokens create': {
      const expires = values['expires-in'];
      if (expires !== undefined && !/^[1-9]\d*$/.test(expires)) throw new UsageError('--expires-in is a whole number of seconds');
      const body = { name: need(values.name, '--name'), ...scopes, ...(expires === undefined ? {} : { expiresInSeconds: Number(expires) }) };
      const answer = await client.call('POST', `/accounts/${accountArg(positionals, 2)}/settings-tokens`, body);
      return {
        text: [
          `API settings token ${answer.settingsToken.id} ("${answer.settingsToken.name}"${answer.settingsToken.expiresAt === undefined ? ', never expires' : `, expires ${answer.settingsToken.expiresAt}`}):`,
          answer.token,
          '(shown this once; send it as "Authorization: Bearer <token>")',
        ].join('\n'),
        json: answer,
      };
    }
    case 'keys roll': {
      const account = accountArg(positionals, 2);
      const keyId = idArg(positionals, 3, '<keyId>');
      const answer = await client.call('POST', `/accounts/${account}/keys/${keyId}/roll`, { overlapSeconds: wholeNumber(values.overlap, '--overlap', { max: 2_592_000 }) });
      return {
        text: [
          `New secret of key ${answer.key.id}${answer.key.previousValidUntil === undefined ? ' (the old one no longer signs in)' : ` (the old one signs in until ${answer.key.previousValidUntil})`}:`,
          `API secret: ${answer.apiSecret}`,
          '            (shown this once; the gateway keeps only a digest)',
          `Clients sign in with apiSecret = SHA-256 of the secret: ${createHash('sha256').update(answer.apiSecret, 'utf8').digest('hex')}`,
        ].join('\n'),
        json: answer,
      };
    }
    case 'keys reset': {
      const answer = await client.call('POST', `/accounts/${accountArg(positionals, 2)}/keys/${idArg(positionals, 3, '<keyId>')}/reset`);
      return { text: `Reset the tokens of key ${answer.keyId} of account ${answer.accountId} at ${answer.resetAt}: every token issued until then is refused.`, json: answer };
    }
    case 'keys disable':
    case 'keys enable': {
      const enabled = sub === 'enable';
      const key = await client.call('PATCH', `/accounts/${accountArg(positionals, 2)}/keys/${idArg(positionals, 3, '<keyId>')}`, { enabled });
      return { text: enabled ? `Enabled key ${key.id}.` : `Disabled key ${key.id}: it no longer signs in and its access tokens are refused.`, json: key };
    }
    case 'keys revoke': {
      const answer = await client.call('DELETE', `/accounts/${accountArg(positionals, 2)}/keys/${idArg(positionals, 3, '<keyId>')}`);
      return { text: `Revoked (deleted) key ${answer.id}: its access tokens are refused at once.`, json: answer };
    }
    case 'settings-tokens list': {
      const items = await listAll(client, `/accounts/${accountArg(positionals, 2)}/settings-tokens`);
      return { text: table(items, ['id', 'name', 'start', 'status', 'scopes', 'createdAt', 'expiresAt', 'lastUsedAt']), json: items };
    }
    case 'settings-tokens revoke': {
      const answer = await client.call('DELETE', `/accounts/${accountArg(positionals, 2)}/settings-tokens/${idArg(positionals, 3, '<tokenId>')}`);
      return { text: `Revoked API settings token ${answer.id ?? decodeURIComponent(positionals[3]!)}.`, json: answer };
    }
    case 'roles list': {
      const items = await listAll(client, `/accounts/${accountArg(positionals, 2)}/roles`);
      return { text: table(items, ['id', 'slug', 'name', 'public', 'description']), json: items };
    }
    case 'roles create': {
      const body = {
        id: roleIdArg(values.id, '--id'), slug: need(values.slug, '--slug'), name: need(values.name, '--name'),
        ...(values.description === undefined ? {} : { description: values.description }), public: values.public,
      };
      const role = await client.call('POST', `/accounts/${accountArg(positionals, 2)}/roles`, body);
      return { text: `Created role ${role.id} (${role.slug}).`, json: role };
    }
    case 'roles delete': {
      const answer = await client.call('DELETE', `/accounts/${accountArg(positionals, 2)}/roles/${roleIdArg(positionals[3], '<roleId>')}`);
      return { text: `Deleted role ${answer.id}.`, json: answer };
    }
    case 'sign-records get': {
      const record = await client.call('GET', `/accounts/${accountArg(positionals, 2)}/sign-records/${addressArg(positionals, 3)}`);
      return { text: table([record], ['address', 'signedNonce', 'signedAt', 'signedExpiredAt']), json: record };
    }
    case 'sign-records create': {
      const record = await client.call('POST', `/accounts/${accountArg(positionals, 2)}/sign-records`, { address: addressArg(positionals, 3), ...signTimes(values) });
      return { text: `Created the sign record of ${record.address} (nonce ${record.signedNonce}).`, json: record };
    }
    case 'sign-records replace': {
      const record = await client.call('PUT', `/accounts/${accountArg(positionals, 2)}/sign-records/${addressArg(positionals, 3)}`, signTimes(values));
      return { text: `Replaced the sign record of ${record.address} (nonce ${record.signedNonce}).`, json: record };
    }
    case 'sign-records delete': {
      const answer = await client.call('DELETE', `/accounts/${accountArg(positionals, 2)}/sign-records/${addressArg(positionals, 3)}`);
      return { text: `Deleted the sign record of ${answer.address}.`, json: answer };
    }
    case 'audit': {
      const account = accountArg(positionals, 1);
      const limit = values.limit === undefined ? 50 : wholeNumber(values.limit, '--limit', { min: 1, max: 10_000 });
      const items: any[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.call('GET', `/accounts/${account}/audit?limit=${Math.min(100, limit - items.length)}${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
        items.push(...page.items);
        cursor = page.nextCursor;
      } while (cursor !== undefined && items.length < limit);
      const rows = items.map((e) => ({ ...e, actor: `${e.actor.type}${e.actor.id === undefined ? '' : `:${e.actor.id}`}`, target: `${e.target.type}:${e.target.id}` }));
      return { text: table(rows, ['at', 'action', 'actor', 'target', 'ip']), json: items };
    }
    case 'usage': {
      const hours = values.hours === undefined ? 24 : wholeNumber(values.hours, '--hours', { min: 1, max: 24 });
      const usage = await client.call('GET', `/accounts/${accountArg(positionals, 1)}/usage?hours=${hours}`);
      const head = `Usage of ${decodeURIComponent(accountArg(positionals, 1))} from ${usage.from} to ${usage.to}${usage.enabled ? '' : ' (usage counting is off: usage.enabled)'}:`;
      return { text: `${head}\n${table(usage.items, ['keyId', 'requests', 'rateLimited'])}`, json: usage };
    }
    default:
      throw new UsageError(`unknown command "${[command, sub].filter(Boolean).join(' ')}"\n${USAGE}`);
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  try {
    const output = await run(args);
    if (output.notice !== undefined) process.stderr.write(`${output.notice}\n`);
    process.stdout.write(`${output.asJson && output.json !== undefined ? JSON.stringify(output.json, null, 2) : output.text}\n`);
  } catch (err) {
    if (err instanceof GatewayRefusal || err instanceof CopyRefused) {
      process.stderr.write(`gatewayctl: ${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw err;
  }
}

runWhenExecuted(import.meta.url, main);
