import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { TEMPLATES, getDashboard, givenDashboard, givenWidget, sameJson } from './given.js';

const broken = suite<{ t: TestPlatform }>('broken widgets');

broken.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
broken.after(async (ctx) => {
  await ctx.t.stop();
});

/** A widget as an older version of the platform stored it: an event appended straight to the dashboard's stream. */
async function storedEarlier(t: TestPlatform, dashboardId: string, widget: Record<string, unknown>): Promise<void> {
  const { store, projections } = t.platform.deps;
  const result = await store.append(
    `dashboard-${dashboardId}`,
    [{ id: randomUUID(), type: 'WidgetAdded', data: { id: dashboardId, widget, at: new Date().toISOString() }, metadata: { actor: 'system:test', correlationId: randomUUID(), time: new Date().toISOString() } }],
    'exists',
  );
  await projections.waitFor(result.position, 5000);
}

const oldDeviceValue = { deviceId: 'aaaaaaaaaaaaaaaaaaaaaaaa', field: 'temperature', color: 'red', shouldShowHeading: true, shouldShowSubheading: true };

broken('given a deviceValue stored before display was required, when the dashboard is read, then that widget is marked broken naming display, its settings unchanged, and the rest is unaffected', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'Old', widgets: [{ x: 0, y: 0, width: 7, height: 2, template: 'text', settings: TEMPLATES.text!.minimal }] });
  await storedEarlier(t, d._id, { id: '0123456789abcdef01234567', x: 7, y: 0, width: 3, height: 4, template: 'deviceValue', settings: oldDeviceValue });
  const res = await t.call('GET', `/api/dashboards/${d._id}`);
  assert.is(res.status, 200);
  const [fine, old] = res.body.widgets;
  assert.not.ok('_broken' in fine);
  assert.not.ok('error' in fine);
  assert.equal(old, { _id: '0123456789abcdef01234567', x: 7, y: 0, width: 3, height: 4, template: 'deviceValue', settings: oldDeviceValue, _broken: true, error: 'settings.display is required' });
  const listed = (await t.call('GET', '/api/dashboards')).body.find((x: any) => x._id === d._id);
  assert.equal(listed.widgets[1], old);
});

broken('given a stored setting that today is unknown or out of range, when read, then the widget is broken and the error names the setting and why', async ({ t }) => {
  const d = await givenDashboard(t);
  await storedEarlier(t, d._id, { id: '0123456789abcdef0123456a', x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: { ...TEMPLATES.deviceValue!.minimal, legacyGauge: true } });
  await storedEarlier(t, d._id, { id: '0123456789abcdef0123456b', x: 0, y: 4, width: 8, height: 8, template: 'swimlane', settings: { signals: [{ deviceId: 'a', field: 'b' }], windowSeconds: 5 } });
  const [unknown, range] = (await getDashboard(t, d._id)).widgets;
  assert.is(unknown._broken, true);
  assert.is(unknown.error, 'settings.legacyGauge is not allowed');
  assert.is(range._broken, true);
  assert.is(range.error, 'settings.windowSeconds must be at least 10');
  assert.is(range.settings.windowSeconds, 5);
});

broken('given a widget whose stored content is missing, when read, then it comes back as template unknown with error Widget not found', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'Lost', widgets: [{ template: 'text', settings: TEMPLATES.text!.minimal }] });
  await storedEarlier(t, d._id, { id: '0123456789abcdef0123456c', x: 3, y: 3, width: 4, height: 4 });
  const got = await getDashboard(t, d._id);
  assert.is(got.widgets.length, 2);
  assert.not.ok('_broken' in got.widgets[0]);
  const lost = got.widgets[1];
  assert.is(lost.template, 'unknown');
  assert.is(lost.error, 'Widget not found');
  assert.equal([lost._id, lost.x, lost.y, lost.width, lost.height], ['0123456789abcdef0123456c', 3, 3, 4, 4]);
});

broken('given a widget of a template that no longer exists, when read, then it is broken and says so', async ({ t }) => {
  const d = await givenDashboard(t);
  await storedEarlier(t, d._id, { id: '0123456789abcdef0123456d', x: 0, y: 0, width: 4, height: 4, template: 'clock', settings: { zone: 'UTC' } });
  const w = (await getDashboard(t, d._id)).widgets[0];
  assert.equal([w.template, w._broken, w.error], ['clock', true, 'template clock is not a widget template']);
  assert.equal(w.settings, { zone: 'UTC' });
});

