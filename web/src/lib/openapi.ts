/**
 * The platform's OpenAPI document, read from the running platform
 * (`/api/openapi.json`): the panel's forms are generated from the very
 * schemas the API validates with, so the two cannot disagree.
 */
export type Schema = Record<string, any>;
export interface OpenApiDoc {
  paths: Record<string, Record<string, any>>;
  components: { schemas: Record<string, Schema> };
}

let doc: Promise<OpenApiDoc> | null = null;

export function openapi(): Promise<OpenApiDoc> {
  doc ??= fetch('/api/openapi.json').then((r) => {
    if (!r.ok) throw new Error(`the API document answered ${r.status}`);
    return r.json() as Promise<OpenApiDoc>;
  });
  doc.catch(() => {
    doc = null;
  });
  return doc;
}

/** `deviceValue` → `DeviceValueSettings`. */
export const settingsSchemaName = (template: string) => `${template[0]!.toUpperCase()}${template.slice(1)}Settings`;

/**
 * A schema from `components.schemas`, standalone: the document's other schemas
 * ride along under `components` so its `$ref`s resolve.
 */
export function standalone(d: OpenApiDoc, name: string): Schema | null {
  const s = d.components.schemas[name];
  return s ? { ...s, components: d.components } : null;
}

/** The request body schema of an operation, standalone; null when the platform does not offer the operation. */
export function requestSchema(d: OpenApiDoc, path: string, method: string): Schema | null {
  const body = d.paths[path]?.[method.toLowerCase()]?.requestBody?.content?.['application/json']?.schema as Schema | undefined;
  if (!body) return null;
  return { ...body, components: d.components };
}

/** Whether the running platform offers an operation. */
export const offers = (d: OpenApiDoc, path: string, method: string) => !!d.paths[path]?.[method.toLowerCase()];

export interface GridSize {
  default: [number, number];
  min: [number, number];
}

/** Default and minimum size per template (`x-grid-sizes` of `WidgetTemplate`). */
export function gridSizes(d: OpenApiDoc): Record<string, GridSize> {
  return (d.components.schemas.WidgetTemplate?.['x-grid-sizes'] ?? {}) as Record<string, GridSize>;
}

export const templateNames = (d: OpenApiDoc): string[] => (d.components.schemas.WidgetTemplate?.enum ?? []) as string[];
