/**
 * The repository's Dockerfile read as data, for the tests that reproduce the image on a machine
 * without a container engine (test/ops/image.test.ts) and check that it names only files that
 * exist (test/ops/compose.test.ts). Only what this Dockerfile uses is understood: FROM … AS,
 * WORKDIR, COPY [--from], RUN, ENV, USER, HEALTHCHECK … CMD and CMD in exec (JSON) form; an
 * instruction of another kind fails the parse, so a new step is taught here before it is trusted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Copy {
  /** The stage copied from (`--from=`), or undefined for the build context. */
  from: string | undefined;
  sources: string[];
  dest: string;
}

export type Step =
  | { kind: 'WORKDIR'; path: string }
  | { kind: 'COPY'; copy: Copy }
  | { kind: 'RUN'; command: string }
  | { kind: 'ENV'; values: Record<string, string> }
  | { kind: 'USER'; user: string }
  | { kind: 'VOLUME'; paths: string[] }
  | { kind: 'EXPOSE'; ports: string[] }
  | { kind: 'HEALTHCHECK'; command: string[] }
  | { kind: 'STOPSIGNAL'; signal: string }
  | { kind: 'CMD'; command: string[] };

export interface Stage {
  image: string;
  /** The `AS` name, or the stage's index. */
  name: string;
  steps: Step[];
}

/** Instructions joined across `\` line ends, comments and blank lines dropped. */
function instructions(text: string): Array<{ keyword: string; args: string }> {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    logical.push(pending + line);
    pending = '';
  }
  if (pending !== '') logical.push(pending.trim());
  return logical.map((line) => {
    const space = line.search(/\s/);
    return { keyword: line.slice(0, space).toUpperCase(), args: line.slice(space + 1).trim() };
  });
}

function execForm(args: string, where: string): string[] {
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((part) => typeof part === 'string')) throw new Error(`${where}: expected the exec (JSON array) form, got ${args}`);
  return parsed;
}

export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const { keyword, args } of instructions(text)) {
    if (keyword === 'FROM') {
      const [image, as, name] = args.split(/\s+/);
      stages.push({ image: image!, name: as?.toUpperCase() === 'AS' ? name! : String(stages.length), steps: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (stage === undefined) throw new Error(`${keyword} before FROM`);
    const words = args.split(/\s+/);
    switch (keyword) {
      case 'WORKDIR': stage.steps.push({ kind: 'WORKDIR', path: args }); break;
      case 'RUN': stage.steps.push({ kind: 'RUN', command: args }); break;
      case 'USER': stage.steps.push({ kind: 'USER', user: args }); break;
      case 'VOLUME': stage.steps.push({ kind: 'VOLUME', paths: words }); break;
      case 'EXPOSE': stage.steps.push({ kind: 'EXPOSE', ports: words }); break;
      case 'STOPSIGNAL': stage.steps.push({ kind: 'STOPSIGNAL', signal: args }); break;
      case 'CMD': stage.steps.push({ kind: 'CMD', command: execForm(args, 'CMD') }); break;
      case 'ENV': {
        // Only the `KEY=value KEY2=value2` form, without quotes or spaces in values.
        const values: Record<string, string> = {};
        for (const word of words) {
          const eq = word.indexOf('=');
          if (eq <= 0 || /["'$]/.test(word)) throw new Error(`ENV: only KEY=value words are understood, got ${word}`);
          values[word.slice(0, eq)] = word.slice(eq + 1);
        }
        stage.steps.push({ kind: 'ENV', values });
        break;
      }
      case 'COPY': {
        const flags = words.filter((word) => word.startsWith('--'));
        const paths = words.filter((word) => !word.startsWith('--'));
        const unknown = flags.filter((flag) => !flag.startsWith('--from='));
        if (unknown.length > 0 || paths.length < 2) throw new Error(`COPY ${args}: not understood`);
        const from = flags[0]?.slice('--from='.length);
        stage.steps.push({ kind: 'COPY', copy: { from, sources: paths.slice(0, -1), dest: paths.at(-1)! } });
        break;
      }
      case 'HEALTHCHECK': {
        const at = args.indexOf('CMD ');
        if (at < 0) throw new Error(`HEALTHCHECK ${args}: no CMD`);
        stage.steps.push({ kind: 'HEALTHCHECK', command: execForm(args.slice(at + 4), 'HEALTHCHECK') });
        break;
      }
      default:
        throw new Error(`Dockerfile instruction ${keyword} is not understood by test/helpers/dockerfile.ts`);
    }
  }
  return stages;
}

export function readDockerfile(root: string): Stage[] {
  return parseDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8'));
}

/** The steps of one kind, in order. */
export function stepsOf<K extends Step['kind']>(stage: Stage, kind: K): Array<Extract<Step, { kind: K }>> {
  return stage.steps.filter((step): step is Extract<Step, { kind: K }> => step.kind === kind);
}
