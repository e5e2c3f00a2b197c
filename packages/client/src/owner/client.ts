import type { OwnerClientOptions } from './types.js';

export class OwnerClient {
  constructor(options: OwnerClientOptions) {
    void options;
    throw new Error('not implemented');
  }
}
