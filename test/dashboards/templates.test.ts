import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { DEVICE, TEMPLATES, getDashboard, givenDashboard, sameJson } from './given.js';

const templates = suite<{ t: TestPlatform; dashboardId: string }>('widget templates');

templates.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.dashboardId = (await givenDashboard(ctx.t, { name: 'Templates' }))._id;
});
templates.after(async (ctx) => {
  await ctx.t.stop();
});

const add = (t: TestPlatform, dashboardId: string, template: string, settings: unknown) =>
  t.call('POST', `/api/dashboards/${dashboardId}/widgets`, { body: { template, settings } });

for (const [template, c] of Object.entries(TEMPLATES)) {
  templates(`given ${template}, when only its required settings are sent, then it is added at x 0, y 99 in its default size with every default filled`, async ({ t, dashboardId }) => {
    const res = await add(t, dashboardId, template, c.minimal);
    assert.is(res.status, 201, res.text);
    assert.equal(Object.keys(res.body).sort(), ['_id', 'settings', 'template']);
    assert.is(res.body.template, template);
    sameJson(res.body.settings, { ...c.minimal, ...c.defaults });
    const widget = (await getDashboard(t, dashboardId)).widgets.find((w: any) => w._id === res.body._id);
    assert.equal([widget.x, widget.y, widget.width, widget.height], [0, 99, ...c.size]);
    sameJson(widget.settings, res.body.settings);
    assert.not.ok('_broken' in widget);
  });

  const required = Object.keys(c.minimal);
  templates(`given ${template}, when a required setting is left out, then 422 names it (${required.join(', ') || 'none required'})`, async ({ t, dashboardId }) => {
    for (const setting of required) {
      const { [setting]: _, ...rest } = c.minimal;
      const res = await add(t, dashboardId, template, rest);
      assert.is(res.status, 422, `${setting}: ${res.text}`);
      assert.is(res.text, `ERR - settings.${setting} is required`);
    }
    if (required.length === 0) assert.is((await add(t, dashboardId, template, {})).status, 201);
  });

  templates(`given ${template}, when its optional settings are sent, then each is stored as given`, async ({ t, dashboardId }) => {
    const settings = { ...c.minimal, ...c.optional };
    const res = await add(t, dashboardId, template, settings);
    assert.is(res.status, 201, res.text);
    sameJson(res.body.settings, { ...c.defaults, ...settings });
  });

  templates(`given ${template}, when an unknown setting is sent, then it is ${c.dropsUnknown ? 'dropped' : 'refused with 422'}`, async ({ t, dashboardId }) => {
    const res = await add(t, dashboardId, template, { ...c.minimal, bogus: 1 });
    if (c.dropsUnknown) {
      assert.is(res.status, 201, res.text);
      assert.not.ok('bogus' in res.body.settings);
    } else {
      assert.is(res.status, 422, res.text);
      assert.is(res.text, 'ERR - settings.bogus is not allowed');
    }
  });
}

/** The settings of `template`'s minimal case with `change` applied; the 422 text, or `ok`. */
async function judge(t: TestPlatform, dashboardId: string, template: string, change: Record<string, unknown>): Promise<string> {
  const res = await add(t, dashboardId, template, { ...TEMPLATES[template]!.minimal, ...change });
  return res.status === 201 ? 'ok' : `${res.status} ${res.text}`;
}

templates('when timePeriod is fiftenMinutes, then it is accepted; the other spelling is not a time period', async ({ t, dashboardId }) => {
  assert.is(await judge(t, dashboardId, 'deviceChart', { timePeriod: 'fiftenMinutes' }), 'ok');
  assert.match(await judge(t, dashboardId, 'deviceChart', { timePeriod: 'fifteenMinutes' }), /^422 ERR - settings\.timePeriod must be one of fiftenMinutes, /);
  // The resolution enumeration spells it the ordinary way.
  assert.is(await judge(t, dashboardId, 'deviceChart', { resolution: 'fifteenMinutes' }), 'ok');
});

templates('when timePeriod is custom without customFromTime or customToTime, then 422 names the missing one', async ({ t, dashboardId }) => {
  assert.is(await judge(t, dashboardId, 'deviceChart', { timePeriod: 'custom', customToTime: '2024-01-02T00:00:00Z' }), '422 ERR - settings.customFromTime is required when timePeriod is custom');
  assert.is(await judge(t, dashboardId, 'deviceChart', { timePeriod: 'custom', customFromTime: '2024-01-01T00:00:00Z' }), '422 ERR - settings.customToTime is required when timePeriod is custom');
  assert.is(await judge(t, dashboardId, 'multiDeviceChart', { timePeriod: 'custom' }), '422 ERR - settings.customFromTime is required when timePeriod is custom');
  assert.match(await judge(t, dashboardId, 'deviceChart', { timePeriod: 'custom', customFromTime: 'yesterday', customToTime: '2024-01-02T00:00:00Z' }), /^422 ERR - settings\.customFromTime must match format "date-time"/);
});

