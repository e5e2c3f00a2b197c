/**
 * The frame-boundary relay (src/proxy/ws-frames.ts) against ws's own framing, as a parity
 * test: streams of frames made by ws's Sender (every length encoding, masked and not, control
 * frames between fragments) are fed through the relay in chunks cut at random places (headers
 * split too), the relay is stopped at a random byte, and what came out, with the gateway's
 * close frame after it, must be read by ws's Receiver as the first whole frames and then that
 * close: nothing cut in two, nothing after.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import * as ws from 'ws';
import { closeFrame, relayFrames } from '../../src/proxy/ws-frames.js';

// ws exports these at run time; its type package does not declare them.
interface FrameOptions { fin: boolean; rsv1: boolean; opcode: number; mask: boolean; readOnly: boolean }
interface WsReceiver extends NodeJS.WritableStream {
  on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'conclude', listener: (code: number, reason: Buffer) => void): this;
  on(event: 'ping' | 'pong', listener: (data: Buffer) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
}
const { Receiver, Sender } = ws as unknown as {
  Receiver: new (options: { isServer: boolean; skipUTF8Validation?: boolean }) => WsReceiver;
  Sender: { frame(data: Buffer, options: FrameOptions): Buffer[] };
};

/** A small seeded generator: each case is reproducible from its number. */
function random(seed: number): (n: number) => number {
  let state = seed * 2654435761 % 2 ** 32 || 1;
  return (n: number) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state % n;
  };
}

interface Frame { bytes: Buffer; opcode: number; payload: Buffer; fin: boolean }

/** Frames as ws sends them: data messages (some fragmented, with a ping between fragments), some pings, maybe a close. */
function makeFrames(pick: (n: number) => number, masked: boolean): Frame[] {
  const frames: Frame[] = [];
  const add = (opcode: number, payload: Buffer, fin = true) => {
    frames.push({ bytes: Buffer.concat(Sender.frame(payload, { fin, rsv1: false, opcode, mask: masked, readOnly: true })), opcode, payload, fin });
  };
  const lengths = [0, 1, 125, 126, 127, 1000, 65_535, 65_536, 70_000];
  const count = 1 + pick(8);
  for (let i = 0; i < count; i++) {
    const payload = Buffer.alloc(lengths[pick(lengths.length)]!, i + 1);
    if (pick(4) === 0 && payload.length > 1) {
      // Fragmented: first part, a ping between the fragments (§5.4), the rest.
      const half = payload.length >> 1;
      add(0x2, payload.subarray(0, half), false);
      add(0x9, Buffer.from('p'));
      add(0x0, payload.subarray(half), true);
    } else if (pick(5) === 0) {
      add(0x9, Buffer.alloc(pick(126), 7));
    } else {
      add(0x2, payload);
    }
  }
  if (pick(2) === 0) {
    const reason = Buffer.from('bye');
    const body = Buffer.alloc(2 + reason.length);
    body.writeUInt16BE(1000);
    reason.copy(body, 2);
    add(0x8, body);
  }
  return frames;
}

