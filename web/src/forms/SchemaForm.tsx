import { useEffect, useMemo, useState, type ReactNode } from 'react';
import Form from '@rjsf/core';
import type { ErrorSchema, RegistryWidgetsType, UiSchema, WidgetProps } from '@rjsf/utils';
import { errorAt, uiSchemaFor, type Choices } from './schema';
export { deref, errorAt, initialValue, uiSchemaFor, type Choices } from './schema';
import { apiValidator } from './apiValidator';
import { ApiError, get } from '../lib/api';
import type { Schema } from '../lib/openapi';

/**
 * Forms generated from the platform's own OpenAPI schemas (react-jsonschema-form):
 * the schema the API validates a request with draws the form, the API itself
 * checks it (see apiValidator), and its 422 (`ERR - <field> <why>`) is shown
 * next to the field it names.
 */

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
      soft(get<{ _id: string; username: string }[]>('/api/basic-credentials-sets'), []),
      soft(get<{ _id: string; name: string }[]>('/api/devicegroups'), []),
    ]).then(([devices, images, dashboards, rules, sets, groups]) =>
      setChoices({
        // Numeric fields first: they are what most widgets show.
        devices: devices.map((d) => ({ _id: String(d._id), name: String(d.name), fields: Object.keys(d).filter((k) => !PLATFORM_FIELDS.has(k)).sort((a, b) => Number(typeof d[b] === 'number') - Number(typeof d[a] === 'number')) })),
        images,
        dashboards: dashboards.map((d) => ({ _id: d._id, name: d.name })),
        rules,
        credentialsSets: sets.map((s) => ({ _id: s._id, name: s.username })),
        deviceGroups: groups.map((g) => ({ _id: g._id, name: g.name })),
      }),
    );
  }, [rulesOffered]);
  return choices;
}

function IdSelect(kind: 'devices' | 'images' | 'dashboards' | 'rules' | 'credentialsSets' | 'deviceGroups') {
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
          placeholder={kind === 'rules' && !list ? 'rule id (this platform lists no rules)' : 'id'}
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
  credentialsSet: IdSelect('credentialsSets'),
  deviceGroup: IdSelect('deviceGroups'),
  fieldPath: FieldPath,
};

/** Two error schemas in one; messages for the same field are kept side by side. */
function joinErrors(a: Record<string, any>, b: Record<string, any>): Record<string, any> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k === '__errors' ? [...(out[k] ?? []), ...v] : out[k] ? joinErrors(out[k], v) : v;
  return out;
}

/** Turns an API error into field errors (a 422 naming fields: each of them) or a message for the whole form. */
export function apiErrors(error: unknown, strip = ''): { extra?: ErrorSchema; message?: string } {
  if (!(error instanceof ApiError) || error.status !== 422 || !error.problems.length) return {};
  const extra = error.problems.reduce<Record<string, any>>((all, p) => joinErrors(all, errorAt(p.field, `${p.field.split('.').pop()} ${p.problem}`, strip)), {});
  return { extra: extra as ErrorSchema, message: error.problems.map((p) => `${p.field.replace(strip, '')} ${p.problem}`).join('; ') };
}

/** `b` laid over `a`, object by object. */
const merged = (a: Record<string, any>, b: Record<string, any>): Record<string, any> => {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = v && typeof v === 'object' && !Array.isArray(v) && typeof out[k] === 'object' ? merged(out[k], v) : v;
  return out;
};

export function SchemaForm({ schema, formData, onChange, onSubmit, extraErrors, choices, children, idPrefix, ui }: { schema: Schema; formData: unknown; onChange: (d: unknown) => void; onSubmit: (d: unknown) => void; extraErrors?: ErrorSchema; choices?: Choices | null; children?: ReactNode; idPrefix?: string; ui?: UiSchema }) {
  const uiSchema = useMemo(() => merged({ ...uiSchemaFor(schema, schema), 'ui:submitButtonOptions': { norender: true } }, ui ?? {}), [schema, ui]);
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
