import { toApiKeyRecord, type DataFile } from '../data-file/data-file.js';
import type { ApiKeyRecord, KeyDirectory } from './store.js';

/** Key directory held in process memory, built from the data file; `load` replaces it whole. */
export class MemoryKeyDirectory implements KeyDirectory {
  #byApiKey = new Map<string, ApiKeyRecord>();
  #byKeyId = new Map<string, ApiKeyRecord>();

  constructor(data: DataFile) {
    this.load(data);
  }

  load(data: DataFile): void {
    const byApiKey = new Map<string, ApiKeyRecord>();
    const byKeyId = new Map<string, ApiKeyRecord>();
    for (const account of data.accounts) {
      for (const key of account.apiKeys) {
        const record = toApiKeyRecord(account, key);
        byApiKey.set(key.apiKey, record);
        byKeyId.set(key.id, record);
      }
    }
    this.#byApiKey = byApiKey;
    this.#byKeyId = byKeyId;
  }

  async findByApiKey(apiKey: string): Promise<ApiKeyRecord | undefined> {
    return this.#byApiKey.get(apiKey);
  }

  async findByKeyId(keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.#byKeyId.get(keyId);
  }
}