/** Writes `bytes` into `stream` in chunks of random size (1 byte upwards), letting each be read. */
async function writeInChunks(stream: PassThrough, bytes: Buffer, pick: (n: number) => number): Promise<void> {
  let pos = 0;
  while (pos < bytes.length) {
    const size = 1 + pick(pick(3) === 0 ? 20 : 40_000);
    stream.write(bytes.subarray(pos, pos + size));
    pos += size;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test('the relay stops on a frame boundary, whatever the chunks, and its close frame reads as ws reads one', async () => {
  for (let seed = 1; seed <= 150; seed++) {
    const pick = random(seed);
    const masked = seed % 2 === 0;
    const frames = makeFrames(pick, masked);
    const stream = Buffer.concat(frames.map((f) => f.bytes));
    const stopAt = pick(stream.length + 1);
    const from = new PassThrough();
    const to = new PassThrough();
    const out: Buffer[] = [];
    to.on('data', (chunk: Buffer) => out.push(chunk));
    let closes = 0;
    let stoppedAfter = -1;
    const relay = relayFrames(from, to, { onActivity() {}, onClose() { closes++; }, onEnd() {} });

    await writeInChunks(from, stream.subarray(0, stopAt), pick);
    relay.stop(() => {
      stoppedAfter = Buffer.concat(out).length;
      to.write(closeFrame(1001, 'gateway shutting down', masked));
    });
    await writeInChunks(from, stream.subarray(stopAt), pick);
    await new Promise((resolve) => setImmediate(resolve));

    const label = `seed ${seed} (${masked ? 'masked' : 'unmasked'}, ${frames.length} frames, stopped at byte ${stopAt} of ${stream.length})`;
    // The boundary it should have stopped at: the end of the first frame not wholly written before stop().
    const ends = frames.map((_, i) => frames.slice(0, i + 1).reduce((n, f) => n + f.bytes.length, 0));
    const boundary = [0, ...ends].find((end) => end >= stopAt)!;
    assert.equal(stoppedAfter, boundary, `${label}: stopped at the next boundary`);
    const relayedFrames = frames.filter((_, i) => ends[i]! <= boundary);
    const hasClose = frames.some((f) => f.opcode === 0x8);
    assert.equal(closes, hasClose ? 1 : 0, `${label}: a close frame is reported whether relayed or dropped`);
    assert.equal(relay.closeRelayed, relayedFrames.some((f) => f.opcode === 0x8), `${label}: closeRelayed`);

    // What came out, read by ws: the relayed frames' messages, then the gateway's close.
    const receiver = new Receiver({ isServer: masked, skipUTF8Validation: true });
    const seen: string[] = [];
    receiver.on('message', (data) => seen.push(`message ${data.length}`));
    receiver.on('ping', (data) => seen.push(`ping ${data.length}`));
    receiver.on('conclude', (code, reason) => seen.push(`close ${code} ${reason.toString()}`));
    receiver.on('error', (err) => seen.push(`error ${err.message}`));
    const expected: string[] = [];
    let message = 0;
    for (const f of relayedFrames) {
      if (f.opcode === 0x9) expected.push(`ping ${f.payload.length}`);
      else if (f.opcode === 0x8) expected.push('close 1000 bye');
      else {
        message += f.payload.length;
        if (f.fin) {
          expected.push(`message ${message}`);
          message = 0;
        }
      }
    }
    // ws stops reading at the first close frame: the gateway's is read only if none came before it.
    if (!relay.closeRelayed) expected.push('close 1001 gateway shutting down');
    receiver.write(Buffer.concat(out));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(seen, expected, label);
  }
});

test('closeFrame: unmasked towards a client, masked with a fresh key towards a backend', () => {
  const reason = 'token expired';
  const plain = closeFrame(4001, reason, false);
  assert.deepEqual([...plain.subarray(0, 4)], [0x88, 2 + reason.length, 0x0f, 0xa1]);
  assert.equal(plain.subarray(4).toString(), reason);
  const masked = [closeFrame(4001, reason, true), closeFrame(4001, reason, true)];
  assert.deepEqual([masked[0]![0], masked[0]![1]], [0x88, 0x80 | (2 + reason.length)]);
  assert.notDeepEqual(masked[0]!.subarray(2, 6), masked[1]!.subarray(2, 6), 'a key of its own each time');
  for (const frame of masked) {
    const key = frame.subarray(2, 6);
    const body = Buffer.from(frame.subarray(6).map((b, i) => b ^ key[i % 4]!));
    assert.deepEqual([body.readUInt16BE(0), body.subarray(2).toString()], [4001, reason]);
  }
  // A reason longer than a control frame allows is shortened, never an invalid frame.
  assert.equal(closeFrame(1001, 'x'.repeat(300), false)[1], 125);
});
