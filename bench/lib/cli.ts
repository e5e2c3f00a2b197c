/** Option checks shared by the benchmarks' command lines. */

/** Prints `message` as `<name>: message` and exits 2, as for any usage error. */
export function usage(name: string, message: string): never {
  process.stderr.write(`${name}: ${message}\n`);
  process.exit(2);
}

/** The option as an integer within [min, max], or a usage error. */
export function boundedInt(bench: string, name: string, text: string | undefined, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) usage(bench, `--${name} must be an integer from ${min} to ${max}`);
  return n;
}
