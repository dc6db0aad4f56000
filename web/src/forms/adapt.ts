import type { UiSchema } from '@rjsf/utils';
import { deref, type Schema } from './schema.js';

/**
 * Where a request schema alone draws a poor form, the panel narrows it with
 * what the platform says about itself, never restating a shape: the
 * connector form offers the integrations `GET /api/integrations` lists and
 * only the chosen one's settings; a rule node's `config` offers the node
 * schemas the document names. Pure, so it is tested in Node against the real
 * document.
 */

export interface IntegrationInfo {
  name: string;
  settings: string | null;
  writeOnlySettings?: string[];
  webhook?: string;
  available: boolean;
  commands: { name: string; kind: string; target: 'device' | 'connector'; data: string }[];
}

/** Fields only a Generic connector takes (its internal or external broker). */
const GENERIC_ONLY = ['basicCredentialsSetId', 'mqttServer', 'uplink', 'downlink'];

export function connectorForm(schema: Schema, integrations: IntegrationInfo[], chosen: string | undefined): { schema: Schema; ui: UiSchema } {
  const top = deref(schema, schema);
  const offered = integrations.filter((i) => i.available);
  const current = offered.find((i) => i.name === chosen);
  const properties: Record<string, Schema> = { ...top.properties, integration: { ...deref(top.properties.integration, schema), enum: offered.map((i) => i.name) } };
  for (const i of integrations) if (i.settings && i.settings !== current?.settings) delete properties[i.settings];
  if (chosen !== 'Generic') for (const f of GENERIC_ONLY) delete properties[f];
  const ui: UiSchema = { 'ui:order': ['name', 'integration', ...(current?.settings ? [current.settings] : []), '*'], mqttServer: { password: { 'ui:widget': 'password' } } };
  // Write-only settings are typed in, never shown back (not even while typing).
  for (const path of current?.writeOnlySettings ?? []) {
    const [field, name] = path.split('.') as [string, string];
    ui[field] = { ...(ui[field] as object), [name]: { 'ui:widget': 'password' } };
  }
  const required = [...new Set([...((top.required ?? []) as string[]), ...(current?.settings ? [current.settings] : [])])];
  return { schema: { ...top, properties, required }, ui };
}

/** A rule node's `config` schemas, by the names `RuleDefinition` gives them. */
export const RULE_NODE_SCHEMAS = ['RuleButtonTrigger', 'RuleDeviceTrigger', 'RuleScheduleTrigger', 'RuleGeofenceTrigger', 'RuleCondition', 'RuleCommandAction', 'RuleSetFieldAction', 'RuleChannelAction', 'RuleLogAction'];

/** `RuleLogAction` → `Log action`. */
const titleOf = (name: string) => name.replace(/^Rule/, '').replace(/([a-z])([A-Z])/g, '$1 $2').replace(/^(\w)(.*)$/, (_, a: string, b: string) => a + b.toLowerCase());

/** The rule form: each node's `config` is one of the node schemas, its kind (a one-value enum) filled in. */
export function ruleForm(schema: Schema): Schema {
  const schemas = schema.components?.schemas as Record<string, Schema> | undefined;
  const node = schemas?.RuleNode;
  if (!schemas || !node) return schema;
  const options = RULE_NODE_SCHEMAS.filter((n) => schemas[n]).map((n) => {
    const s = deref(schemas[n], schema);
    const properties = Object.fromEntries(Object.entries((s.properties ?? {}) as Record<string, Schema>).map(([k, p]) => [k, Array.isArray(p.enum) && p.enum.length === 1 ? { ...p, default: p.enum[0] } : p]));
    return { ...s, title: titleOf(n), properties };
  });
  if (options.length === 0) return schema;
  return { ...schema, components: { ...schema.components, schemas: { ...schemas, RuleNode: { ...node, properties: { ...node.properties, config: { oneOf: options } } } } } };
}

/**
 * A request that is one of several shapes chosen by a discriminator
 * (`CalculationWrite`: `lastValue` or `window`): each option is titled by its
 * discriminator value, which is filled in.
 */
export function discriminatedForm(schema: Schema): Schema {
  const top = deref(schema, schema);
  const by = top.discriminator?.propertyName as string | undefined;
  if (!by || !Array.isArray(top.oneOf)) return schema;
  const names = Object.fromEntries(Object.entries((top.discriminator.mapping ?? {}) as Record<string, string>).map(([value, ref]) => [ref, value]));
  const oneOf = (top.oneOf as Schema[]).map((o) => {
    const s = deref(o, schema);
    const value = names[o.$ref as string] ?? (s.properties?.[by]?.enum?.length === 1 ? s.properties[by].enum[0] : undefined);
    if (value === undefined) return s;
    return { ...s, title: String(value), properties: { ...s.properties, [by]: { ...s.properties?.[by], default: value } } };
  });
  const { discriminator: _, ...rest } = top;
  return { ...rest, oneOf };
}
