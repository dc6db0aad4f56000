import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount } from '../users/given.js';
import { TEMPLATES, getDashboard, givenDashboard, givenWidget, sameJson } from './given.js';

const api = suite<{ t: TestPlatform }>('dashboards REST');

api.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
api.after(async (ctx) => {
  await ctx.t.stop();
});

const text = TEMPLATES.text!.minimal;
const value = TEMPLATES.deviceValue!.minimal;

api('when a dashboard is created with widgets, then 201 lists each widget with its place only, and GET shows all six fields plus _id', async ({ t }) => {
  const res = await t.call('POST', '/api/dashboards', {
    body: {
      name: 'Plant',
      title: 'Plant overview',
      description: 'Building A',
      headerSettings: { titleFontSize: 24, titleFontWeight: 'bold', titleColor: '#123456', descriptionFontSize: 12, descriptionColor: 'grey', fontFamily: 'Inter', align: 'center' },
      widgets: [
        { x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: value },
        { x: 3, y: 0, width: 7, height: 2, template: 'text', settings: text },
      ],
    },
  });
  assert.is(res.status, 201, res.text);
  assert.match(res.body._id, /^[0-9a-f]{24}$/);
  assert.is(res.body.name, 'Plant');
  assert.is(res.body.widgets.length, 2);
  for (const w of res.body.widgets) assert.equal(Object.keys(w).sort(), ['_id', 'height', 'width', 'x', 'y']);
  assert.equal(res.body.widgets[1], { _id: res.body.widgets[1]._id, x: 3, y: 0, width: 7, height: 2 });

  const got = await getDashboard(t, res.body._id);
  assert.is(got.title, 'Plant overview');
  assert.is(got.description, 'Building A');
  assert.is(got.headerSettings.align, 'center');
  for (const w of got.widgets) assert.equal(Object.keys(w).sort(), ['_id', 'height', 'settings', 'template', 'width', 'x', 'y']);
  assert.equal(got.widgets.map((w: any) => w._id), res.body.widgets.map((w: any) => w._id));
  assert.is(got.widgets[0].template, 'deviceValue');
  sameJson(got.widgets[0].settings, { ...value, showSparkline: false });
});

api('when a widget of a new dashboard leaves out its place, then it goes to x 0, y 99 in the template default size', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'No places', widgets: [{ template: 'logs', settings: {} }] });
  assert.equal(d.widgets[0], { _id: d.widgets[0]._id, x: 0, y: 99, width: 14, height: 14 });
});

api('when a widget is added, then 201 answers {_id, template, settings} with defaults, and it sits at x 0, y 99 with the size asked for', async ({ t }) => {
  const d = await givenDashboard(t);
  const res = await t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { width: 5, height: 3, template: 'swimlane', settings: TEMPLATES.swimlane!.minimal } });
  assert.is(res.status, 201, res.text);
  assert.equal(Object.keys(res.body).sort(), ['_id', 'settings', 'template']);
  assert.is(res.body.settings.windowSeconds, 60);
  const w = (await getDashboard(t, d._id)).widgets[0];
  assert.equal([w.x, w.y, w.width, w.height], [0, 99, 5, 3]);
});

api('when a widget is added with x and y in the body, then they are ignored and it lands at x 0, y 99', async ({ t }) => {
  const d = await givenDashboard(t);
  const res = await t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { x: 12, y: 3, template: 'text', settings: text } });
  assert.is(res.status, 201, res.text);
  const w = (await getDashboard(t, d._id)).widgets[0];
  assert.equal([w._id, w.x, w.y, w.width, w.height], [res.body._id, 0, 99, 7, 2]);
});

