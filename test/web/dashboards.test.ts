import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Browser } from 'playwright-core';
import type { MqttClient } from 'mqtt';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';
import { ensurePanelBuilt, launch, logIn, openPage, screenshot, type WatchedPage } from '../support/browser.js';
import { connectMqtt, deviceOf, givenProvider, publish } from '../ingest/support.js';
import { dashboardIdOf, givenUser, ok, uploadImage, widgetsOnScreen } from './support.js';

/**
 * The control panel in a real browser (Debian's chromium through
 * playwright-core) against the whole platform: a dashboard built through the
 * UI alone, live values over MQTT, the layout saved by dragging, export and
 * import, and what a viewer sees.
 */
interface Ctx {
  t: TestPlatform;
  browser: Browser;
  admin: WatchedPage;
  provider: MqttClient;
  boiler: Record<string, any>;
  other: Record<string, any>;
  imageId: string;
  dashboardId: string;
}
const panel = suite<Ctx>('control panel: dashboards');

const TOPIC = 'svc/generic/v2/panel/boiler';

panel.before(async (ctx) => {
  ensurePanelBuilt();
  ctx.t = await startTestPlatform();
  ctx.browser = await launch();
  const p = await givenProvider(ctx.t, 'panel-provider', [TOPIC, 'svc/generic/v2/panel/other']);
  ctx.provider = await connectMqtt(ctx.t, p.username, p.password);
  await publish(ctx.provider, TOPIC, { temperature: 21.5, humidity: 40, lnglat: { type: 'Point', coordinates: [18.07, 59.33] } });
  await publish(ctx.provider, 'svc/generic/v2/panel/other', { temperature: 5, humidity: 80 });
  ctx.boiler = await deviceOf(ctx.t, TOPIC);
  ctx.other = await deviceOf(ctx.t, 'svc/generic/v2/panel/other');
  ctx.imageId = await uploadImage(ctx.t, 'ground floor');
  // The rule the command button runs, named <device-name>.<button-name> as the contract says, where the platform offers rules.
  const rule = await ctx.t.call('POST', '/api/rules-v2', { body: { name: 'boiler.run', definition: { nodes: [{ id: 'press', type: 'trigger', config: { resourceType: 'button' } }, { id: 'note', type: 'action', config: { action: 'log', message: 'run pressed' } }], edges: [{ from: 'press', to: 'note' }] } } });
  if (rule.status === 201) ruleId = rule.body._id;
  ctx.admin = await openPage(ctx.browser, ctx.t.baseUrl);
});

panel.after(async (ctx) => {
  await ctx.provider?.endAsync();
  await ctx.browser?.close();
  await ctx.t?.stop();
});

panel('when the admin logs in, then the dashboard picker shows, and a wrong password is said in words', async ({ admin }) => {
  await logIn(admin.page, ADMIN.username, 'not-the-password');
  await admin.page.getByRole('alert').filter({ hasText: 'Wrong username or password' }).waitFor();
  await admin.page.getByLabel('Password').fill(ADMIN.password);
  await admin.page.getByRole('button', { name: 'Log in' }).click();
  await admin.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
  await screenshot(admin.page, 'dashboards-picker');
});

/** The rule of the command button, where the platform offers rules (a picker then lists it); otherwise an id typed in, which the platform does not check. */
let ruleId: string | null = null;

/** Settings the form cannot guess: the device field to show, and the rule and its trigger node. */
async function fillSpecial(page: WatchedPage['page'], template: string): Promise<void> {
  if (template === 'deviceValue' || template === 'deviceChart') await page.locator('#settings_field').fill('temperature');
  if (template === 'commandButtons') {
    // The field is a text box until the form's choices (the rules) have loaded, then a picker: wait for the picker
    // rather than look once, or the field can turn into one between the look and the typing.
    if (ruleId) await page.locator('select#settings_buttons_0_ruleV2Id').selectOption(ruleId);
    else await page.locator('#settings_buttons_0_ruleV2Id').fill('0123456789abcdef01234567');
    await page.locator('#settings_buttons_0_triggerNodeId').fill('press');
  }
  if (template === 'pieChart') await page.locator('#settings_field').fill('temperature');
}

const TEMPLATES = ['deviceValue', 'deviceChart', 'multiDeviceChart', 'multiDeviceValue', 'dataTable', 'equalizer', 'swimlane', 'pieChart', 'geomap', 'floorPlan', 'map', 'commandButtons', 'navigation', 'resourceCount', 'logs', 'text', 'image'];

