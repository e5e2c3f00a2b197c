/**
 * The gateway never receives an API secret: sign-in and reset send the lowercase hex SHA-256 of
 * its UTF-8 bytes. Web Crypto does the hashing, so the same code runs in Node 20+ and browsers.
 */
export async function sha256Hex(text: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}
