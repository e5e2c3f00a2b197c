/**
 * src/proxy/outgoing.ts owns three helpers of http-proxy-3's internals (the package does not
 * export them): held here to the library's own functions, which the test may still import,
 * over generated paths and queries and on sockets in each state.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import fc from 'fast-check';
import { outgoingPath, setupConnectTimeout, urlJoin } from '../../src/proxy/outgoing.js';

interface LibraryCommon {
  urlJoin(...segments: string[]): string;
  toURL(url: string): URL;
  setupConnectTimeout(socket: Socket, timeoutMs: number | undefined): void;
}
const library = createRequire(import.meta.url)('http-proxy-3/dist/lib/http-proxy/common.js') as LibraryCommon;

/** Paths as a target or a client could write them: slashes in runs, dots, queries, escapes. */
const segment = fc.array(fc.constantFrom('/', '//', 'a', 'b.c', '..', '.', '?', 'q=1', '&', '%2F', 'é', ' ', '#', ''), { maxLength: 8 }).map((parts) => parts.join(''));

test('urlJoin joins as http-proxy-3 does, slashes and queries included', () => {
  for (const [a, b] of [['/', '/x'], ['/api/', '/v1?a=1'], ['', ''], ['//x', '///y'], ['/a?x=1', '/b?y=2'], ['?', '?'], ['/a', 'b']]) {
    assert.equal(urlJoin(a!, b!), library.urlJoin(a!, b!), `${a} + ${b}`);
  }
  fc.assert(fc.property(segment, segment, (a, b) => urlJoin(a, b) === library.urlJoin(a, b)), { numRuns: 2000 });
});

test('outgoingPath reads a target path as http-proxy-3 does', () => {
  const libraryPath = (text: string) => {
    if (text === '' || text.startsWith('?')) return text;
    const url = library.toURL(text);
    return `${url.pathname}${url.search}`;
  };
  for (const text of ['', '?a=1', '/', '//host/x', '/a/../b', '/a/./b?c=%20', '/é?x=é']) assert.equal(outgoingPath(text), libraryPath(text), text);
  // Both refuse what WHATWG URL cannot parse (a target's path from config never is such).
  const outcome = (read: (text: string) => string, text: string) => {
    try {
      return read(text);
    } catch (err) {
      return `threw ${(err as Error).name}`;
    }
  };
  fc.assert(fc.property(segment, (text) => outcome(outgoingPath, text) === outcome(libraryPath, text)), { numRuns: 2000 });
});

/** A socket in the state the helpers read: connecting or not; destroy() recorded. */
class FakeSocket extends EventEmitter {
  readonly connecting: boolean;
  destroyedWith: Promise<Error>;
  #destroyed!: (err: Error) => void;
  constructor(connecting: boolean) {
    super();
    this.connecting = connecting;
    this.destroyedWith = new Promise((resolve) => { this.#destroyed = resolve; });
  }
  destroy(err: Error): void {
    this.#destroyed(err);
    this.emit('close');
  }
}

const ARMS = { ours: setupConnectTimeout, library: library.setupConnectTimeout } as const;

test('the connect timeout destroys a socket still connecting with ECONNECT_TIMEOUT, as the library does', async () => {
  for (const [name, arm] of Object.entries(ARMS)) {
    const socket = new FakeSocket(true);
    arm(socket as unknown as Socket, 1);
    const err = await socket.destroyedWith as NodeJS.ErrnoException;
    assert.equal(err.code, 'ECONNECT_TIMEOUT', name);
    assert.equal(err.message, 'ECONNECT_TIMEOUT', name);
    assert.deepEqual(['connect', 'error', 'close'].map((event) => socket.listenerCount(event)), [0, 0, 0], `${name}: disarmed`);
  }
});

test('connect, error or close disarm it; a connected socket or no timeout arms nothing', () => {
  for (const [name, arm] of Object.entries(ARMS)) {
    for (const event of ['connect', 'error', 'close']) {
      const socket = new FakeSocket(true);
      arm(socket as unknown as Socket, 60_000);
      assert.equal(socket.listenerCount(event), 1, `${name}: armed`);
      socket.emit(event, new Error('x'));
      assert.deepEqual(['connect', 'error', 'close'].map((e) => socket.listenerCount(e)), [0, 0, 0], `${name}: ${event} disarms`);
    }
    for (const [connecting, timeout] of [[false, 1000], [true, 0], [true, undefined]] as const) {
      const socket = new FakeSocket(connecting);
      arm(socket as unknown as Socket, timeout);
      assert.equal(socket.listenerCount('close'), 0, `${name}: connecting ${connecting}, timeout ${timeout}`);
    }
  }
});
