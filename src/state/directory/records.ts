/**
 * Records as stores other than the data file hold them (Redis values, an upstream's JSON), read
 * into the Directory's types. Stores disagree on representation: ids as strings, `public` as a
 * boolean, 0/1 or "true", times as epoch ms, ISO 8601 or the interface's own
 * `YYYY-MM-DD HH:MM:SS`. Everything that means one value unambiguously is accepted; anything
 * else is a BadStoreData naming the field (never its value, which may be anybody's data), so
 * a malformed record is reported instead of passed on. Fields the gateway does not use are
 * ignored: an upstream may send more than the interface shows.
 */
import { z } from 'zod';
import { BadStoreData } from '../../errors/errors.js';
import { createTimestampParser } from '../../util/time.js';
import type { Role, RolePage, SignRecord } from './store.js';

const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
/** A non-negative integer, or its decimal digits (no sign, no leading zeros, no exponent). */
const integer = z.union([count, z.string().regex(/^(?:0|[1-9][0-9]{0,15})$/).transform(Number).pipe(count)], {
  error: 'expected a whole number from 0, or its decimal digits',
});
const flag = z.union([
  z.boolean(),
  z.literal([0, 1]).transform((n) => n === 1),
  z.enum(['0', '1', 'true', 'false']).transform((s) => s === '1' || s === 'true'),
], { error: 'expected true or false, 0 or 1, "0" or "1", "true" or "false"' });
const text = (min: number, max: number) => z.union([z.string(), z.number().transform(String)], { error: 'expected text' })
  .pipe(z.string().min(min).max(max));

const roleSchema = z.object({
  id: integer,
  slug: text(1, 256),
  name: text(1, 256),
  description: z.string().max(4096).nullish().transform((d) => d ?? ''),
  public: flag,
});

export interface RecordReader {
  role(raw: unknown, where: string): Role;
  /** A page: `items` and `total`; an upstream's `pages` is ignored (the route derives it from total). */
  rolePage(raw: unknown, where: string): RolePage;
  signRecord(raw: unknown, address: string, where: string): SignRecord;
}

/** `timeZone`: the zone of times written as `YYYY-MM-DD HH:MM:SS`. */
export function createRecordReader(timeZone: string): RecordReader {
  const parseLocal = createTimestampParser(timeZone);
  const time = z.union([
    count,
    z.iso.datetime({ offset: true }).transform((s) => Date.parse(s)),
    z.string().transform((s, ctx) => {
      const epochMs = parseLocal(s);
      if (epochMs === undefined) {
        ctx.addIssue({ code: 'custom', message: 'expected epoch ms, ISO 8601 with an offset, or YYYY-MM-DD HH:MM:SS' });
        return z.NEVER;
      }
      return epochMs;
    }),
  ], { error: 'expected epoch ms, ISO 8601 with an offset, or YYYY-MM-DD HH:MM:SS' });
  const signSchema = z.object({ signedNonce: integer, signedAt: time, signedExpiredAt: time });
  const pageSchema = z.object({ items: z.array(roleSchema).max(10_000), total: integer });

  return {
    role: (raw, where) => parse(roleSchema, raw, where),
    rolePage: (raw, where) => {
      const page = parse(pageSchema, raw, where);
      if (page.total < page.items.length) throw new BadStoreData(new Error(`${where}: total is less than the items given`));
      return page;
    },
    signRecord: (raw, address, where) => ({ address, ...parse(signSchema, raw, where) }),
  };
}

function parse<T>(schema: z.ZodType<T>, raw: unknown, where: string): T {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  // Paths and the expectation only: the offending value stays out of the log.
  const problems = result.error.issues.map((i) => `${i.path.join('.') || '(record)'}: ${i.message}`);
  throw new BadStoreData(new Error(`${where}: ${problems.join('; ')}`));
}
