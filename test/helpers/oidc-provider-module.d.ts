/**
 * The little of oidc-provider's API the tests use (it ships no types; @types/oidc-provider
 * lags its majors, and a dev dependency for four lines of types is not worth it).
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }
}