api('when a new dashboard has a widget with a bad place before one with bad settings, then 422 names the first widget, and nothing is stored', async ({ t }) => {
  const before = await eventCount(t);
  const badPlace = { x: 20, y: 0, width: 5, height: 2, template: 'text', settings: text };
  const badSettings = { x: 0, y: 2, width: 7, height: 2, template: 'text', settings: { ...text, fontSize: 'huge' } };
  const res = await t.call('POST', '/api/dashboards', { body: { name: 'Order', widgets: [badPlace, badSettings] } });
  assert.is(res.status, 422, res.text);
  assert.is(res.text, 'ERR - widgets.0.width must be at most 4 at x 20 (x + width at most 24)');
  const reversed = await t.call('POST', '/api/dashboards', { body: { name: 'Order', widgets: [badSettings, badPlace] } });
  assert.is(reversed.status, 422, reversed.text);
  assert.match(reversed.text, /^ERR - widgets\.0\.settings\.fontSize must be one of /);
  // In one widget the place is judged before the settings.
  const both = await t.call('POST', '/api/dashboards', { body: { name: 'Order', widgets: [{ ...badPlace, settings: badSettings.settings }] } });
  assert.is(both.text, 'ERR - widgets.0.width must be at most 4 at x 20 (x + width at most 24)');
  assert.is(await eventCount(t), before);
});

api('when a dashboard holds 500 widgets, then adding or duplicating one more gets 422 naming widgets and changes nothing; after a delete there is room again', async ({ t }) => {
  const widgets = Array.from({ length: 500 }, () => ({ template: 'map', settings: {} }));
  const d = await givenDashboard(t, { name: 'Full', widgets });
  assert.is(d.widgets.length, 500);
  const before = await eventCount(t);
  const add = await t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { template: 'text', settings: text } });
  assert.is(add.status, 422, add.text);
  assert.is(add.text, 'ERR - widgets must NOT have more than 500 items');
  const dup = await t.call('POST', `/api/dashboards/${d._id}/widgets/${d.widgets[0]._id}/duplicate`);
  assert.is(dup.status, 422, dup.text);
  assert.is(dup.text, 'ERR - widgets must NOT have more than 500 items');
  assert.is(await eventCount(t), before);
  assert.is((await getDashboard(t, d._id)).widgets.length, 500);
  assert.is((await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${d.widgets[0]._id}`)).status, 204);
  assert.is((await t.call('POST', `/api/dashboards/${d._id}/widgets/${d.widgets[1]._id}/duplicate`)).status, 201);
  // The dashboard as it stands can still be laid out and imported whole.
  const got = await getDashboard(t, d._id);
  assert.is(got.widgets.length, 500);
  const layout = got.widgets.map((w: any) => ({ _id: w._id, x: w.x, y: w.y, width: w.width, height: 1 }));
  assert.is((await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { widgets: layout } })).status, 200);
  assert.is((await t.call('POST', '/api/dashboards', { body: got })).status, 201);
});

api('when a widget is added with a size below its template minimum, then the size is saved as given', async ({ t }) => {
  const d = await givenDashboard(t);
  await t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { width: 1, height: 1, template: 'dataTable', settings: TEMPLATES.dataTable!.minimal } });
  const w = (await getDashboard(t, d._id)).widgets[0];
  assert.equal([w.width, w.height], [1, 1]);
});

api('when a widget is replaced with PUT, then 201 with an empty body, left-out settings return to their defaults and the place is not read', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'multiDeviceValue', { ...TEMPLATES.multiDeviceValue!.minimal, columns: 5, colorMode: 'background' });
  const res = await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, {
    body: { template: 'multiDeviceValue', settings: { ...TEMPLATES.multiDeviceValue!.minimal, colorMode: 'background' }, x: 10, y: 1, width: 1, height: 1 },
  });
  assert.is(res.status, 201, res.text);
  assert.is(res.text, '');
  const stored = (await getDashboard(t, d._id)).widgets[0];
  assert.is(stored.settings.columns, 3);
  assert.is(stored.settings.colorMode, 'background');
  assert.equal([stored.x, stored.y, stored.width, stored.height], [0, 99, 8, 8]);
});

api('when PUT leaves out a setting that has no default, then 422 and the widget is unchanged', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'deviceValue');
  const { color: _, ...rest } = value;
  const res = await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { body: { template: 'deviceValue', settings: rest } });
  assert.is(res.status, 422);
  assert.is(res.text, 'ERR - settings.color is required');
  assert.is((await getDashboard(t, d._id)).widgets[0].settings.color, value.color);
});

api('when PUT names another template, then 403 Cannot change widget template', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'deviceValue');
  const res = await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { body: { template: 'text', settings: text } });
  assert.is(res.status, 403);
  assert.is(res.text, 'Cannot change widget template');
});

api('when PUT or DELETE names a widget that is not on the dashboard, then 404', async ({ t }) => {
  const d = await givenDashboard(t);
  const other = await givenDashboard(t, { name: 'Other' });
  const w = await givenWidget(t, other._id, 'text');
  assert.is((await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { body: { template: 'text', settings: text } })).status, 404);
  assert.is((await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${w._id}`)).status, 404);
  assert.is((await t.call('POST', `/api/dashboards/${d._id}/widgets/${w._id}/duplicate`)).status, 404);
});

