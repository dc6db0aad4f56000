import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { errorAt, initialValue, uiSchemaFor, type Choices } from '../../web/src/forms/schema.js';
import { formatValue, fromBase64, thresholdColor, toBase64 } from '../../web/src/lib/format.js';
import { chartWindow, statsUrl } from '../../web/src/lib/time.js';
import { logsQuery } from '../../web/src/lib/logs.js';
import { ringOf, signedArea } from '../../web/src/lib/geo.js';
import { connectorForm, discriminatedForm, ruleForm, RULE_NODE_SCHEMAS, type IntegrationInfo } from '../../web/src/forms/adapt.js';
import { ok } from './support.js';

/**
 * The panel's logic that needs no browser, in Node: the generated forms
 * against the real document and API, thresholds, chart windows, the export
 * encoding, fence rings and log queries.
 */
const logic = suite<{ t: TestPlatform }>('control panel: logic');

logic.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
logic.after(async (ctx) => {
  await ctx.t?.stop();
});

logic('the connector form offers the integrations the platform lists, only the chosen one\'s settings, and its write-only settings as password fields', async ({ t }) => {
  const doc = await ok(t, 'GET', '/api/openapi.json');
  const integrations = (await ok(t, 'GET', '/api/integrations')) as IntegrationInfo[];
  const base = { $ref: '#/components/schemas/ConnectorCreate', components: doc.components };
  for (const i of integrations.filter((x) => x.available)) {
    const { schema, ui } = connectorForm(base, integrations, i.name);
    assert.equal(schema.properties.integration.enum, integrations.filter((x) => x.available).map((x) => x.name));
    const settingsFields = integrations.map((x) => x.settings).filter((f): f is string => !!f);
    assert.equal(settingsFields.filter((f) => f in schema.properties), i.settings ? [i.settings] : [], i.name);
    if (i.settings) assert.ok(schema.required.includes(i.settings), i.name);
    assert.is('basicCredentialsSetId' in schema.properties, i.name === 'Generic', i.name);
    for (const path of i.writeOnlySettings ?? []) {
      const [field, name] = path.split('.') as [string, string];
      assert.is((ui as any)[field][name]['ui:widget'], 'password', path);
      assert.ok(schema.properties[field].$ref || schema.properties[field].properties, path);
    }
  }
});

logic('the rule form offers, as a node\'s config, every node schema the document names, and nothing else', async ({ t }) => {
  const doc = await ok(t, 'GET', '/api/openapi.json');
  const named = [...new Set((doc.components.schemas.RuleDefinition.description as string).match(/`Rule[A-Za-z]+`/g)!.map((n) => n.slice(1, -1)))];
  assert.equal([...named].sort(), [...RULE_NODE_SCHEMAS].sort());
  const form = ruleForm({ $ref: '#/components/schemas/RuleWrite', components: doc.components });
  const options = form.components.schemas.RuleNode.properties.config.oneOf as Record<string, any>[];
  assert.is(options.length, RULE_NODE_SCHEMAS.length);
  const log = options.find((o) => o.title === 'Log action')!;
  assert.is(log.properties.action.default, 'log');
  // The rule a button runs, as the form fills it in, is accepted by the API.
  const res = await t.call('POST', '/api/rules-v2', { body: { name: 'form.rule', definition: { nodes: [{ id: 'press', type: 'trigger', config: { resourceType: options.find((o) => o.title === 'Button trigger')!.properties.resourceType.default } }, { id: 'note', type: 'action', config: { action: log.properties.action.default, message: 'x' } }], edges: [{ from: 'press', to: 'note' }] } } });
  assert.is(res.status, 201, res.text);
});

logic('a request of several shapes (CalculationWrite) offers each titled by its discriminator value, which is filled in, with device pickers in each', async ({ t }) => {
  const doc = await ok(t, 'GET', '/api/openapi.json');
  const base = { $ref: '#/components/schemas/CalculationWrite', components: doc.components };
  const form = discriminatedForm(base);
  const mapping = doc.components.schemas.CalculationWrite.discriminator.mapping as Record<string, string>;
  assert.equal(form.oneOf.map((o: any) => o.title), Object.keys(mapping));
  for (const o of form.oneOf) assert.is(o.properties.type.default, o.title);
  const ui = uiSchemaFor(form, form) as any;
  assert.is(ui.destination.deviceId['ui:widget'], 'device');
  assert.is(ui.source.deviceId['ui:widget'], 'device');
  assert.is(ui.sources.items.deviceId['ui:widget'], 'device');
});

logic('the first settings the add-widget form fills in are accepted by the API for every template', async ({ t }) => {
  const doc = await ok(t, 'GET', '/api/openapi.json');
  const device = await ok(t, 'POST', '/api/iotnodes', { name: 'probe', temperature: 21, label: 'x' });
  const image = '0123456789abcdef01234567';
  const choices: Choices = { devices: [{ _id: device._id, name: 'probe', fields: ['temperature', 'label'] }], images: [{ _id: image, name: 'plan' }], dashboards: [{ _id: image, name: 'other' }], rules: [{ _id: image, name: 'rule' }] };
  const d = await ok(t, 'POST', '/api/dashboards', { name: 'Forms' });
  for (const template of doc.components.schemas.WidgetTemplate.enum as string[]) {
    const name = `${template[0]!.toUpperCase()}${template.slice(1)}Settings`;
    const schema = { ...doc.components.schemas[name], components: doc.components };
    const settings = initialValue(schema, schema, choices) as Record<string, unknown>;
    // commandButtons needs the id of a trigger node, which no list offers.
    if (template === 'commandButtons') (settings.buttons as Record<string, unknown>[])[0]!.triggerNodeId = 'press';
    const res = await t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { template, settings } });
    assert.is(res.status, 201, `${template}: ${res.text} for ${JSON.stringify(settings)}`);
  }
});

