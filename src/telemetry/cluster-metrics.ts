/**
 * One scrape for the whole process group under node:cluster. Prometheus reaches one worker per
 * scrape (the primary hands connections out round-robin), and a worker's registry holds only
 * its own share; so the worker answering /metrics asks the primary, which gathers every
 * worker's registry over IPC and sums them (prom-client's AggregatorRegistry; gauges combine
 * as each says: metrics.ts). Without workers nothing here runs.
 */
import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

const ASK = 'gateway:metrics?';
const ANSWER = 'gateway:metrics!';

interface Ask {
  type: typeof ASK;
  id: number;
}

interface Answer {
  type: typeof ANSWER;
  id: number;
  text?: string;
  error?: string;
}

/** In the primary: answers every worker's request for the group's metrics. */
export function serveGroupMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: Partial<Ask>) => {
    if (message?.type !== ASK) return;
    const answer = (rest: Pick<Answer, 'text' | 'error'>) => {
      if (worker.isConnected()) worker.send({ type: ANSWER, id: message.id ?? -1, ...rest } satisfies Answer);
    };
    aggregator.clusterMetrics().then((text) => answer({ text }), (err: Error) => answer({ error: err.message }));
  });
}

/**
 * In a worker: offers `registry` to the primary's gatherings, and returns the scrape that asks
 * the primary for the group's metrics (rejecting after `timeoutMs` without an answer).
 */
export function groupScrape(registry: Registry, timeoutMs = 10_000): () => Promise<string> {
  AggregatorRegistry.setRegistries([registry]);
  // Its constructor installs the worker's side of prom-client's gathering (answering the primary).
  new AggregatorRegistry();
  const waiting = new Map<number, { resolve(text: string): void; reject(err: Error): void; timer: NodeJS.Timeout }>();
  let next = 0;
  process.on('message', (message: Partial<Answer>) => {
    if (message?.type !== ANSWER || message.id === undefined) return;
    const asked = waiting.get(message.id);
    if (asked === undefined) return;
    waiting.delete(message.id);
    clearTimeout(asked.timer);
    if (message.text !== undefined) asked.resolve(message.text);
    else asked.reject(new Error(`the primary could not gather the workers' metrics: ${message.error ?? 'no answer'}`));
  });
  return () => new Promise<string>((resolve, reject) => {
    const id = next++;
    const timer = setTimeout(() => {
      waiting.delete(id);
      reject(new Error('the primary did not answer for the workers\' metrics'));
    }, timeoutMs);
    waiting.set(id, { resolve, reject, timer });
    process.send!({ type: ASK, id } satisfies Ask);
  });
}