panel('when a dashboard is built through the UI alone, then it holds one widget of each of the 17 templates, each rendered', async (ctx) => {
  const { page } = ctx.admin;
  await page.getByRole('button', { name: 'New dashboard' }).click();
  await page.getByLabel('Name').fill('Boiler room');
  await page.getByLabel('Title').fill('Boiler room');
  await page.getByRole('button', { name: 'Create' }).click();
  ctx.dashboardId = await dashboardIdOf(page);
  for (const [i, template] of TEMPLATES.entries()) {
    await page.getByRole('button', { name: 'Add widget' }).click();
    await page.getByLabel('Widget type').selectOption(template);
    const add = page.getByRole('button', { name: 'Add to dashboard' });
    await add.waitFor();
    await fillSpecial(page, template);
    await add.click();
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await widgetsOnScreen(page).nth(i).waitFor();
  }
  const stored = await ok(ctx.t, 'GET', `/api/dashboards/${ctx.dashboardId}`);
  assert.equal(stored.widgets.map((w: any) => w.template).sort(), [...TEMPLATES].sort());
  assert.ok(stored.widgets.every((w: any) => !w._broken), JSON.stringify(stored.widgets.filter((w: any) => w._broken)));
  await page.getByRole('button', { name: 'Done editing' }).click();
  await page.locator('.dashboard[data-ready="true"]').waitFor({ timeout: 15_000 });
  for (const template of TEMPLATES) assert.is(await page.locator(`.grid-item[data-template="${template}"]`).count(), 1, template);
  assert.is(await page.getByText('could not be shown').count(), 0);
  await screenshot(page, 'dashboard-all-templates');
  assert.equal(ctx.admin.errors, []);
});

panel('when a device reports over MQTT, then its value on screen changes and the charts read their history again (how fast: bench:panel)', async (ctx) => {
  const { page } = ctx.admin;
  const value = page.locator('.grid-item[data-template="deviceValue"] [data-value]');
  await value.filter({ hasText: '21.5' }).waitFor();
  // The live channel carries the boiler once the dashboard showed it.
  await page.locator('html[data-live="online"]').waitFor();
  const live = await ok(ctx.t, 'GET', '/api/live-channel');
  assert.ok(live.devices.includes(ctx.boiler._id));
  const chartRead = page.waitForResponse((r) => r.url().includes('/stats?measurement=temperature'), { timeout: 15_000 });
  await publish(ctx.provider, TOPIC, { temperature: 42.25, humidity: 55 });
  await value.filter({ hasText: '42.25' }).waitFor({ timeout: 15_000 });
  // The other value widgets follow too, and the charts read their history again.
  for (const template of ['multiDeviceValue', 'dataTable', 'swimlane']) await page.locator(`.grid-item[data-template="${template}"] [data-value="55"]`).first().waitFor({ timeout: 15_000 });
  await page.locator('.grid-item[data-template="equalizer"]').getByText('55', { exact: true }).waitFor({ timeout: 15_000 });
  await chartRead;
  assert.equal(ctx.admin.errors, []);
});

panel('when a widget is dragged in edit mode, then the layout saved through PATCH holds every widget and the new place', async (ctx) => {
  const { page } = ctx.admin;
  await page.goto(`/dashboards/${ctx.dashboardId}?edit=1`);
  const item = page.locator('.grid-item[data-template="text"]');
  const handle = item.locator('.drag-handle');
  await handle.waitFor();
  await handle.scrollIntoViewIfNeeded();
  const before = (await ok(ctx.t, 'GET', `/api/dashboards/${ctx.dashboardId}`)).widgets.find((w: any) => w.template === 'text');
  const box = (await handle.boundingBox())!;
  const grid = (await page.locator('.grid-box').boundingBox())!;
  const column = (grid.width + 10) / 24;
  // Six columns to the right, to a place with room for it.
  const targetX = before.x + 6 <= 24 - before.width ? before.x + 6 : Math.max(0, before.x - 6);
  const dx = (targetX - before.x) * column;
  await page.mouse.move(box.x + 10, box.y + box.height / 2);
  await page.mouse.down();
  for (let i = 1; i <= 10; i++) await page.mouse.move(box.x + 10 + (dx * i) / 10, box.y + box.height / 2 + 2);
  await page.mouse.up();
  const after = await eventuallyValue(async () => {
    const d = await ok(ctx.t, 'GET', `/api/dashboards/${ctx.dashboardId}`);
    const w = d.widgets.find((x: any) => x.template === 'text');
    return w.x === targetX ? d : undefined;
  });
  assert.is(after.widgets.length, 17);
  const moved = after.widgets.find((w: any) => w.template === 'text');
  assert.is(moved.x, targetX);
  // The place on screen is the saved one.
  const shown = await item.boundingBox();
  assert.ok(Math.abs(shown!.x - grid.x - targetX * column) < column / 2, `${shown!.x - grid.x} vs ${targetX * column}`);
  await screenshot(page, 'dashboard-edit-mode');
  // The same from the keyboard: the focused handle moves the widget with an arrow key, and grows it with Shift.
  await handle.focus();
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('Shift+ArrowDown');
  const keyed = await eventuallyValue(async () => {
    const w = (await ok(ctx.t, 'GET', `/api/dashboards/${ctx.dashboardId}`)).widgets.find((x: any) => x.template === 'text');
    return w.x === targetX - 1 && w.height === moved.height + 1 ? w : undefined;
  });
  assert.is(keyed.width, moved.width);
  assert.equal(ctx.admin.errors, []);
});