templates('when resolution is custom without customResolution, then 422 names it', async ({ t, dashboardId }) => {
  assert.is(await judge(t, dashboardId, 'deviceChart', { resolution: 'custom' }), '422 ERR - settings.customResolution is required when resolution is custom');
  assert.is(await judge(t, dashboardId, 'multiDeviceChart', { resolution: 'custom', customResolution: 60 }), 'ok');
});

templates('when a threshold carries operator, then the templates with condition thresholds take it and those with band thresholds refuse it', async ({ t, dashboardId }) => {
  const threshold = { value: 1, color: 'red', operator: 'gte' };
  assert.is(await judge(t, dashboardId, 'deviceValue', { thresholds: [threshold] }), '422 ERR - settings.thresholds.0.operator is not allowed');
  assert.is(await judge(t, dashboardId, 'multiDeviceValue', { items: [{ deviceId: DEVICE, field: 'f', thresholds: [threshold] }] }), '422 ERR - settings.items.0.thresholds.0.operator is not allowed');
  assert.is(await judge(t, dashboardId, 'dataTable', { columnConfigs: { f: { field: 'f', thresholds: [threshold] } } }), 'ok');
  assert.is(await judge(t, dashboardId, 'floorPlan', { deviceValues: [{ field: 'f', thresholds: [threshold] }] }), 'ok');
  assert.is(await judge(t, dashboardId, 'dataTable', { columnConfigs: { f: { field: 'f', thresholds: [{ ...threshold, operator: 'ne' }] } } }), '422 ERR - settings.columnConfigs.f.thresholds.0.operator must be one of gt, gte, eq, lte, lt');
  assert.is(await judge(t, dashboardId, 'deviceValue', { thresholds: [{ value: 'high', color: 'red' }] }), '422 ERR - settings.thresholds.0.value must be number');
  assert.is(await judge(t, dashboardId, 'deviceValue', { thresholds: [{ value: 3 }] }), '422 ERR - settings.thresholds.0.color is required');
});

templates('when a columnConfigs entry has a field other than its key, then 422 names it', async ({ t, dashboardId }) => {
  assert.is(await judge(t, dashboardId, 'dataTable', { columnConfigs: { temperature: { field: 'humidity' } } }), "422 ERR - settings.columnConfigs.temperature.field must equal its key 'temperature'");
  assert.is(await judge(t, dashboardId, 'dataTable', { columnConfigs: { temperature: { displayName: 'T' } } }), '422 ERR - settings.columnConfigs.temperature.field is required');
  assert.is(await judge(t, dashboardId, 'dataTable', { columnConfigs: { 'a.b': { field: 'a.b' } } }), 'ok');
});

templates('when floorPlan devices have null positions or carry unknown fields, then they are stored unplaced and the unknown fields dropped', async ({ t, dashboardId }) => {
  const res = await add(t, dashboardId, 'floorPlan', { ...TEMPLATES.floorPlan!.minimal, devices: [{ deviceId: DEVICE, x: null, y: null, colour: 'x' }, { deviceId: DEVICE }], legacy: true });
  assert.is(res.status, 201, res.text);
  assert.equal(res.body.settings.devices, [
    { deviceId: DEVICE, x: null, y: null },
    { deviceId: DEVICE, x: null, y: null },
  ]);
  assert.not.ok('legacy' in res.body.settings);
});