logic('the form puts id pickers on every deviceId, imageId, ruleV2Id and targetDashboardId, nested ones too', async ({ t }) => {
  const doc = await ok(t, 'GET', '/api/openapi.json');
  const root = (name: string) => ({ ...doc.components.schemas[name], components: doc.components });
  assert.equal(uiSchemaFor(root('DeviceValueSettings'), root('DeviceValueSettings')).deviceId, { 'ui:widget': 'device' });
  assert.equal(uiSchemaFor(root('MultiDeviceChartSettings'), root('MultiDeviceChartSettings')).deviceFieldPairs, { items: { deviceId: { 'ui:widget': 'device' }, field: { 'ui:widget': 'fieldPath' } } });
  assert.equal(uiSchemaFor(root('CommandButtonsSettings'), root('CommandButtonsSettings')).buttons.items.ruleV2Id, { 'ui:widget': 'rule' });
  assert.equal(uiSchemaFor(root('DataTableSettings'), root('DataTableSettings')).devices.items.fields, { items: { 'ui:widget': 'fieldPath' } });
});

logic('an API error path becomes the field error the form shows beside that field', () => {
  assert.equal(errorAt('settings.items.0.field', 'field is required', 'settings.'), { items: { 0: { field: { __errors: ['field is required'] } } } } as never);
  assert.equal(errorAt('username', 'username must not look like a UUID'), { username: { __errors: ['username must not look like a UUID'] } } as never);
});

logic('thresholds: bands take the highest one reached, conditions the last one met', () => {
  const bands = [{ value: 50, color: 'orange' }, { value: 80, color: 'red' }];
  assert.is(thresholdColor(10, bands, 'blue'), 'blue');
  assert.is(thresholdColor(50, bands, 'blue'), 'orange');
  assert.is(thresholdColor(95, bands, 'blue'), 'red');
  assert.is(thresholdColor('not a number', bands, 'blue'), 'blue');
  const conditions = [{ value: 0, color: 'blue', operator: 'lt' as const }, { value: 30, color: 'red', operator: 'gt' as const }];
  assert.is(thresholdColor(-1, conditions, 'grey'), 'blue');
  assert.is(thresholdColor(10, conditions, 'grey'), 'grey');
  assert.is(thresholdColor(31, conditions, 'grey'), 'red');
  assert.is(formatValue(21.456, '°C'), '21.46 °C');
  assert.is(formatValue(true), 'true');
  assert.is(formatValue(undefined), '–');
});

logic('a chart window follows the template period, resolution and custom times', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  assert.equal(chartWindow({ timePeriod: 'fiftenMinutes', resolution: 'full' }, now), { start: now / 1000 - 900, end: now / 1000, distance: null });
  assert.equal(chartWindow({ timePeriod: 'day', resolution: 'hour' }, now).distance, 3600);
  assert.equal(chartWindow({ timePeriod: 'custom', customFromTime: '2025-12-31T00:00:00Z', customToTime: '2025-12-31T06:00:00Z', resolution: 'custom', customResolution: 600 }, now), { start: Date.parse('2025-12-31T00:00:00Z') / 1000, end: Date.parse('2025-12-31T06:00:00Z') / 1000, distance: 600 });
  const url = new URL(statsUrl('abc', 'temperature', { start: 10, end: 20, distance: 5 }, 'max'), 'http://x');
  assert.equal(Object.fromEntries(url.searchParams), { measurement: 'temperature', start: '10', end: '21', distance: '5', calculation: 'max' });
});

logic('the export text survives any characters', () => {
  const text = JSON.stringify({ name: 'Värme ☀ 温度', widgets: [] });
  assert.is(fromBase64(toBase64(text)), text);
  assert.is(toBase64('{"a":1}'), Buffer.from('{"a":1}').toString('base64'));
});

logic('a drawn fence becomes a closed counter-clockwise ring, whichever way it was drawn', () => {
  const cw = [{ lat: 1, lng: 0 }, { lat: 1, lng: 1 }, { lat: 0, lng: 1 }, { lat: 0, lng: 0 }];
  for (const corners of [cw, [...cw].reverse()]) {
    const ring = ringOf(corners);
    assert.is(ring.length, 5);
    assert.equal(ring[0], ring[4]);
    assert.ok(signedArea(ring.slice(0, 4)) > 0);
  }
});

logic('the logs widget settings become the logs query', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  const q = new URL(logsQuery({ resourceType: 'connector', type: ['error', 'warning'], priority: ['high'], category: 'status', timeRange: { start: { amount: 2, unit: 'hours' } } }, now), 'http://x').searchParams;
  assert.equal(Object.fromEntries(q), { limit: '50', resourceType: 'connector', type: 'error,warning', priority: 'high', category: 'status', from: '2026-01-01T10:00:00.000Z' });
  assert.is(new URL(logsQuery({}, now), 'http://x').searchParams.get('resourceType'), 'device');
});

logic.run();