async function eventuallyValue<T>(check: () => Promise<T | undefined>, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

panel('when a dashboard is exported and the text imported, then a copy with the same widgets exists', async (ctx) => {
  const { page } = ctx.admin;
  await page.goto(`/dashboards/${ctx.dashboardId}`);
  await page.getByRole('button', { name: 'Export', exact: true }).click();
  const text = await page.getByLabel(/Export text/).inputValue();
  const decoded = JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
  assert.is(decoded._id, ctx.dashboardId);
  await page.getByRole('button', { name: 'Close' }).click();
  await page.goto('/');
  await page.getByRole('button', { name: 'Import' }).click();
  await page.getByLabel('Export text (base64)').fill(text);
  await page.getByRole('button', { name: 'Import', exact: true }).last().click();
  const copyId = await eventuallyValue(async () => {
    const id = /\/dashboards\/([0-9a-f]{24})/.exec(page.url())?.[1];
    return id && id !== ctx.dashboardId ? id : undefined;
  });
  const [original, copy] = await Promise.all([ok(ctx.t, 'GET', `/api/dashboards/${ctx.dashboardId}`), ok(ctx.t, 'GET', `/api/dashboards/${copyId}`)]);
  const content = (d: any) => d.widgets.map((w: any) => ({ template: w.template, settings: w.settings, x: w.x, y: w.y, width: w.width, height: w.height })).sort((a: any, b: any) => a.template.localeCompare(b.template));
  assert.equal(content(copy), content(original));
  await page.locator('.dashboard[data-ready="true"]').waitFor({ timeout: 15_000 });
  assert.equal(ctx.admin.errors, []);
});

panel('when a command button is pressed, then the rule call is answered in words; the navigation widget opens its dashboard; header settings are drawn', async (ctx) => {
  const { page } = ctx.admin;
  await ok(ctx.t, 'PATCH', `/api/dashboards/${ctx.dashboardId}`, { description: 'Basement', headerSettings: { titleFontSize: 40, titleColor: '#ff0000', align: 'center', descriptionColor: '#0000ff' } });
  await page.goto(`/dashboards/${ctx.dashboardId}`);
  await page.locator('.dashboard[data-ready="true"]').waitFor();
  const title = page.getByRole('heading', { name: 'Boiler room', level: 1 });
  assert.equal(await title.evaluate((e: any) => [(globalThis as any).getComputedStyle(e).fontSize, (globalThis as any).getComputedStyle(e).color, (globalThis as any).getComputedStyle(e.parentElement).textAlign]), ['40px', 'rgb(255, 0, 0)', 'center']);
  assert.is(await page.getByText('Basement').evaluate((e: any) => (globalThis as any).getComputedStyle(e).color), 'rgb(0, 0, 255)');
  const buttons = page.locator('.grid-item[data-template="commandButtons"]');
  await buttons.getByRole('button', { name: 'Run' }).click();
  const offered = (await ok(ctx.t, 'GET', '/api/openapi.json')).paths['/api/rules-v2/{id}/execute'];
  // Until the platform runs rules, the press is answered in words; once it does, the rule runs and its log says so.
  const answer = buttons.getByRole(offered ? 'status' : 'alert');
  await answer.waitFor();
  if (!offered) assert.match(await answer.innerText(), /the rule was not found, you have no access to it, or this platform runs no rules yet/);
  else {
    assert.match(await answer.innerText(), /Run: sent\./);
    await eventuallyValue(async () => ((await ok(ctx.t, 'GET', `/api/logs?resourceId=${ruleId}`)).logs as { message: string }[]).find((l) => l.message === 'run pressed'));
  }
  const stored = await ok(ctx.t, 'GET', `/api/dashboards/${ctx.dashboardId}`);
  const target = stored.widgets.find((w: any) => w.template === 'navigation').settings.targetDashboardId;
  await page.locator('.grid-item[data-template="navigation"]').getByRole('link').click();
  await page.waitForURL(new RegExp(`/dashboards/${target}$`));
  await page.locator('.dashboard').waitFor();
  assert.equal(ctx.admin.errors, []);
});

panel('when the title, description and header settings are emptied in the header form and saved, then they are gone, after a reload too', async (ctx) => {
  const { page } = ctx.admin;
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Pump hall', title: 'Pump hall east', description: 'Line 2', headerSettings: { titleColor: '#ff0000', align: 'center' } });
  await page.goto(`/dashboards/${d._id}?edit=1`);
  await page.getByRole('heading', { name: 'Pump hall east', level: 1 }).waitFor();
  await page.getByRole('button', { name: 'Name and header' }).click();
  const dialog = page.getByRole('dialog', { name: 'Name and header' });
  await dialog.locator('#dashboard_title').fill('');
  await dialog.locator('#dashboard_description').fill('');
  await dialog.locator('#dashboard_headerSettings_titleColor').fill('');
  await dialog.locator('#dashboard_headerSettings_align').selectOption({ index: 0 });
  await dialog.getByRole('button', { name: 'Save' }).click();
  await dialog.waitFor({ state: 'detached' });
  await page.reload();
  // With no title the header shows the name, plainly.
  const title = page.getByRole('heading', { name: 'Pump hall', exact: true, level: 1 });
  await title.waitFor();
  assert.is(await page.getByText('Line 2').count(), 0);
  assert.equal(await title.evaluate((e: any) => [(globalThis as any).getComputedStyle(e).color, (globalThis as any).getComputedStyle(e.parentElement).textAlign]), ['rgb(31, 35, 40)', 'left']);
  const stored = await ok(ctx.t, 'GET', `/api/dashboards/${d._id}`);
  assert.is(stored.title ?? '', '');
  assert.is(stored.description ?? '', '');
  assert.equal(stored.headerSettings ?? {}, {});
  assert.equal(ctx.admin.errors, []);
});

panel('given a viewer with the dashboard shared and one of two devices readable, then it sees no edit controls and "no access" for the other device', async (ctx) => {
  const viewer = await givenUser(ctx.t, 'panel-viewer', ['viewerBasic']);
  const d = await ok(ctx.t, 'POST', '/api/dashboards', {
    name: 'Shared',
    widgets: [
      { x: 0, y: 0, width: 4, height: 4, template: 'deviceValue', settings: { deviceId: ctx.boiler._id, field: 'temperature', display: 'text', color: 'blue', shouldShowHeading: true, shouldShowSubheading: false } },
      { x: 4, y: 0, width: 4, height: 4, template: 'deviceValue', settings: { deviceId: ctx.other._id, field: 'temperature', display: 'text', color: 'blue', shouldShowHeading: true, shouldShowSubheading: false } },
    ],
  });
  await ok(ctx.t, 'POST', '/api/access-rights', { resourceType: 'dashboard', resourceId: d._id, subjectType: 'singleton', subjectId: viewer.id, scope: ['read'] });
  await ok(ctx.t, 'POST', '/api/access-rights', { resourceType: 'device', resourceId: ctx.boiler._id, subjectType: 'singleton', subjectId: viewer.id, scope: ['read'] });
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    await logIn(w.page, 'panel-viewer', viewer.password);
    await w.page.getByRole('link', { name: 'Shared' }).click();
    await w.page.locator('.dashboard[data-ready="true"]').waitFor();
    const [readable, hidden] = [w.page.locator('.grid-item').nth(0), w.page.locator('.grid-item').nth(1)];
    await readable.getByText('42.25').waitFor();
    assert.is((await hidden.locator('.widget-body').innerText()).trim(), 'no access');
    for (const name of ['Edit', 'Add widget', 'Delete', 'Duplicate', 'Share']) assert.is(await w.page.getByRole('button', { name, exact: true }).count(), 0, name);
    // Even with ?edit=1 in the address, no edit controls appear.
    await w.page.goto(`/dashboards/${d._id}?edit=1`);
    await w.page.locator('.dashboard[data-ready="true"]').waitFor();
    assert.is(await w.page.locator('.drag-handle').count(), 0);
    await screenshot(w.page, 'dashboard-viewer');
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

panel.run();
