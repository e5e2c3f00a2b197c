/**
 * Raw HTTP/2 frames (RFC 9113 §4) for the attack tests: what no well-behaved client sends, so
 * no client library will. Header blocks use HPACK's "literal without indexing, new name" form
 * only (RFC 7541 §6.2.2): no table, no Huffman, so each block stands alone.
 */
import { connect, type Socket } from 'node:net';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, CONTINUATION: 9 } as const;
export const FLAG = { END_STREAM: 0x1, END_HEADERS: 0x4 } as const;

export function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

export function settingsFrame(entries: ReadonlyArray<readonly [number, number]>): Buffer {
  const payload = Buffer.alloc(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FRAME.SETTINGS, 0, 0, payload);
}

/** An HPACK integer with an N-bit prefix (RFC 7541 §5.1), the prefix's other bits zero. */
function integer(value: number, prefixBits: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([value]);
  const bytes = [max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

function literal(text: string): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  return Buffer.concat([integer(bytes.length, 7), bytes]);
}

export function headerBlock(fields: ReadonlyArray<readonly [string, string]>): Buffer {
  return Buffer.concat(fields.flatMap(([name, value]) => [Buffer.from([0]), literal(name), literal(value)]));
}

export interface Attack {
  /** Every byte the server sent. */
  received: Buffer;
  /** The server ended the connection (rather than the attack's own bound). */
  closedByServer: boolean;
  /** The first GOAWAY the server sent, if any. */
  goaway: { lastStreamId: number; code: number } | undefined;
}

export interface ReceivedFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** The whole frames among `bytes`, a server's frames from its first byte on. */
export function framesOf(bytes: Buffer): ReceivedFrame[] {
  const frames: ReceivedFrame[] = [];
  let at = 0;
  while (at + 9 <= bytes.length) {
    const length = bytes.readUIntBE(at, 3);
    if (at + 9 + length > bytes.length) break;
    frames.push({ type: bytes.readUInt8(at + 3), flags: bytes.readUInt8(at + 4), streamId: bytes.readUInt32BE(at + 5) & 0x7fffffff, payload: bytes.subarray(at + 9, at + 9 + length) });
    at += 9 + length;
  }
  return frames;
}

function findGoaway(bytes: Buffer): Attack['goaway'] {
  const goaway = framesOf(bytes).find((f) => f.type === FRAME.GOAWAY && f.payload.length >= 8);
  return goaway === undefined ? undefined : { lastStreamId: goaway.payload.readUInt32BE(0) & 0x7fffffff, code: goaway.payload.readUInt32BE(4) };
}

/**
 * Connects to 127.0.0.1:`port`, runs `send`, and resolves once the server closes the
 * connection, once what it sent satisfies `until`, or after `limitMs` (in both of those
 * closedByServer is false).
 */
export function attack(port: number, send: (socket: Socket) => void, limitMs = 10_000, until?: (received: Buffer) => boolean): Promise<Attack> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = connect(port, '127.0.0.1', () => send(socket));
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const received = Buffer.concat(chunks);
      resolve({ received, closedByServer, goaway: received.subarray(0, 3).toString('latin1') === 'HTT' ? undefined : findGoaway(received) });
    };
    const timer = setTimeout(() => finish(false), limitMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (until?.(Buffer.concat(chunks)) === true) finish(false);
    });
    socket.on('end', () => finish(true));
    // A reset (the server cut while data was in flight) is the server closing, too.
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
  });
}