api('when the layout is patched with every widget, then 200 lists places only and the new places are stored; template and settings in it are ignored', async ({ t }) => {
  const d = await givenDashboard(t);
  const a = await givenWidget(t, d._id, 'text');
  const b = await givenWidget(t, d._id, 'deviceValue');
  const res = await t.call('PATCH', `/api/dashboards/${d._id}`, {
    body: {
      widgets: [
        { _id: a._id, x: 0, y: 0, width: 12, height: 2, template: 'image', settings: { anything: true } },
        { _id: b._id, x: 12, y: 0, width: 12, height: 6 },
      ],
    },
  });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body.widgets, [
    { _id: a._id, x: 0, y: 0, width: 12, height: 2 },
    { _id: b._id, x: 12, y: 0, width: 12, height: 6 },
  ]);
  const got = await getDashboard(t, d._id);
  assert.is(got.widgets[0].template, 'text');
  sameJson(got.widgets[0].settings, a.settings);
  assert.equal([got.widgets[1].x, got.widgets[1].width], [12, 12]);
});

api('when the layout leaves out a widget, then 422 All existing widgets must be provided', async ({ t }) => {
  const d = await givenDashboard(t);
  const a = await givenWidget(t, d._id, 'text');
  await givenWidget(t, d._id, 'text');
  const res = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { widgets: [{ _id: a._id, x: 0, y: 0, width: 1, height: 1 }] } });
  assert.is(res.status, 422);
  assert.is(res.text, 'All existing widgets must be provided');
});

api('when the layout lists one widget twice instead of two, then 422 All existing widgets must be provided', async ({ t }) => {
  const d = await givenDashboard(t);
  const a = await givenWidget(t, d._id, 'text');
  await givenWidget(t, d._id, 'text');
  const place = { _id: a._id, x: 0, y: 0, width: 1, height: 1 };
  const res = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { widgets: [place, place] } });
  assert.is(res.status, 422);
  assert.is(res.text, 'All existing widgets must be provided');
});

api('when the layout names a widget that is not on the dashboard, then 404 and nothing moves', async ({ t }) => {
  const d = await givenDashboard(t);
  const a = await givenWidget(t, d._id, 'text');
  const res = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { name: 'Renamed', widgets: [{ _id: 'ffffffffffffffffffffffff', x: 0, y: 0, width: 1, height: 1 }] } });
  assert.is(res.status, 404);
  const got = await getDashboard(t, d._id);
  assert.is(got.name, 'Plant');
  assert.equal([got.widgets[0]._id, got.widgets[0].y], [a._id, 99]);
});

api('when the layout puts a widget past the 24th column, then 422 names it', async ({ t }) => {
  const d = await givenDashboard(t);
  const a = await givenWidget(t, d._id, 'text');
  const res = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { widgets: [{ _id: a._id, x: 20, y: 0, width: 5, height: 1 }] } });
  assert.is(res.status, 422);
  assert.is(res.text, 'ERR - widgets.0.width must be at most 4 at x 20 (x + width at most 24)');
  const wide = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { widgets: [{ _id: a._id, x: 0, y: 0, width: 25, height: 1 }] } });
  assert.is(wide.status, 422);
  assert.match(wide.text, /^ERR - widgets\.0\.width /);
});

api('when PATCH sends a field other than name, title, description, headerSettings, widgets, then 422', async ({ t }) => {
  const d = await givenDashboard(t);
  for (const body of [{ _id: d._id }, { owner: 'me' }, { name: 'x', createdAt: 'now' }]) {
    const res = await t.call('PATCH', `/api/dashboards/${d._id}`, { body });
    assert.is(res.status, 422, JSON.stringify(body));
    assert.match(res.text, /^ERR - /);
  }
  assert.is((await getDashboard(t, d._id)).name, 'Plant');
  assert.is((await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { owner: 'me' } })).text, 'ERR - owner is not allowed');
  assert.is((await t.call('POST', '/api/dashboards', { body: { title: 'no name' } })).text, 'ERR - name is required');
});

