/** Option checks shared by the benchmarks' command lines. */
import { parseArgs } from 'node:util';

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

/** Defaults of the options every benchmark takes. */
export interface RunDefaults {
  rounds: number;
  seconds: number;
  connections: number;
}

type ExtraOptions = Record<string, { type: 'string' | 'boolean'; default: string | boolean }>;

/**
 * The command line of a benchmark: the options they all take (rounds, seconds, warm-up,
 * connections, quiet-wait, runtime, profile, no-report), checked, plus its own `extra` ones,
 * returned as given.
 */
export function parseRunOptions<E extends ExtraOptions>(name: string, defaults: RunDefaults, extra: E) {
  const { values: parsed } = parseArgs({
    options: {
      rounds: { type: 'string', default: String(defaults.rounds) },
      seconds: { type: 'string', default: String(defaults.seconds) },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string', default: String(defaults.connections) },
      runtime: { type: 'string', default: 'dist' },
      profile: { type: 'boolean', default: false },
      'no-report': { type: 'boolean', default: false },
      'quiet-wait': { type: 'string', default: '120' },
      ...extra,
    },
  });
  const values = parsed as Record<string, string | boolean | undefined>;
  if (values.runtime !== 'dist' && values.runtime !== 'tsx') usage(name, '--runtime is dist or tsx');
  return {
    rounds: boundedInt(name, 'rounds', values.rounds as string, 1, 20),
    seconds: boundedInt(name, 'seconds', values.seconds as string, 1, 30),
    warmup: boundedInt(name, 'warmup', values.warmup as string, 0, 30),
    connections: boundedInt(name, 'connections', values.connections as string, 1, 512),
    quietWait: boundedInt(name, 'quiet-wait', values['quiet-wait'] as string, 0, 600),
    runtime: values.runtime as 'dist' | 'tsx',
    profile: values.profile === true,
    noReport: values['no-report'] === true,
    extra: values as Record<keyof E, string | boolean>,
  };
}