broken('given a broken widget, when PUT sends valid settings for its template, then it is repaired and no longer marked', async ({ t }) => {
  const d = await givenDashboard(t);
  await storedEarlier(t, d._id, { id: '0123456789abcdef0123456e', x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: oldDeviceValue });
  const res = await t.call('PUT', `/api/dashboards/${d._id}/widgets/0123456789abcdef0123456e`, { body: { template: 'deviceValue', settings: { ...oldDeviceValue, display: 'text' } } });
  assert.is(res.status, 201, res.text);
  const w = (await getDashboard(t, d._id)).widgets[0];
  assert.not.ok('_broken' in w);
  assert.not.ok('error' in w);
  sameJson(w.settings, { ...oldDeviceValue, display: 'text', showSparkline: false });
});

broken('given a widget with missing content, when PUT gives it a template and valid settings, then it is repaired', async ({ t }) => {
  const d = await givenDashboard(t);
  await storedEarlier(t, d._id, { id: '0123456789abcdef0123456f', x: 0, y: 0, width: 4, height: 4 });
  const res = await t.call('PUT', `/api/dashboards/${d._id}/widgets/0123456789abcdef0123456f`, { body: { template: 'map', settings: {} } });
  assert.is(res.status, 201, res.text);
  const w = (await getDashboard(t, d._id)).widgets[0];
  assert.equal([w.template, w._broken], ['map', undefined]);
});

broken('given a broken widget, when other widgets are added, moved or the header changes, then those changes work and the widget stays broken', async ({ t }) => {
  const d = await givenDashboard(t);
  await storedEarlier(t, d._id, { id: '0123456789abcdef01234570', x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: oldDeviceValue });
  const other = await givenWidget(t, d._id, 'text');
  const patch = await t.call('PATCH', `/api/dashboards/${d._id}`, {
    body: { name: 'Still works', widgets: [{ _id: '0123456789abcdef01234570', x: 5, y: 0, width: 3, height: 4 }, { _id: other._id, x: 0, y: 0, width: 5, height: 2 }] },
  });
  assert.is(patch.status, 200, patch.text);
  const got = await getDashboard(t, d._id);
  assert.is(got.name, 'Still works');
  assert.equal([got.widgets[0].x, got.widgets[0]._broken], [5, true]);
});

broken('given stored settings that leave out a defaulted setting, when read twice, then the widget is not broken and its settings come back as stored, the stored event unchanged', async ({ t }) => {
  const d = await givenDashboard(t);
  const stored = { ...TEMPLATES.deviceValue!.minimal };
  await storedEarlier(t, d._id, { id: '0123456789abcdef01234571', x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: stored });
  for (let i = 0; i < 2; i++) {
    const w = (await getDashboard(t, d._id)).widgets[0];
    assert.not.ok('_broken' in w);
    sameJson(w.settings, stored);
    assert.not.ok('showSparkline' in w.settings);
  }
  const events = await t.platform.deps.store.readStream(`dashboard-${d._id}`);
  sameJson((events[1]!.data as any).widget.settings, stored);
});

broken('given a stored floorPlan or image with a setting unknown today, when read, then it is not broken (a write would drop it) and the setting comes back as stored', async ({ t }) => {
  const d = await givenDashboard(t);
  const floor = { ...TEMPLATES.floorPlan!.minimal, legacyZoom: 2 };
  const image = { ...TEMPLATES.image!.minimal, legacyFilter: 'sepia' };
  await storedEarlier(t, d._id, { id: '0123456789abcdef01234572', x: 0, y: 0, width: 10, height: 12, template: 'floorPlan', settings: floor });
  await storedEarlier(t, d._id, { id: '0123456789abcdef01234573', x: 10, y: 0, width: 6, height: 8, template: 'image', settings: image });
  const [f, i] = (await getDashboard(t, d._id)).widgets;
  assert.not.ok('_broken' in f);
  assert.not.ok('_broken' in i);
  sameJson(f.settings, floor);
  sameJson(i.settings, image);
});

broken.run();