api('when PATCH sends only header fields, then they change and the widgets stay', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'Plant', title: 'Old', widgets: [{ x: 1, y: 2, width: 3, height: 4, template: 'text', settings: text }] });
  const res = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { name: 'Plant 2', description: 'New', headerSettings: { align: 'right' } } });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body.widgets, d.widgets);
  const got = await getDashboard(t, d._id);
  assert.equal([got.name, got.title, got.description, got.headerSettings], ['Plant 2', 'Old', 'New', { align: 'right' }]);
});

api('when a header field breaks a limit, then 422 names it', async ({ t }) => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ name: 'x'.repeat(51) }, /^ERR - name /],
    [{ name: 'ok', title: 'x'.repeat(101) }, /^ERR - title /],
    [{ name: 'ok', description: 'x'.repeat(201) }, /^ERR - description /],
    [{ name: 'ok', headerSettings: { titleFontSize: 9 } }, /^ERR - headerSettings\.titleFontSize /],
    [{ name: 'ok', headerSettings: { titleFontSize: 73 } }, /^ERR - headerSettings\.titleFontSize /],
    [{ name: 'ok', headerSettings: { descriptionFontSize: 7 } }, /^ERR - headerSettings\.descriptionFontSize /],
    [{ name: 'ok', headerSettings: { descriptionFontSize: 37 } }, /^ERR - headerSettings\.descriptionFontSize /],
    [{ name: 'ok', headerSettings: { titleColor: 'x'.repeat(51) } }, /^ERR - headerSettings\.titleColor /],
    [{ name: 'ok', headerSettings: { descriptionColor: 'x'.repeat(51) } }, /^ERR - headerSettings\.descriptionColor /],
    [{ name: 'ok', headerSettings: { fontFamily: 'x'.repeat(101) } }, /^ERR - headerSettings\.fontFamily /],
    [{ name: 'ok', headerSettings: { align: 'justify' } }, /^ERR - headerSettings\.align /],
    [{ name: 'ok', headerSettings: { shadow: true } }, /^ERR - headerSettings/],
    [{ title: 'no name' }, /^ERR - name /],
  ];
  const before = await eventCount(t);
  for (const [body, message] of cases) {
    const res = await t.call('POST', '/api/dashboards', { body });
    assert.is(res.status, 422, JSON.stringify(body));
    assert.match(res.text, message);
  }
  assert.is(await eventCount(t), before);
  const limits = { name: 'x'.repeat(50), title: 'x'.repeat(100), description: 'x'.repeat(200), headerSettings: { titleFontSize: 72, descriptionFontSize: 8, titleColor: 'x'.repeat(50), fontFamily: 'x'.repeat(100) } };
  assert.is((await t.call('POST', '/api/dashboards', { body: limits })).status, 201);
});

api('when a dashboard is duplicated, then the copy is named "<name> (copy)", keeps every widget in the same layout, and drops title, description and headerSettings', async ({ t }) => {
  const d = await givenDashboard(t, {
    name: 'Plant',
    title: 'T',
    description: 'D',
    headerSettings: { align: 'left' },
    widgets: [
      { x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: value },
      { x: 3, y: 1, width: 7, height: 2, template: 'text', settings: text },
    ],
  });
  const res = await t.call('POST', `/api/dashboards/${d._id}/duplicate`);
  assert.is(res.status, 201, res.text);
  assert.is(res.body.name, 'Plant (copy)');
  assert.is.not(res.body._id, d._id);
  const original = await getDashboard(t, d._id);
  const copy = await getDashboard(t, res.body._id);
  assert.equal(Object.keys(copy).sort(), ['_id', 'name', 'widgets']);
  assert.is(copy.widgets.length, 2);
  copy.widgets.forEach((w: any, i: number) => {
    const o = original.widgets[i];
    assert.is.not(w._id, o._id);
    assert.equal({ ...w, _id: o._id }, o);
  });
});

