import { useEffect, useMemo, useState, type ReactNode } from 'react';
import Form from '@rjsf/core';
import type { ErrorSchema, RegistryWidgetsType, UiSchema, WidgetProps } from '@rjsf/utils';
import { apiValidator } from './apiValidator';
import { ApiError, get } from '../lib/api';
import type { Schema } from '../lib/openapi';

/**
 * Forms generated from the platform's own OpenAPI schemas (react-jsonschema-form):
 * the schema the API validates a request with draws the form, the API itself
 * checks it (see apiValidator), and its 422 (`ERR - <field> <why>`) is shown
 * next to the field it names.
 */

export interface Choices {
  devices: { _id: string; name: string; fields: string[] }[];
  images: { _id: string; name: string }[];
  dashboards: { _id: string; name: string }[];
  rules: { _id: string; name: string }[] | null;
}

const PLATFORM_FIELDS = new Set(['_id', 'name', 'description', 'category', 'connector', 'secret', 'rabbitRouting', 'createdAt', 'updatedAt', 'reportedAt', 'translatorPreferences', 'deviceModelName', 'encodedData']);

/** What the id pickers offer: the devices, images, dashboards and rules the user can read. */
export function useChoices(rulesOffered: boolean): Choices | null {
  const [choices, setChoices] = useState<Choices | null>(null);
  useEffect(() => {
    const soft = <T,>(p: Promise<T>, fallback: T) => p.catch(() => fallback);
    void Promise.all([
      soft(get<Record<string, unknown>[]>('/api/iotnodes?limit=500'), []),
      soft(get<{ _id: string; name: string }[]>('/api/images'), []),
      soft(get<{ _id: string; name: string }[]>('/api/dashboards'), []),
      rulesOffered ? soft(get<{ _id: string; name: string }[]>('/api/rules-v2'), null) : Promise.resolve(null),
    ]).then(([devices, images, dashboards, rules]) =>
      setChoices({
        // Numeric fields first: they are what most widgets show.
        devices: devices.map((d) => ({ _id: String(d._id), name: String(d.name), fields: Object.keys(d).filter((k) => !PLATFORM_FIELDS.has(k)).sort((a, b) => Number(typeof d[b] === 'number') - Number(typeof d[a] === 'number')) })),
        images,
        dashboards: dashboards.map((d) => ({ _id: d._id, name: d.name })),
        rules,
      }),
    );
  }, [rulesOffered]);
  return choices;
}

function IdSelect(kind: 'devices' | 'images' | 'dashboards' | 'rules') {
  return function Picker(props: WidgetProps) {
    const choices = (props.registry.formContext as { choices?: Choices } | undefined)?.choices;
    const list = choices?.[kind] ?? null;
    const value = (props.value as string | undefined) ?? '';
    if (!list || (list.length === 0 && kind !== 'rules'))
      return (
        <input
          id={props.id}
          className="form-control"
          value={value}
          required={props.required}
          placeholder={kind === 'rules' && !list ? 'rule id (this platform lists no rules)' : `${kind.slice(0, -1)} id`}
          onChange={(e) => props.onChange(e.target.value === '' ? undefined : e.target.value)}
          onBlur={() => props.onBlur(props.id, value)}
          onFocus={() => props.onFocus(props.id, value)}
        />
      );
    const known = list.some((x) => x._id === value);
    return (
      <select id={props.id} className="form-control" value={value} required={props.required} onChange={(e) => props.onChange(e.target.value === '' ? undefined : e.target.value)} onBlur={() => props.onBlur(props.id, value)} onFocus={() => props.onFocus(props.id, value)}>
        <option value="">Choose…</option>
        {!known && value && <option value={value}>{value} (unknown or no access)</option>}
        {list.map((x) => (
          <option key={x._id} value={x._id}>
            {x.name} ({x._id.slice(-6)})
          </option>
        ))}
      </select>
    );
  };
}

function FieldPath(props: WidgetProps) {
  const choices = (props.registry.formContext as { choices?: Choices } | undefined)?.choices;
  const fields = [...new Set((choices?.devices ?? []).flatMap((d) => d.fields))].sort();
  const value = (props.value as string | undefined) ?? '';
  return (
    <>
      <input
        id={props.id}
        className="form-control"
        list={`${props.id}-fields`}
        value={value}
        required={props.required}
        onChange={(e) => props.onChange(e.target.value === '' ? undefined : e.target.value)}
        onBlur={() => props.onBlur(props.id, value)}
        onFocus={() => props.onFocus(props.id, value)}
      />
      <datalist id={`${props.id}-fields`}>
        {fields.map((f) => (
          <option key={f} value={f} />
        ))}
      </datalist>
    </>
  );
}

export const WIDGETS: RegistryWidgetsType = {
  device: IdSelect('devices'),
  image: IdSelect('images'),
  dashboard: IdSelect('dashboards'),
  rule: IdSelect('rules'),
  fieldPath: FieldPath,
};

const PICKERS: Record<string, string> = { deviceId: 'device', imageId: 'image', targetDashboardId: 'dashboard', ruleV2Id: 'rule', field: 'fieldPath' };

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
  for (const [name, sub] of Object.entries((s.properties ?? {}) as Record<string, Schema>)) {
    const d = deref(sub, root);
    if (PICKERS[name] && d.type === 'string' && !d.enum) ui[name] = { 'ui:widget': PICKERS[name] };
    else if (d.type === 'object' && d.properties) ui[name] = uiSchemaFor(d, root, depth + 1);
    else if (d.type === 'array' && d.items) {
      const items = deref(d.items, root);
      if (items.type === 'string' && name === 'fields') ui[name] = { items: { 'ui:widget': 'fieldPath' } };
      else ui[name] = { items: uiSchemaFor(items, root, depth + 1) };
    } else if (d.description) ui[name] = { 'ui:help': d.description };
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

/** Turns an API error into field errors (422 naming a field) or a message for the whole form. */
export function apiErrors(error: unknown, strip = ''): { extra?: ErrorSchema; message?: string } {
  if (error instanceof ApiError && error.status === 422 && error.field) return { extra: errorAt(error.field, `${error.field.split('.').pop()} ${error.why}`, strip), message: `${error.field.replace(strip, '')} ${error.why}` };
  return {};
}

export function SchemaForm({ schema, formData, onChange, onSubmit, extraErrors, choices, children, idPrefix }: { schema: Schema; formData: unknown; onChange: (d: unknown) => void; onSubmit: (d: unknown) => void; extraErrors?: ErrorSchema; choices?: Choices | null; children?: ReactNode; idPrefix?: string }) {
  const uiSchema = useMemo(() => ({ ...uiSchemaFor(schema, schema), 'ui:submitButtonOptions': { norender: true } }), [schema]);
  const formContext = useMemo(() => ({ choices }), [choices]);
  return (
    <Form
      schema={schema as never}
      uiSchema={uiSchema}
      formData={formData}
      validator={apiValidator}
      widgets={WIDGETS}
      formContext={formContext}
      extraErrors={extraErrors}
      showErrorList={false}
      noHtml5Validate
      omitExtraData
      idPrefix={idPrefix ?? 'root'}
      onChange={(e) => onChange(e.formData)}
      onSubmit={(e) => onSubmit(e.formData)}
      experimental_defaultFormStateBehavior={{ emptyObjectFields: 'skipEmptyDefaults' }}
    >
      {children}
    </Form>
  );
}
