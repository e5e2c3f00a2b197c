/**
 * The bytes of an upgraded WebSocket, relayed one way (client to backend, or back) with the
 * frame boundaries tracked, so that the gateway can put a close frame of its own between two
 * frames (RFC 6455 §5.5.1) instead of cutting TCP. http-proxy-3 pipes the two sockets blindly,
 * and a close frame written into the middle of a frame would corrupt the stream.
 *
 * Only frame headers are read (§5.2: two bytes, the extended length, the mask key): payloads
 * are never unmasked, copied or inflated, and extensions (permessage-deflate) change nothing
 * here, since control frames are never compressed and may come between the fragments of a
 * message (§5.4). `ws`, which the tests use, parses whole messages (unmasking and buffering
 * each): far more than knowing where a frame ends, and it is no runtime dependency.
 * Held by test/proxy/websocket.test.ts and test/ops/drain.test.ts.
 */
import { randomFillSync } from 'node:crypto';
import type { Duplex } from 'node:stream';

const OPCODE_CLOSE = 0x8;
/** A frame header is at most 14 bytes: 2, an 8-byte length, a 4-byte mask key. */
const MAX_HEADER = 14;

export interface FrameRelay {
  /**
   * Stops relaying at the next frame boundary (at once when between frames) and then calls
   * `stopped`. Whatever comes afterwards is read and dropped; a close frame among it is still
   * reported to onClose. Called again, it does nothing.
   */
  stop(stopped: () => void): void;
  /** A close frame went through this way (the peers' own close handshake has begun). */
  readonly closeRelayed: boolean;
}

export interface RelayEvents {
  /** Some bytes arrived (the idle timer's signal). */
  onActivity(): void;
  /** A whole close frame arrived from `from`, relayed or dropped. */
  onClose(): void;
  /** `from` ended its side (TCP FIN). */
  onEnd(): void;
}

/** Relays `from` to `to` (as a pipe would, with backpressure and the end passed on) until stopped. */
export function relayFrames(from: Duplex, to: Duplex, events: RelayEvents): FrameRelay {
  const relay = new Relay(from, to, events);
  from.on('data', (chunk: Buffer) => relay.take(chunk));
  from.on('end', () => relay.ended());
  // Paused by http-proxy-3's pipe being undone (websocket.ts): flowing from here on.
  from.resume();
  return relay;
}

/**
 * One direction's relay. Each chunk is walked frame by frame: header bytes are collected (a
 * header may be split over chunks), payload bytes counted off; the bytes walked are sent on
 * while relaying (in one write per chunk unless a frame ends in it) and dropped after the stop.
 */
class Relay implements FrameRelay {
  readonly #from: Duplex;
  readonly #to: Duplex;
  readonly #events: RelayEvents;
  readonly #header = Buffer.alloc(MAX_HEADER);
  /** Header bytes collected of the frame that starts next, and how many it has. */
  #have = 0;
  #need = 2;
  /** Payload bytes of the current frame still to come. */
  #remaining = 0;
  #opcode = 0;
  #relaying = true;
  #closeRelayed = false;
  #onStopped: (() => void) | undefined;
  #waitingForDrain = false;
  /** The chunk being walked, how far, and up to where it has been sent (while relaying) or dropped (after). */
  #chunk: Buffer = Buffer.alloc(0);
  #pos = 0;
  #flushed = 0;

  constructor(from: Duplex, to: Duplex, events: RelayEvents) {
    this.#from = from;
    this.#to = to;
    this.#events = events;
  }