api('given a dashboard whose name ends in spaces, when it is duplicated, then the copy keeps them: "<name> (copy)" exactly', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'My board ', widgets: [] });
  const res = await t.call('POST', `/api/dashboards/${d._id}/duplicate`);
  assert.is(res.status, 201, res.text);
  assert.is(res.body.name, 'My board  (copy)');
  assert.is((await getDashboard(t, res.body._id)).name, 'My board  (copy)');
});

api('when a widget is duplicated, then the copy has the same settings, size and place on the same dashboard', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'P', widgets: [{ x: 2, y: 3, width: 4, height: 5, template: 'geomap', settings: TEMPLATES.geomap!.minimal }] });
  const source = d.widgets[0];
  const res = await t.call('POST', `/api/dashboards/${d._id}/widgets/${source._id}/duplicate`);
  assert.is(res.status, 201, res.text);
  assert.match(res.body._id, /^[0-9a-f]{24}$/);
  const got = await getDashboard(t, d._id);
  assert.is(got.widgets.length, 2);
  const [a, b] = got.widgets;
  assert.is(b._id, res.body._id);
  assert.equal({ ...b, _id: a._id }, a);
  assert.equal([b.x, b.y, b.width, b.height], [2, 3, 4, 5]);
});

api('when a widget is deleted, then 204 and it is gone', async ({ t }) => {
  const d = await givenDashboard(t);
  const a = await givenWidget(t, d._id, 'text');
  const b = await givenWidget(t, d._id, 'text');
  const res = await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${a._id}`);
  assert.is(res.status, 204);
  assert.equal((await getDashboard(t, d._id)).widgets.map((w: any) => w._id), [b._id]);
  assert.is((await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${a._id}`)).status, 404);
});

