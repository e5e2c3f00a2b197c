/**
 * Where the client runs. A page (window and document) or a web worker (WorkerGlobalScope) is a
 * browser: whatever the client holds there was shipped to the visitor's machine, so secrets
 * must not be (client.ts, owner/client.ts).
 */
export function runsInBrowser(): boolean {
  const g = globalThis as { window?: unknown; document?: unknown; WorkerGlobalScope?: unknown };
  return (g.window !== undefined && g.document !== undefined) || g.WorkerGlobalScope !== undefined;
}
