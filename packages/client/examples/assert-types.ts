/**
 * Compile-time assertions for the examples and type tests (`npm run typecheck` compiles them
 * with tsconfig.examples.json): a type that changes fails the type check, nothing at run time.
 *
 *     type _ = Expect<Equal<typeof page.items, Account[]>>;
 *     expectType<Account[]>()(page.items);
 *     // @ts-expect-error: a Key is not an Account
 *     expectType<Account>()(key);
 */

/** `true` when A and B are the same type (not merely assignable either way; `any` is only equal to `any`). */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;

/** Fails to compile unless T is `true`: `type _ = Expect<Equal<X, Y>>`. */
export type Expect<T extends true> = T;

/** The keys of T that may be left out. */
export type OptionalKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? K : never }[keyof T];

/** The keys of T that must be given. */
export type RequiredKeys<T> = Exclude<keyof T, OptionalKeys<T>>;

/**
 * `expectType<T>()(value)` compiles only when the value's type is exactly T. (Two calls, since
 * TypeScript cannot infer one type argument while being given another.)
 */
export function expectType<Expected>(): <Actual>(value: Actual, ...exactly: Equal<Actual, Expected> extends true ? [] : [never]) => void {
  return () => undefined;
}

/**
 * Compiles only when `value` is assignable to T, and gives it back: `expectAssignable<number>(role.id)`.
 * For "exactly this type" use `expectType<T>()(value)` or `Expect<Equal<typeof x, T>>`.
 */
export function expectAssignable<T>(value: T): T {
  return value;
}
