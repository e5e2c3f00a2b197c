/**
 * Node keeps only the first of some repeated headers (Host, Authorization, …) in
 * `req.headers`; the raw list still shows every copy, which is how ambiguity is detected.
 */
export function countHeader(rawHeaders: readonly string[], lowerName: string): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) count++;
  }
  return count;
}