api('when a dashboard is deleted, then 204, it is gone with its widgets and its access rights', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'Doomed', widgets: [{ template: 'text', settings: text }] });
  const rights = () => t.platform.deps.db.selectFrom('access_rights').selectAll().where('resource_id', '=', d._id).execute();
  assert.is((await rights()).length, 1);
  const res = await t.call('DELETE', `/api/dashboards/${d._id}`);
  assert.is(res.status, 204);
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`)).status, 404);
  assert.is((await rights()).length, 0);
  assert.not.ok((await t.call('GET', '/api/dashboards')).body.some((x: any) => x._id === d._id));
  assert.is((await t.call('DELETE', `/api/dashboards/${d._id}`)).status, 404);
  assert.is((await t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { template: 'text', settings: text } })).status, 404);
});

api('when dashboards are listed, then each comes with full widgets', async ({ t }) => {
  const d = await givenDashboard(t, { name: 'Listed', widgets: [{ template: 'text', settings: text }] });
  const res = await t.call('GET', '/api/dashboards');
  assert.is(res.status, 200);
  const listed = res.body.find((x: any) => x._id === d._id);
  assert.equal(listed, await getDashboard(t, d._id));
});

api('when ids of the wrong shape are used, then 4xx and never 500', async ({ t }) => {
  const d = await givenDashboard(t);
  for (const [method, path] of [
    ['GET', '/api/dashboards/123'],
    ['GET', '/api/dashboards/ZZZZZZZZZZZZZZZZZZZZZZZZ'],
    ['PATCH', '/api/dashboards/not-an-id'],
    ['DELETE', `/api/dashboards/${d._id}/widgets/xyz`],
    ['PUT', `/api/dashboards/${d._id}/widgets/xyz`],
    ['POST', `/api/dashboards/${d._id}/widgets/1/duplicate`],
  ] as const) {
    const res = await t.call(method, path, method === 'PATCH' || method === 'PUT' ? { body: { template: 'text', settings: text } } : {});
    assert.ok(res.status >= 400 && res.status < 500, `${method} ${path}: ${res.status}`);
  }
  assert.is((await t.call('GET', '/api/dashboards/ffffffffffffffffffffffff')).status, 404);
});

api('when a body is malformed or of the wrong types, then 4xx with ERR and nothing is stored', async ({ t }) => {
  const d = await givenDashboard(t);
  const before = await eventCount(t);
  const cases: [string, string, unknown][] = [
    ['POST', '/api/dashboards', { name: 5 }],
    ['POST', '/api/dashboards', { name: 'x', widgets: {} }],
    ['POST', '/api/dashboards', { name: 'x', widgets: [{ template: 'nope', settings: {} }] }],
    ['POST', '/api/dashboards', { name: 'x', widgets: [{ template: 'text', settings: text, x: -1 }] }],
    ['POST', '/api/dashboards', { name: 'x', widgets: [{ template: 'text', settings: text, width: 0 }] }],
    ['POST', '/api/dashboards', { name: 'x', widgets: [{ template: 'text', settings: text, x: 1.5 }] }],
    ['POST', `/api/dashboards/${d._id}/widgets`, { settings: text }],
    ['POST', `/api/dashboards/${d._id}/widgets`, { template: 'text', settings: text, width: 30 }],
    ['PATCH', `/api/dashboards/${d._id}`, { widgets: [{ _id: 'nope', x: 0, y: 0, width: 1, height: 1 }] }],
    ['PATCH', `/api/dashboards/${d._id}`, { widgets: [{ x: 0, y: 0, width: 1, height: 1 }] }],
  ];
  for (const [method, path, body] of cases) {
    const res = await t.call(method, path, { body });
    assert.is(res.status, 422, `${method} ${path} ${JSON.stringify(body)}: ${res.status} ${res.text}`);
    assert.match(res.text, /^ERR - /);
  }
  const broken = await t.call('POST', '/api/dashboards', { raw: '{"name": "x", "widgets": [' });
  assert.is(broken.status, 422);
  assert.is(await eventCount(t), before);
});

api('when a dashboard changes, then every change is an event on its stream with the actor in its metadata', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { body: { template: 'text', settings: { ...text, bold: true } } });
  await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { name: 'Moved', widgets: [{ _id: w._id, x: 1, y: 0, width: 7, height: 2 }] } });
  const copy = await t.call('POST', `/api/dashboards/${d._id}/widgets/${w._id}/duplicate`);
  await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${copy.body._id}`);
  const dup = await t.call('POST', `/api/dashboards/${d._id}/duplicate`);
  await t.call('DELETE', `/api/dashboards/${d._id}`);
  const events = await t.platform.deps.store.readStream(`dashboard-${d._id}`);
  assert.equal(events.map((e) => e.type), [
    'DashboardCreated',
    'WidgetAdded',
    'WidgetSettingsReplaced',
    'DashboardHeaderChanged',
    'LayoutChanged',
    'WidgetDuplicated',
    'WidgetDeleted',
    'DashboardDeleted',
  ]);
  const admin = (await t.platform.deps.db.selectFrom('users').select('id').where('username', '=', 'admin').executeTakeFirstOrThrow()).id;
  for (const e of events) assert.is(e.metadata.actor, admin);
  const [created] = await t.platform.deps.store.readStream(`dashboard-${dup.body._id}`);
  assert.is(created!.type, 'DashboardCreated');
  assert.is(created!.metadata.actor, admin);
  assert.is((created!.data as any).duplicateOf, d._id);
});

api('when GET answers, then ETag is the revision and changes with every write', async ({ t }) => {
  const d = await givenDashboard(t);
  const first = await t.call('GET', `/api/dashboards/${d._id}`);
  assert.is(first.headers.get('etag'), '"0"');
  await givenWidget(t, d._id, 'text');
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`)).headers.get('etag'), '"1"');
});

api('when If-Match names the current revision, then the write goes through; a stale one gets 412 and changes nothing', async ({ t }) => {
  const d = await givenDashboard(t);
  const ok = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { name: 'One' }, headers: { 'if-match': '"0"' } });
  assert.is(ok.status, 200, ok.text);
  assert.is(ok.headers.get('etag'), '"1"');
  const stale = await t.call('PATCH', `/api/dashboards/${d._id}`, { body: { name: 'Two' }, headers: { 'if-match': '"0"' } });
  assert.is(stale.status, 412);
  const garbage = await t.call('DELETE', `/api/dashboards/${d._id}`, { headers: { 'if-match': 'yesterday' } });
  assert.is(garbage.status, 412);
  assert.is((await getDashboard(t, d._id)).name, 'One');
});

api.run();
