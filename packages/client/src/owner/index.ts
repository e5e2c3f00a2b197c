/**
 * The owner API (`/owner/v1`, docs/owner.md of the gateway) for scripts: accounts, members,
 * API keys, API settings tokens, roles, sign records, resets and the audit log.
 */
export { OwnerClient } from './client.js';
export * from '../errors.js';
export type * from './types.js';
