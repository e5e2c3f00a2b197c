/**
 * lru-cache options that bound a cache by its number of entries without allocating for all of
 * them up front. With `max`, lru-cache preallocates every slot (a million-entry cache holds
 * about 40 MB of arrays from the first second, and every full GC walks them: the gateway
 * idled at 210 MB and its p99 latency spiked with three such caches). Counting each entry
 * as size 1 against `maxSize` gives the same bound with storage that grows as it is used.
 */
export function entryBound(maxEntries: number): { maxSize: number; sizeCalculation: () => number } {
  return { maxSize: maxEntries, sizeCalculation: one };
}

const one = () => 1;
