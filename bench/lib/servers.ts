/** The servers a benchmark loads: bench/servers/*.ts as it starts them, and gateways, held alike. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanEnv, ROOT, waitReady, type Gateway } from './gateway.js';
import { freePort, pinned } from './machine.js';
import { Output, track } from './processes.js';

export interface Server {
  /** For messages. */
  label: string;
  proc: ChildProcess;
  pid: number;
  url: string;
  err: Output;
  /** A gateway's log, when it is kept; empty otherwise. */
  out: Output;
}

export interface NodeServerStart {
  nodeFlags?: string[];
  /** Ready once `readyPath` answers `readyStatus`. */
  readyPath: string;
  readyStatus: number;
}

/** One of bench/servers/*.ts on a free port, under plain Node (type stripping; no loader unless `nodeFlags` add one). */
export async function startNodeServer(label: string, file: string, core: string | null, env: Record<string, string>, { nodeFlags = [], readyPath, readyStatus }: NodeServerStart): Promise<Server> {
  const port = await freePort();
  const processEnv: NodeJS.ProcessEnv = { ...cleanEnv(), NODE_ENV: 'production', PORT: String(port), ...env };
  const [cmd, args] = pinned(core, process.execPath, [...nodeFlags, join(ROOT, 'bench', 'servers', file)]);
  const proc = track(spawn(cmd, args, { cwd: ROOT, env: processEnv, stdio: ['ignore', 'ignore', 'pipe'] }));
  const server: Server = { label, proc, pid: proc.pid!, url: `http://127.0.0.1:${port}`, err: new Output(proc.stderr), out: new Output(null) };
  await waitReady(server.url, readyPath, proc, `${label} (${file})`, () => server.err.tail(), readyStatus);
  return server;
}

export function gatewayServer(label: string, gw: Gateway): Server {
  return { label, proc: gw.proc, pid: gw.pid, url: gw.url, err: gw.err, out: gw.out };
}

/** The installed version of package `name`, also looked for in the node_modules of the packages `nestedIn`; '?' if none. */
export function packageVersion(name: string, nestedIn: string[] = []): string {
  for (const dir of [join(ROOT, 'node_modules', name), ...nestedIn.map((p) => join(ROOT, 'node_modules', p, 'node_modules', name))]) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  }
  return '?';
}