  stop(stopped: () => void): void {
    if (!this.#relaying || this.#onStopped !== undefined) return;
    this.#onStopped = stopped;
    if (this.#atBoundary()) this.#stopNow();
  }

  get closeRelayed(): boolean {
    return this.#closeRelayed;
  }

  take(chunk: Buffer): void {
    this.#events.onActivity();
    this.#chunk = chunk;
    this.#pos = 0;
    this.#flushed = 0;
    while (this.#pos < chunk.length) {
      if (this.#remaining > 0) {
        this.#takePayload();
        continue;
      }
      if (this.#have === 0 && this.#relaying && this.#onStopped !== undefined) {
        this.#flush();
        this.#stopNow();
      }
      if (!this.#takeHeader()) break;
    }
    this.#flush();
    if (this.#relaying && this.#onStopped !== undefined && this.#atBoundary()) this.#stopNow();
  }

  ended(): void {
    if (this.#relaying && this.#to.writable) this.#to.end();
    this.#events.onEnd();
  }

  #takePayload(): void {
    const take = Math.min(this.#remaining, this.#chunk.length - this.#pos);
    this.#pos += take;
    this.#remaining -= take;
    if (this.#remaining === 0) this.#frameEnded();
  }

  /** Collects the next frame's header (§5.2); false when the chunk ends before it is whole. */
  #takeHeader(): boolean {
    const header = this.#header;
    if (this.#have < 2) {
      if (!this.#collect(2)) return false;
      const len7 = header[1]! & 0x7f;
      this.#need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (header[1]! & 0x80 ? 4 : 0);
    }
    if (!this.#collect(this.#need)) return false;
    const len7 = header[1]! & 0x7f;
    this.#remaining = len7 === 126 ? header.readUInt16BE(2) : len7 === 127 ? Number(header.readBigUInt64BE(2)) : len7;
    this.#opcode = header[0]! & 0x0f;
    this.#have = 0;
    this.#need = 2;
    if (this.#remaining === 0) this.#frameEnded();
    return true;
  }

  /** Copies header bytes from the chunk until there are `upTo`; whether there are. */
  #collect(upTo: number): boolean {
    const take = Math.max(0, Math.min(upTo - this.#have, this.#chunk.length - this.#pos));
    this.#chunk.copy(this.#header, this.#have, this.#pos, this.#pos + take);
    this.#have += take;
    this.#pos += take;
    return this.#have >= upTo;
  }

  /** A close frame ended: sent up to its end first, so it is out before onClose. */
  #frameEnded(): void {
    if (this.#opcode !== OPCODE_CLOSE) return;
    if (this.#relaying) {
      this.#closeRelayed = true;
      this.#flush();
    }
    this.#events.onClose();
  }

  #flush(): void {
    if (this.#relaying) this.#send(this.#flushed, this.#pos);
    this.#flushed = this.#pos;
  }

  #send(start: number, end: number): void {
    const chunk = this.#chunk;
    const to = this.#to;
    if (end <= start || !to.writable) return;
    const written = to.write(start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end));
    if (!written && !this.#waitingForDrain) {
      this.#waitingForDrain = true;
      this.#from.pause();
      to.once('drain', () => {
        this.#waitingForDrain = false;
        this.#from.resume();
      });
    }
  }

  #atBoundary(): boolean {
    return this.#have === 0 && this.#remaining === 0;
  }

  #stopNow(): void {
    this.#relaying = false;
    const stopped = this.#onStopped!;
    this.#onStopped = undefined;
    stopped();
  }
}

/**
 * A close frame (§5.5.1) with `code` and a short `reason` (at most 123 bytes of UTF-8). Frames
 * a client sends must be masked (§5.3), so the one towards the backend is, with a fresh key.
 */
export function closeFrame(code: number, reason: string, masked: boolean): Buffer {
  const text = Buffer.from(reason, 'utf8').subarray(0, 123);
  const length = 2 + text.length;
  const frame = Buffer.alloc(2 + (masked ? 4 : 0) + length);
  frame[0] = 0x80 | OPCODE_CLOSE;
  frame[1] = (masked ? 0x80 : 0) | length;
  let offset = 2;
  const key = Buffer.alloc(4);
  if (masked) {
    randomFillSync(key);
    key.copy(frame, 2);
    offset = 6;
  }
  frame.writeUInt16BE(code, offset);
  text.copy(frame, offset + 2);
  if (masked) for (let i = 0; i < length; i++) frame[offset + i] = frame[offset + i]! ^ key[i % 4]!;
  return frame;
}
