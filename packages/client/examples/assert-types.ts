/**
 * Compile-time assertions for the examples: `tsc -p tsconfig.examples.json` fails when a type
 * is not exactly what the example says. Nothing here runs.
 */

/** true when A and B are the same type (not merely assignable either way). */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;

/** Compiles only with `true`: `type _ = Expect<Equal<X, Y>>`. */
export type Expect<T extends true> = T;

/**
 * Compiles only when `value` is assignable to T, and gives it back: `expectType<number>(role.id)`.
 * For "exactly this type" use `Expect<Equal<typeof x, T>>`.
 */
export function expectType<T>(value: T): T {
  return value;
}
