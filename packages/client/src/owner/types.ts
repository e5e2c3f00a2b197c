/** The owner API's shapes (the gateway's GET /openapi.json). */
export interface OwnerClientOptions {
  baseUrl: string | URL;
}
