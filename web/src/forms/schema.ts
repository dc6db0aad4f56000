import type { ErrorSchema, UiSchema } from '@rjsf/utils';

/**
 * The pure part of the generated forms: resolving the document's `$ref`s,
 * the pickers for id fields, a widget's first settings, and where an API
 * error goes. No React here, so it is tested in Node against the real
 * document and API.
 */

export type Schema = Record<string, any>;

export interface Choices {
  devices: { _id: string; name: string; fields: string[] }[];
  images: { _id: string; name: string }[];
  dashboards: { _id: string; name: string }[];
  rules: { _id: string; name: string }[] | null;
  credentialsSets?: { _id: string; name: string }[];
  deviceGroups?: { _id: string; name: string }[];
}

const PICKERS: Record<string, string> = {
  deviceId: 'device',
  iotnode: 'device',
  iotnodeId: 'device',
  imageId: 'image',
  targetDashboardId: 'dashboard',
  ruleV2Id: 'rule',
  basicCredentialsSetId: 'credentialsSet',
  deviceGroup: 'deviceGroup',
  field: 'fieldPath',
};

/** Resolves a local `$ref` against the root schema. */
export function deref(schema: Schema | undefined, root: Schema): Schema {
  let s = schema ?? {};
  for (let i = 0; i < 20 && typeof s.$ref === 'string'; i++) {
    const target = (s.$ref as string)
      .replace(/^#\//, '')
      .split('/')
      .reduce<any>((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], root);
    const { $ref: _, ...rest } = s;
    s = { ...(target ?? {}), ...rest };
  }
  if (Array.isArray(s.allOf)) {
    const parts = s.allOf.map((x: Schema) => deref(x, root));
    const { allOf: _, ...rest } = s;
    s = parts.reduce((a: Schema, b: Schema) => ({ ...a, ...b, properties: { ...a.properties, ...b.properties }, required: [...(a.required ?? []), ...(b.required ?? [])] }), rest);
  }
  return s;
}

/** The pickers for id fields, at every depth of the schema. */
export function uiSchemaFor(schema: Schema, root: Schema, depth = 0): UiSchema {
  const s = deref(schema, root);
  const ui: UiSchema = {};
  if (depth > 8) return ui;
  // rjsf gives the chosen option of a oneOf the uiSchema of the field itself: the pickers of every option, together.
  for (const option of [...((s.oneOf ?? []) as Schema[]), ...((s.anyOf ?? []) as Schema[])]) Object.assign(ui, uiSchemaFor(option, root, depth + 1));
  for (const [name, sub] of Object.entries((s.properties ?? {}) as Record<string, Schema>)) {
    const d = deref(sub, root);
    if (PICKERS[name] && d.type === 'string' && !d.enum) ui[name] = { 'ui:widget': PICKERS[name] };
    else if (d.type === 'object' && d.properties) ui[name] = uiSchemaFor(d, root, depth + 1);
    else if (d.type === 'array' && d.items) {
      const items = deref(d.items, root);
      if (items.type === 'string' && name === 'fields') ui[name] = { items: { 'ui:widget': 'fieldPath' } };
      else ui[name] = { items: uiSchemaFor(items, root, depth + 1) };
    }
  }
  return ui;
}

/** A first value for every required setting, so a new widget can be saved at once and adjusted after. */
export function initialValue(schema: Schema, root: Schema, choices: Choices | null, name = '', depth = 0): unknown {
  const s = deref(schema, root);
  if (s.default !== undefined) return s.default;
  if (Array.isArray(s.enum)) return name === 'display' && s.enum.includes('text') ? 'text' : s.enum[0];
  const device = choices?.devices[0];
  switch (s.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      if (depth > 8) return out;
      for (const key of (s.required ?? []) as string[]) {
        const v = initialValue(s.properties?.[key] ?? {}, root, choices, key, depth + 1);
        if (v !== undefined) out[key] = v;
      }
      return out;
    }
    case 'array':
      return (s.minItems ?? 0) > 0 ? [initialValue(s.items ?? {}, root, choices, name.replace(/s$/, ''), depth + 1)] : [];
    case 'boolean':
      return /^shouldShow/.test(name);
    case 'number':
    case 'integer':
      return s.minimum ?? 0;
    case 'string':
      if (name === 'deviceId') return device?._id;
      if (name === 'field') return device?.fields[0];
      if (name === 'fields') return device?.fields[0];
      if (name === 'imageId') return choices?.images[0]?._id;
      if (name === 'targetDashboardId') return choices?.dashboards[0]?._id;
      if (name === 'ruleV2Id') return choices?.rules?.[0]?._id;
      if (/color/i.test(name)) return '#1f6feb';
      if (name === 'text' || name === 'label' || name === 'name') return name === 'name' ? 'Plan' : name === 'label' ? 'Run' : 'Text';
      return undefined;
    default:
      return undefined;
  }
}

/** `settings.items.0.field` → the error schema rjsf shows next to that field. */
export function errorAt(path: string, message: string, strip = ''): ErrorSchema {
  const parts = path.replace(new RegExp(`^${strip.replace(/\./g, '\\.')}`), '').split('.').filter(Boolean);
  const out: any = {};
  let at = out;
  for (const p of parts) at = at[p] = {};
  at.__errors = [message];
  return out as ErrorSchema;
}

