import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { compileTemplateRules } from '../../api/dashboards/rules.js';
import { loadOpenApi } from '../../api/openapi.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { TEMPLATES } from './given.js';
import { MAX_WIDGETS, NAME_MAX } from '../../domain/dashboards/templates.js';

const rules = suite('widget template rules');

const compiled = compileTemplateRules(loadOpenApi());

rules('given settings a write accepts, when the same rules judge them on read, then they hold for every template', () => {
  for (const [template, c] of Object.entries(TEMPLATES)) {
    for (const given of [c.minimal, { ...c.minimal, ...c.optional }]) {
      const stored = compiled.forWrite(template as never, given, 'settings');
      assert.is(compiled.problem(template, stored), null, template);
    }
  }
});

rules('given stored settings that leave out defaulted settings, when judged on read, then they hold and are not changed', () => {
  for (const [template, c] of Object.entries(TEMPLATES)) {
    const stored = structuredClone(c.minimal);
    assert.is(compiled.problem(template, stored), null, template);
    assert.equal(stored, c.minimal, `${template} settings changed by a read`);
  }
});

rules('given stored settings with an unknown setting, when judged on read, then they are left as stored whatever the verdict', () => {
  const floor = { ...TEMPLATES.floorPlan!.minimal, legacy: 1 };
  assert.is(compiled.problem('floorPlan', floor), null);
  assert.is(floor.legacy, 1);
  const text = { ...TEMPLATES.text!.minimal, legacy: 1 };
  assert.is(compiled.problem('text', text), 'settings.legacy is not allowed');
  assert.is(text.legacy, 1);
});

rules('given a floorPlan write with unknown settings at any level, then they are dropped and the rest is kept with defaults filled', () => {
  const written = compiled.forWrite(
    'floorPlan',
    { ...TEMPLATES.floorPlan!.minimal, legacy: 1, devices: [{ deviceId: 'd', extra: true }], deviceValues: [{ field: 'f', thresholds: [{ value: 1, color: 'red', label: 'x' }], extra: 2 }] },
    'settings',
  );
  assert.equal(written.devices, [{ deviceId: 'd', x: null, y: null }]);
  assert.equal(written.deviceValues, [{ field: 'f', thresholds: [{ value: 1, color: 'red' }], isStarred: false }]);
  assert.not.ok('legacy' in written);
});

rules('given a stored floorPlan whose threshold carries a key the threshold shape does not allow, when judged on read, then it is broken naming it (a write would drop it)', () => {
  const stored = { ...TEMPLATES.floorPlan!.minimal, deviceValues: [{ field: 'f', thresholds: [{ value: 1, color: 'red', label: 'x' }] }] };
  assert.is(compiled.problem('floorPlan', stored), 'settings.deviceValues.0.thresholds.0.label is not allowed');
  assert.equal(stored.deviceValues[0]!.thresholds[0], { value: 1, color: 'red', label: 'x' });
});

rules('given a required setting with no default left out, when judged on read, then it is named, also where a default fills a sibling', () => {
  // deviceValue defaults showSparkline, which the copy gets filled before the check.
  const stored: Record<string, unknown> = { ...TEMPLATES.deviceValue!.minimal };
  delete stored.display;
  assert.is(compiled.problem('deviceValue', stored), 'settings.display is required');
  const chart = { ...TEMPLATES.deviceChart!.minimal, resolution: 'custom' };
  assert.is(compiled.problem('deviceChart', chart), 'settings.customResolution is required when resolution is custom');
});

rules('given a document where a setting is both required and defaulted, when compiled, then start-up fails naming it, since a read could not see it missing', () => {
  const required = loadOpenApi();
  ((required.components.schemas.TextSettings as any).properties.text as Record<string, unknown>).default = 'Hello';
  assert.throws(() => compileTemplateRules(required), /TextSettings: text has a default/);
  const trigger = loadOpenApi();
  ((trigger.components.schemas.DeviceChartSettings as any).properties as Record<string, unknown>).resolution = { type: 'string', default: 'custom' };
  assert.throws(() => compileTemplateRules(trigger), /DeviceChartSettings: resolution has a default/);
});

rules('given a write, when a setting fails, then the ValidationError names it under the given path', () => {
  assert.throws(
    () => compiled.forWrite('swimlane', { signals: [{ deviceId: 'd', field: 'f' }], windowSeconds: 5 }, 'widgets.2.settings'),
    (e: unknown) => e instanceof ValidationError && e.message === 'ERR - widgets.2.settings.windowSeconds must be at least 10',
  );
});

rules('given the document, then the widget cap of create and layout is the one the decider keeps for add and duplicate', () => {
  const schemas = loadOpenApi().components.schemas as Record<string, { properties: { widgets: { maxItems?: number } } }>;
  assert.is(schemas.DashboardCreate!.properties.widgets.maxItems, MAX_WIDGETS);
  assert.is(schemas.DashboardPatch!.properties.widgets.maxItems, MAX_WIDGETS);
});

rules('given the document, then the name limit a duplicate keeps to is the one of DashboardName', () => {
  const schemas = loadOpenApi().components.schemas as Record<string, { maxLength?: number }>;
  assert.is(schemas.DashboardName!.maxLength, NAME_MAX);
});

rules.run();
