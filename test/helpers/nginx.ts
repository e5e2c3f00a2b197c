/**
 * A real nginx for the tests (Debian's, with the auth_request module): started in the
 * foreground as the test's own process, on a free port of 127.0.0.1, with every file it writes
 * (pid, logs, temporary bodies) in a directory of the test's own, and stopped in t.after. The
 * test gives the `http {}` context's content (upstreams and the server block, as an operator
 * writes them: docs/forward-auth.md); the process-level settings are the helper's.
 *
 * Where nginx is not installed its suites skip loudly, except under CI (`CI` set), where a
 * missing nginx fails the run, as redis.ts does for redis-server.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { tempDir } from './process.js';
import { freePort } from './redis.js';

const BINARY = process.env.NGINX_BIN ?? '/usr/sbin/nginx';

export const nginxAvailable: boolean = spawnSync(BINARY, ['-v'], { stdio: 'ignore' }).status === 0;

/** Options for `test(name, nginxSuite(), fn)`: skipped, loudly, where nginx is missing and CI is unset. */
export function nginxSuite(): { skip: string | false } {
  if (nginxAvailable || process.env.CI) return { skip: false };
  const message = 'nginx is not installed: nginx suites SKIPPED (apt-get install nginx; CI runs them)';
  process.stderr.write(`\n*** ${message} ***\n\n`);
  return { skip: message };
}

export interface TestNginx {
  url: string;
  port: number;
  /** nginx's error log so far (auth_request's complaints land here). */
  errorLog(): string;
}

/**
 * Starts nginx with `http` as its http {} context; `http` is given the port to listen on and
 * returns the configuration text. Resolves once nginx accepts connections.
 */
export async function startNginx(t: TestContext, http: (port: number) => string): Promise<TestNginx> {
  const dir = tempDir(t, 'gateway-nginx-');
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, [
    'daemon off;',
    'master_process off;',
    'worker_processes 1;',
    `pid ${join(dir, 'nginx.pid')};`,
    `error_log ${join(dir, 'error.log')} notice;`,
    'events { worker_connections 256; }',
    'http {',
    '  access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `  ${kind}_temp_path ${join(dir, kind)};`),
    http(port),
    '}',
    '',
  ].join('\n'));
  const child = spawn(BINARY, ['-p', dir, '-c', conf, '-e', 'stderr'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => { output += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { output += c.toString(); });
  t.after(() => new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  }));
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    assert.equal(child.exitCode, null, `nginx exited: ${output}`);
    assert.ok(Date.now() < deadline, `nginx did not listen on ${port}: ${output}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { url: `http://127.0.0.1:${port}`, port, errorLog: () => readFileSync(join(dir, 'error.log'), 'utf8') };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
  });
}
