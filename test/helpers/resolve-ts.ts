/**
 * Runs the TypeScript sources on Node's own type stripping, for the test files and the
 * processes they start (`node --import ./test/helpers/resolve-ts.ts …`). The sources import
 * each other as `./x.js`, the name they have once compiled (tsconfig: nodenext); Node looks
 * for that file as written, so this hook answers `./x.ts` where that is the file on disk.
 *
 * It replaces tsx in the test run: tsx's loader thread and esbuild cost every test process
 * and every gateway a test starts about a fifth of a second, and Node's compile cache
 * (NODE_COMPILE_CACHE, set by `npm test`) then keeps the stripped modules compiled between
 * processes. `npm start` keeps tsx, which needs no flag to remember.
 */
import { existsSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier.endsWith('.js') && (specifier.startsWith('./') || specifier.startsWith('../')) && context.parentURL?.endsWith('.ts') === true) {
      const candidate = new URL(`${specifier.slice(0, -3)}.ts`, context.parentURL);
      if (existsSync(fileURLToPath(candidate))) return nextResolve(candidate.href, context);
    }
    return nextResolve(specifier, context);
  },
});
