import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** The OpenAPI document, the single source of request shapes; read once per process. */
export type OpenApiDocument = {
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, unknown> } & Record<string, unknown>;
} & Record<string, unknown>;

export function loadOpenApi(): OpenApiDocument {
  return parse(readFileSync(new URL('./openapi.yaml', import.meta.url), 'utf8')) as OpenApiDocument;
}
