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
  const header = Buffer.alloc(MAX_HEADER);
  /** Header bytes collected of the frame that starts next, and how many it has. */
  let have = 0;
  let need = 2;
  /** Payload bytes of the current frame still to come. */
  let remaining = 0;
  let opcode = 0;
  let relaying = true;
  let closeRelayed = false;
  let onStopped: (() => void) | undefined;
  let waitingForDrain = false;

  const atBoundary = () => have === 0 && remaining === 0;

  function stopNow(): void {
    relaying = false;
    const stopped = onStopped!;
    onStopped = undefined;
    stopped();
  }

  function send(chunk: Buffer, start: number, end: number): void {
    if (end <= start || !to.writable) return;
    const written = to.write(start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end));
    if (!written && !waitingForDrain) {
      waitingForDrain = true;
      from.pause();
      to.once('drain', () => {
        waitingForDrain = false;
        from.resume();
      });
    }
  }

  /** `flush`: sends the chunk up to where the frame ended, so the close frame is out before onClose. */
  function frameEnded(flush: () => void): void {
    if (opcode !== OPCODE_CLOSE) return;
    if (relaying) {
      closeRelayed = true;
      flush();
    }
    events.onClose();
  }

  from.on('data', (chunk: Buffer) => {
    events.onActivity();
    let pos = 0;
    /** Up to here the chunk has been sent (while relaying) or dropped (after). */
    let flushed = 0;
    const flush = () => {
      if (relaying) send(chunk, flushed, pos);
      flushed = pos;
    };
    while (pos < chunk.length) {
      if (remaining > 0) {
        const take = Math.min(remaining, chunk.length - pos);
        pos += take;
        remaining -= take;
        if (remaining === 0) frameEnded(flush);
        continue;
      }
      if (have === 0 && relaying && onStopped !== undefined) {
        flush();
        stopNow();
      }
      if (have < 2) {
        const take = Math.min(2 - have, chunk.length - pos);
        chunk.copy(header, have, pos, pos + take);
        have += take;
        pos += take;
        if (have < 2) break;
        const len7 = header[1]! & 0x7f;
        need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (header[1]! & 0x80 ? 4 : 0);
      }
      if (have < need) {
        const take = Math.min(need - have, chunk.length - pos);
        chunk.copy(header, have, pos, pos + take);
        have += take;
        pos += take;
        if (have < need) break;
      }
      const len7 = header[1]! & 0x7f;
      remaining = len7 === 126 ? header.readUInt16BE(2) : len7 === 127 ? Number(header.readBigUInt64BE(2)) : len7;
      opcode = header[0]! & 0x0f;
      have = 0;
      need = 2;
      if (remaining === 0) frameEnded(flush);
    }
    flush();
    if (relaying && onStopped !== undefined && atBoundary()) stopNow();
  });
  from.on('end', () => {
    if (relaying && to.writable) to.end();
    events.onEnd();
  });
  // Paused by http-proxy-3's pipe being undone (websocket.ts): flowing from here on.
  from.resume();

  return {
    stop(stopped) {
      if (!relaying || onStopped !== undefined) return;
      onStopped = stopped;
      if (atBoundary()) stopNow();
    },
    get closeRelayed() {
      return closeRelayed;
    },
  };
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
