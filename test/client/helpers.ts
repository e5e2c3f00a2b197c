/**
 * Shared pieces of the client's tests: a gateway clock that follows real time (for the tests
 * where the client's own timers must meet the gateway's), access-log counting, and a fetch
 * wrapper that records every request the client sends.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ManualClock } from '../helpers/clock.js';
import { logLines, type TestGateway } from '../helpers/gateway.js';

/** The wall clock, for startGateway's `clock` option; it cannot be moved. */
export class RealClock extends ManualClock {
  override now(): number {
    return Date.now();
  }
  override advance(): void {
    throw new Error('a RealClock follows real time');
  }
}

/** A JWT-shaped token with these claims and no valid signature, for scripted servers: the client reads only its payload. */
export function unsignedJwt(claims: object): string {
  return `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;
}

export const ALICE_RECORD = '0x52908400098527886E0F7030069857D2E4169EE7';

/** Access-log lines of `path` (optionally with this status). */
export function accessLines(gw: TestGateway, path: string, status?: number): Record<string, unknown>[] {
  return logLines(gw).filter((l) => l.msg === 'request' && l.path === path && (status === undefined || l.status === status));
}

/** Every access-log line with this status. */
export function statusLines(gw: TestGateway, status: number): Record<string, unknown>[] {
  return logLines(gw).filter((l) => l.msg === 'request' && l.status === status);
}

/** Lets the gateway write the access-log lines of answers already sent (written after the answer). */
export function settle(): Promise<void> {
  return sleep(50);
}

export interface Sent {
  method: string;
  url: string;
  headers: Headers;
  body: string;
}

/** A fetch that records what it sends (bodies read from a clone) and then sends it. */
export function recordingFetch(): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const recording: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    const copy = request.clone();
    const record: Sent = { method: request.method, url: request.url, headers: new Headers(request.headers), body: '' };
    sent.push(record);
    if (copy.body !== null) record.body = await copy.text();
    return fetch(request);
  };
  return { fetch: recording, sent };
}
