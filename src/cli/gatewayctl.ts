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
import { ID_PATTERN, ID_SPELLING } from '../domain/formats.js';
import { randomBase62 } from '../domain/random.js';
import { ADMIN_TOKEN_PREFIX, adminTokenDigest } from '../http/owner/caller.js';
import { runWhenExecuted, UsageError } from './redis.js';

const USAGE = `usage: npm run ctl -- [--url <gateway>] [--json] <command> …

  accounts create --name <name> [--id <accountId>]
  accounts list
  accounts disable <accountId>
  accounts enable <accountId>
  owners add <accountId> --email <email> [--password <initial password>]
  invites create <accountId> --email <email>
  keys list <accountId>
  keys create <accountId> --name <name> [--description <text>] [--scope <scope>]…
  reset <accountId> [--key <keyId>]
  settings-tokens create <accountId> --name <name> [--scope <scope>]… [--expires-in <seconds>]
  admin-token                (offline: a new admin token and its digest)

The admin token is read from GATEWAY_ADMIN_TOKEN. --url defaults to http://127.0.0.1:8080.
--json prints the answer's message as JSON instead of text.`;

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
  const client = connect(values.url);
  return dispatch(client, command!, sub, positionals, values);
}

async function dispatch(client: Client, command: string, sub: string | undefined, positionals: string[], values: Values): Promise<Omit<Output, 'asJson'>> {
  const scopes = values.scope === undefined ? {} : { scopes: values.scope };
  switch (command === 'reset' ? command : `${command} ${sub ?? ''}`.trim()) {
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
    default:
      throw new UsageError(`unknown command "${[command, sub].filter(Boolean).join(' ')}"\n${USAGE}`);
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  try {
    const output = await run(args);
    process.stdout.write(`${output.asJson ? JSON.stringify(output.json, null, 2) : output.text}\n`);
  } catch (err) {
    if (err instanceof GatewayRefusal) {
      process.stderr.write(`gatewayctl: ${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw err;
  }
}

runWhenExecuted(import.meta.url, main);
