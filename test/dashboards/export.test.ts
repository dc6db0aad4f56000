import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount } from '../users/given.js';
import { TEMPLATES, getDashboard, givenDashboard, sameJson } from './given.js';

const io = suite<{ t: TestPlatform }>('dashboard export and import');

io.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
io.after(async (ctx) => {
  await ctx.t.stop();
});

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

async function uploadImage(t: TestPlatform, name: string, category: string): Promise<string> {
  const form = new FormData();
  form.append('name', name);
  form.append('category', category);
  form.append('image', new Blob([PNG], { type: 'image/png' }), 'plan.png');
  const res = await fetch(`${t.baseUrl}/api/images`, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}` }, body: form });
  assert.is(res.status, 201);
  return ((await res.json()) as { _id: string })._id;
}

const exportOf = async (t: TestPlatform, id: string) => Buffer.from((await t.call('GET', `/api/dashboards/${id}`)).text, 'utf8').toString('base64');
const decode = (exported: string) => JSON.parse(Buffer.from(exported, 'base64').toString('utf8'));
const withoutIds = (d: any) => ({ ...d, _id: undefined, widgets: d.widgets.map((w: any) => ({ ...w, _id: undefined })) });

io('given a dashboard with every template built through REST, when its export is decoded and POSTed, then the copy matches it in everything but the ids', async ({ t }) => {
  const plan = await uploadImage(t, 'Floor plan', 'floorPlan');
  const logo = await uploadImage(t, 'Logo', 'widget');
  const created = await givenDashboard(t, {
    name: 'Site overview',
    title: 'Site A',
    description: 'All sensors of site A',
    headerSettings: { titleFontSize: 32, titleFontWeight: '600', titleColor: '#0a0a0a', descriptionFontSize: 14, descriptionColor: 'grey', fontFamily: 'Inter', align: 'left' },
  });
  const ids: string[] = [];
  for (const [template, c] of Object.entries(TEMPLATES)) {
    let settings: Record<string, unknown> = { ...c.minimal, ...c.optional };
    if (template === 'floorPlan') settings = { ...settings, imageId: plan };
    if (template === 'image') settings = { ...settings, imageId: logo };
    const res = await t.call('POST', `/api/dashboards/${created._id}/widgets`, { body: { template, settings } });
    assert.is(res.status, 201, `${template}: ${res.text}`);
    ids.push(res.body._id);
  }
  // Lay the widgets out row by row, as a person arranging the grid would.
  let x = 0;
  let y = 0;
  const layout = Object.values(TEMPLATES).map((c, i) => {
    const [width, height] = c.size;
    if (x + width > 24) {
      x = 0;
      y += 14;
    }
    const place = { _id: ids[i], x, y, width, height };
    x += width;
    return place;
  });
  assert.is((await t.call('PATCH', `/api/dashboards/${created._id}`, { body: { widgets: layout } })).status, 200);

  const exported = await exportOf(t, created._id);
  const before = (await t.call('GET', '/api/dashboards')).body.length;
  const res = await t.call('POST', '/api/dashboards', { body: decode(exported) });
  assert.is(res.status, 201, res.text);
  assert.is.not(res.body._id, created._id);
  assert.is((await t.call('GET', '/api/dashboards')).body.length, before + 1);

  const original = await getDashboard(t, created._id);
  const copy = await getDashboard(t, res.body._id);
  assert.is(copy.widgets.length, 17);
  assert.ok(copy.widgets.every((w: any, i: number) => w._id !== original.widgets[i]._id));
  sameJson(withoutIds(copy), withoutIds(original));
  assert.ok(copy.widgets.every((w: any) => !('_broken' in w)));
  // Ids inside settings are copied as given.
  assert.is(copy.widgets.find((w: any) => w.template === 'floorPlan').settings.imageId, plan);
  // The copy exports to the same document, ids aside.
  sameJson(withoutIds(decode(await exportOf(t, copy._id))), withoutIds(decode(exported)));
});

io('when an import carries _id fields, then they are ignored and never reused', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'Source', widgets: [{ template: 'text', settings: TEMPLATES.text!.minimal }] });
  const exported = decode(await exportOf(t, d._id));
  const first = await t.call('POST', '/api/dashboards', { body: exported });
  const second = await t.call('POST', '/api/dashboards', { body: exported });
  assert.is(first.status, 201, first.text);
  assert.is(second.status, 201, second.text);
  const all = [d._id, first.body._id, second.body._id, d.widgets[0]._id, first.body.widgets[0]._id, second.body.widgets[0]._id];
  assert.is(new Set(all).size, 6);
  assert.is((await getDashboard(t, d._id)).widgets.length, 1);
});

io('when an import holds a broken widget, then 422 and nothing is imported', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'Has a broken one', widgets: [{ template: 'text', settings: TEMPLATES.text!.minimal }] });
  const { store, projections } = t.platform.deps;
  const result = await store.append(
    `dashboard-${d._id}`,
    [
      {
        id: randomUUID(),
        type: 'WidgetAdded',
        data: { id: d._id, widget: { id: 'abcdefabcdefabcdefabcdef', x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: { deviceId: 'a', field: 'b' } }, at: new Date().toISOString() },
        metadata: { actor: 'system:test', correlationId: randomUUID(), time: new Date().toISOString() },
      },
    ],
    'exists',
  );
  await projections.waitFor(result.position, 5000);
  const exported = decode(await exportOf(t, d._id));
  assert.is(exported.widgets[1]._broken, true);
  const dashboards = (await t.call('GET', '/api/dashboards')).body.length;
  const events = await eventCount(t);
  const res = await t.call('POST', '/api/dashboards', { body: exported });
  assert.is(res.status, 422);
  assert.match(res.text, /^ERR - widgets\.1\._broken /);
  // Without the marker, the stored settings fail the template's rules just the same.
  const { _broken, error, ...unmarked } = exported.widgets[1];
  const again = await t.call('POST', '/api/dashboards', { body: { ...exported, widgets: [exported.widgets[0], unmarked] } });
  assert.is(again.status, 422);
  assert.is(again.text, 'ERR - widgets.1.settings.display is required');
  assert.is((await t.call('GET', '/api/dashboards')).body.length, dashboards);
  assert.is(await eventCount(t), events);
});

io('when one widget of many fails validation, then 422 names it and nothing is created', async ({ t }) => {
  const widgets = Object.entries(TEMPLATES).map(([template, c]) => ({ template, settings: c.minimal }));
  widgets[5] = { template: 'swimlane', settings: { signals: [{ deviceId: 'a', field: 'b' }], windowSeconds: 4000 } };
  const dashboards = (await t.call('GET', '/api/dashboards')).body.length;
  const events = await eventCount(t);
  const res = await t.call('POST', '/api/dashboards', { body: { name: 'Half', widgets } });
  assert.is(res.status, 422);
  assert.is(res.text, 'ERR - widgets.5.settings.windowSeconds must be at most 3600');
  assert.is((await t.call('GET', '/api/dashboards')).body.length, dashboards);
  assert.is(await eventCount(t), events);
});

io('when an import is created, then it is a single event: all of it or none of it', async ({ t }) => {
  const widgets = Object.entries(TEMPLATES).map(([template, c]) => ({ template, settings: c.minimal }));
  const res = await t.call('POST', '/api/dashboards', { body: { name: 'Atomic', widgets } });
  assert.is(res.status, 201, res.text);
  const events = await t.platform.deps.store.readStream(`dashboard-${res.body._id}`);
  assert.equal(events.map((e) => e.type), ['DashboardCreated']);
  assert.is((events[0]!.data as any).widgets.length, 17);
});

io.run();
