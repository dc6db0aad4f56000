/**
 * A typed client of the platform's REST API, generated from its OpenAPI
 * document (`api/openapi.yaml`): `schema.d.ts` holds every path, parameter,
 * body and answer as TypeScript types (openapi-typescript), and
 * openapi-fetch makes the calls with them, so a request the document does
 * not allow, or a field the answer does not have, is a compile error.
 *
 * `npm run generate:client` writes `schema.d.ts` again after the document
 * changes; a test fails while the committed one is stale.
 *
 *   const api = platformClient('https://platform.example', token);
 *   const { data, error } = await api.GET('/api/dashboards/{dashboardId}', { params: { path: { dashboardId } } });
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { paths } from './schema.js';

export type { paths, components } from './schema.js';
/** JSON answers only: the NDJSON export is a stream, read with plain fetch. */
export type PlatformClient = Client<paths, 'application/json'>;

export function platformClient(baseUrl: string, token?: string, options: Omit<ClientOptions, 'baseUrl'> = {}): PlatformClient {
  const headers = { ...(options.headers as Record<string, string> | undefined), ...(token ? { authorization: `Bearer ${token}` } : {}) };
  return createClient<paths, 'application/json'>({ ...options, baseUrl, headers });
}
