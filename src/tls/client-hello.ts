/**
 * Reads the server name (SNI, RFC 6066 §3) and the ALPN protocols (RFC 7301 §3.1) a TLS
 * ClientHello offers, from the first bytes of a connection, before any TLS library sees them:
 * the main listener hands a connection offering `acme-tls/1` to the TLS-ALPN-01 responder
 * (alpn-challenge.ts), everything else to the HTTPS server unchanged. It reads one handshake
 * record and nothing else; bytes that are not one whole ClientHello read as undefined (and the
 * connection then goes where any other goes). Every length is checked against the bytes there.
 * test/unit/client-hello.test.ts holds it against Node's own ClientHellos and cut or altered ones.
 */

export interface ClientHello {
  /** The host_name the client asked for, lower-case; undefined when it asked for none. */
  serverName: string | undefined;
  /** The ALPN protocols offered, in the client's order (empty without the extension). */
  protocols: string[];
}

const HANDSHAKE = 0x16;
const CLIENT_HELLO = 0x01;
const SERVER_NAME = 0x0000;
const ALPN = 0x0010;
/** A TLS record's header: type, version, length. */
export const RECORD_HEADER_BYTES = 5;
/** A TLSPlaintext fragment is at most 2^14 bytes (RFC 8446 §5.1). */
export const MAX_RECORD_BYTES = RECORD_HEADER_BYTES + 16_384;

/**
 * How many bytes the first record needs in all: undefined while fewer than a header have
 * come, 0 when the bytes are no TLS handshake record (nothing more to wait for).
 */
export function recordLength(bytes: Buffer): number | undefined {
  if (bytes.length < RECORD_HEADER_BYTES) return bytes.length > 0 && bytes[0] !== HANDSHAKE ? 0 : undefined;
  if (bytes[0] !== HANDSHAKE || bytes[1] !== 3) return 0;
  const length = RECORD_HEADER_BYTES + bytes.readUInt16BE(3);
  return length > MAX_RECORD_BYTES ? 0 : length;
}

/** A cursor that refuses to read past its end (undefined from then on). */
class Reader {
  #bytes: Buffer;
  #at = 0;
  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }
  get isDone(): boolean {
    return this.#at >= this.#bytes.length;
  }
  u8(): number | undefined {
    return this.#at + 1 <= this.#bytes.length ? this.#bytes[this.#at++] : undefined;
  }
  u16(): number | undefined {
    if (this.#at + 2 > this.#bytes.length) return undefined;
    const value = this.#bytes.readUInt16BE(this.#at);
    this.#at += 2;
    return value;
  }
  u24(): number | undefined {
    if (this.#at + 3 > this.#bytes.length) return undefined;
    const value = this.#bytes.readUIntBE(this.#at, 3);
    this.#at += 3;
    return value;
  }
  take(length: number | undefined): Buffer | undefined {
    if (length === undefined || this.#at + length > this.#bytes.length) return undefined;
    const part = this.#bytes.subarray(this.#at, this.#at + length);
    this.#at += length;
    return part;
  }
}

/** The ClientHello in `bytes` (the connection's first bytes), or undefined if they are not one whole. */
export function readClientHello(bytes: Buffer): ClientHello | undefined {
  const length = recordLength(bytes);
  if (length === undefined || length === 0 || bytes.length < length) return undefined;
  const record = new Reader(bytes.subarray(RECORD_HEADER_BYTES, length));
  if (record.u8() !== CLIENT_HELLO) return undefined;
  const body = record.take(record.u24());
  if (body === undefined) return undefined;
  const hello = new Reader(body);
  // Legacy version (2) and random (32), then the session id, cipher suites and compression methods.
  if (hello.take(34) === undefined || hello.take(hello.u8()) === undefined || hello.take(hello.u16()) === undefined || hello.take(hello.u8()) === undefined) return undefined;
  if (hello.isDone) return { serverName: undefined, protocols: [] };
  const extensions = hello.take(hello.u16());
  return extensions === undefined ? undefined : readExtensions(new Reader(extensions));
}

function readExtensions(extensions: Reader): ClientHello | undefined {
  const found: ClientHello = { serverName: undefined, protocols: [] };
  while (!extensions.isDone) {
    const type = extensions.u16();
    const data = extensions.take(extensions.u16());
    if (type === undefined || data === undefined) return undefined;
    if (type === SERVER_NAME) {
      const serverName = readServerName(new Reader(data));
      if (serverName === null) return undefined;
      found.serverName = serverName;
    } else if (type === ALPN) {
      const protocols = readProtocols(new Reader(data));
      if (protocols === undefined) return undefined;
      found.protocols = protocols;
    }
  }
  return found;
}

/** The host_name entry of a server_name extension; null when the extension is malformed. */
function readServerName(extension: Reader): string | undefined | null {
  const list = extension.take(extension.u16());
  if (list === undefined) return null;
  const names = new Reader(list);
  while (!names.isDone) {
    const type = names.u8();
    const name = names.take(names.u16());
    if (type === undefined || name === undefined) return null;
    if (type === 0) return name.toString('latin1').toLowerCase();
  }
  return undefined;
}

function readProtocols(extension: Reader): string[] | undefined {
  const list = extension.take(extension.u16());
  if (list === undefined) return undefined;
  const entries = new Reader(list);
  const protocols: string[] = [];
  while (!entries.isDone) {
    const protocol = entries.take(entries.u8());
    if (protocol === undefined) return undefined;
    protocols.push(protocol.toString('latin1'));
  }
  return protocols;
}