templates('when a range limit is crossed, then 422 names the setting and the limit; the limits themselves are accepted', async ({ t, dashboardId }) => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['multiDeviceValue', { columns: 0 }, 'settings.columns must be at least 1'],
    ['multiDeviceValue', { columns: 7 }, 'settings.columns must be at most 6'],
    ['swimlane', { windowSeconds: 9 }, 'settings.windowSeconds must be at least 10'],
    ['swimlane', { windowSeconds: 3601 }, 'settings.windowSeconds must be at most 3600'],
    ['geomap', { trailLength: -1 }, 'settings.trailLength must be at least 0'],
    ['geomap', { trailLength: 201 }, 'settings.trailLength must be at most 200'],
    ['text', { opacity: 9 }, 'settings.opacity must be at least 10'],
    ['text', { opacity: 101 }, 'settings.opacity must be at most 100'],
    ['floorPlan', { name: '' }, 'settings.name must have at least 1 character'],
    ['floorPlan', { name: 'x'.repeat(31) }, 'settings.name must have at most 30 characters'],
    ['floorPlan', { gridCellSize: 0 }, 'settings.gridCellSize must be at least 1'],
    ['floorPlan', { gridCellSize: 1.5 }, 'settings.gridCellSize must be integer'],
    ['deviceValue', { field: '' }, 'settings.field must have at least 1 character'],
    ['pieChart', { devices: [] }, 'settings.devices must have at least 1 item'],
    ['dataTable', { devices: [{ deviceId: DEVICE, fields: [] }] }, 'settings.devices.0.fields must have at least 1 item'],
    ['multiDeviceChart', { deviceFieldPairs: [] }, 'settings.deviceFieldPairs must have at least 1 item'],
    ['commandButtons', { buttons: [] }, 'settings.buttons must have at least 1 item'],
    ['text', { text: '' }, 'settings.text must have at least 1 character'],
    ['deviceValue', { shouldShowHeading: 'yes' }, 'settings.shouldShowHeading must be boolean'],
  ];
  for (const [template, change, message] of cases) assert.is(await judge(t, dashboardId, template, change), `422 ERR - ${message}`, `${template} ${JSON.stringify(change)}`);
  const limits: [string, Record<string, unknown>][] = [
    ['multiDeviceValue', { columns: 1 }],
    ['multiDeviceValue', { columns: 6 }],
    ['swimlane', { windowSeconds: 10 }],
    ['swimlane', { windowSeconds: 3600 }],
    ['geomap', { trailLength: 0 }],
    ['geomap', { trailLength: 200 }],
    ['text', { opacity: 10 }],
    ['text', { opacity: 100 }],
    ['floorPlan', { name: 'x' }],
    ['floorPlan', { name: 'x'.repeat(30) }],
    ['floorPlan', { gridCellSize: 1 }],
    ['floorPlan', { gridCellSize: null }],
  ];
  for (const [template, change] of limits) assert.is(await judge(t, dashboardId, template, change), 'ok', `${template} ${JSON.stringify(change)}`);
});

templates('given a text widget, when its opacity is any number from 10 to 100, fractions too, then it is stored as given; just outside, then 422', async ({ t, dashboardId }) => {
  for (const opacity of [10.5, 50.25, 99.9]) {
    const res = await add(t, dashboardId, 'text', { ...TEMPLATES.text!.minimal, opacity });
    assert.is(res.status, 201, `${opacity}: ${res.text}`);
    assert.is(res.body.settings.opacity, opacity);
  }
  assert.is(await judge(t, dashboardId, 'text', { opacity: 9.99 }), '422 ERR - settings.opacity must be at least 10');
  assert.is(await judge(t, dashboardId, 'text', { opacity: 100.01 }), '422 ERR - settings.opacity must be at most 100');
});

templates('when an enumerated setting has a value outside its list, then 422 lists the allowed values', async ({ t, dashboardId }) => {
  assert.is(await judge(t, dashboardId, 'deviceValue', { display: 'dial' }), '422 ERR - settings.display must be one of text, circle, bar, gauge');
  assert.is(await judge(t, dashboardId, 'image', { verticalAlignment: 'up' }), '422 ERR - settings.verticalAlignment must be one of upp, center, low');
  assert.is(await judge(t, dashboardId, 'resourceCount', { resource: 'users' }), '422 ERR - settings.resource must be one of devices, locations, organizations, apps, rules');
  assert.is(await judge(t, dashboardId, 'logs', { type: ['fatal'] }), '422 ERR - settings.type.0 must be one of error, warning, info, verbose, debug');
  assert.is(await judge(t, dashboardId, 'logs', { timeRange: { start: { type: 'absolute', amount: 1, unit: 'h' }, end: { type: 'now' } } }), '422 ERR - settings.timeRange.start.type must be one of relative');
  assert.is(await judge(t, dashboardId, 'text', { fontSize: '7xl' }), '422 ERR - settings.fontSize must be one of xs, sm, md, lg, xl, 2xl, 3xl, 4xl, 5xl, 6xl');
  assert.is(await judge(t, dashboardId, 'multiDeviceChart', { chartType: 'pie' }), '422 ERR - settings.chartType must be one of line, area, bar, stackedBar');
});

templates('when ids in settings point nowhere, then they are stored as given', async ({ t, dashboardId }) => {
  const res = await add(t, dashboardId, 'navigation', { targetDashboardId: 'not-a-dashboard-at-all' });
  assert.is(res.status, 201, res.text);
  assert.is(res.body.settings.targetDashboardId, 'not-a-dashboard-at-all');
});

templates('when settings are not an object, then 422', async ({ t, dashboardId }) => {
  const res = await add(t, dashboardId, 'text', ['Hello']);
  assert.is(res.status, 422, res.text);
  assert.match(res.text, /^ERR - settings /);
});

templates.run();
