import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Browser } from 'playwright-core';
import type { MqttClient } from 'mqtt';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';
import { ensurePanelBuilt, launch, logIn, openPage, screenshot } from '../support/browser.js';
import { issueToken } from '../../domain/access/tokens.js';
import { connectMqtt, deviceOf, givenProvider, publish } from '../ingest/support.js';
import { givenUser, ok } from './support.js';

/**
 * Bad input and failures in a real browser: an expired token, a dashboard
 * deleted while open, a widget stored under older rules, a deleted device,
 * a dropped live connection. Each is said in words and recovers; no page is
 * left blank and nothing reaches the console as an uncaught error.
 */
const recovery = suite<{ t: TestPlatform; browser: Browser; provider: MqttClient; device: Record<string, any> }>('control panel: bad input and recovery');
const TOPIC = 'svc/generic/v2/recovery/meter';

recovery.before(async (ctx) => {
  ensurePanelBuilt();
  ctx.t = await startTestPlatform();
  ctx.browser = await launch();
  const p = await givenProvider(ctx.t, 'recovery-provider', [TOPIC]);
  ctx.provider = await connectMqtt(ctx.t, p.username, p.password);
  await publish(ctx.provider, TOPIC, { power: 100 });
  ctx.device = await deviceOf(ctx.t, TOPIC);
});

recovery.after(async (ctx) => {
  await ctx.provider?.endAsync();
  await ctx.browser?.close();
  await ctx.t?.stop();
});

const valueWidget = (deviceId: string, x = 0) => ({ x, y: 0, width: 4, height: 4, template: 'deviceValue', settings: { deviceId, field: 'power', display: 'text', color: 'blue', shouldShowHeading: true, shouldShowSubheading: false } });

recovery('given a token that stops working while a dialog is filled in (its user\'s password changed elsewhere), when the user submits, then a login shows over the page, and after it the same submit goes through with what was typed', async (ctx) => {
  const editor = await givenUser(ctx.t, 'recovery-editor', ['admin']);
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    await w.page.goto('/');
    await w.page.evaluate(`localStorage.setItem('panel.token', ${JSON.stringify(editor.token)})`);
    await w.page.reload();
    await w.page.getByRole('button', { name: 'New dashboard' }).click();
    await w.page.getByLabel('Name').fill('Typed before the token stopped working');
    // A password change ends every token issued before it, as its expiry would (the panel sees the same 401).
    const password = `${editor.password}-changed`;
    const changed = await ctx.t.call('PUT', '/api/auth/password', { token: editor.token, body: { currentPassword: editor.password, newPassword: password } });
    assert.is(changed.status, 200, changed.text);
    assert.is((await ctx.t.call('GET', `/api/users/${editor.id}`, { token: editor.token })).status, 401, 'the panel\'s token no longer works');
    await w.page.getByRole('button', { name: 'Create' }).click();
    const overlay = w.page.getByRole('dialog', { name: 'Log in again' });
    await overlay.getByText('Your session has expired').waitFor();
    await screenshot(w.page, 'session-expired');
    await overlay.getByLabel('Username').fill('recovery-editor');
    await overlay.getByLabel('Password').fill(password);
    await overlay.getByRole('button', { name: 'Log in' }).click();
    await w.page.waitForURL(/\/dashboards\/[0-9a-f]{24}/);
    const all = await ctx.t.call('GET', '/api/dashboards', { token: await ctx.t.login('recovery-editor', password) });
    assert.is(all.body.filter((d: any) => d.name === 'Typed before the token stopped working').length, 1);
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

recovery('given a stored token that has expired, when the panel opens on a dashboard address, then the login page shows and leads back there', async (ctx) => {
  const [admin] = await ok(ctx.t, 'GET', '/api/users?username=admin');
  const stale = issueToken(ctx.t.platform.deps.jwtSecret, admin.id, -10);
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Bookmarked' });
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    await w.page.goto('/');
    await w.page.evaluate(`localStorage.setItem('panel.token', ${JSON.stringify(stale)})`);
    await w.page.goto(`/dashboards/${d._id}`);
    await w.page.getByLabel('Username').fill(ADMIN.username);
    await w.page.getByLabel('Password').fill(ADMIN.password);
    await w.page.getByRole('button', { name: 'Log in' }).click();
    await w.page.getByRole('heading', { name: 'Bookmarked' }).waitFor();
    assert.match(w.page.url(), new RegExp(`/dashboards/${d._id}$`));
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

recovery('given a dashboard open in edit mode, when it is deleted elsewhere and the user adds a widget, then the page says it is gone and leads back', async (ctx) => {
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Doomed' });
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    await logIn(w.page, ADMIN.username, ADMIN.password);
    await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
    await w.page.goto(`/dashboards/${d._id}?edit=1`);
    await w.page.getByRole('button', { name: 'Add widget' }).click();
    await w.page.getByLabel('Widget type').selectOption('text');
    await w.page.getByRole('button', { name: 'Add to dashboard' }).waitFor();
    await ok(ctx.t, 'DELETE', `/api/dashboards/${d._id}`);
    await w.page.getByRole('button', { name: 'Add to dashboard' }).click();
    await w.page.getByRole('heading', { name: 'This dashboard is gone' }).waitFor();
    await screenshot(w.page, 'dashboard-gone');
    await w.page.getByRole('button', { name: 'Back to the dashboards' }).click();
    await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

recovery('given a widget stored under older rules, then it shows in place with its error, and the form repairs it', async (ctx) => {
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Old rules', widgets: [valueWidget(ctx.device._id)] });
  const { store, projections } = ctx.t.platform.deps;
  const appended = await store.append(
    `dashboard-${d._id}`,
    [{ id: randomUUID(), type: 'WidgetAdded', data: { id: d._id, widget: { id: '0123456789abcdef01234567', x: 4, y: 0, width: 3, height: 4, template: 'deviceValue', settings: { deviceId: ctx.device._id, field: 'power', color: 'red', shouldShowHeading: true, shouldShowSubheading: true } }, at: new Date().toISOString() }, metadata: { actor: 'system:test', correlationId: randomUUID(), time: new Date().toISOString() } }],
    'exists',
  );
  await projections.waitFor(appended.position, 5000);
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    await logIn(w.page, ADMIN.username, ADMIN.password);
    await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
    await w.page.goto(`/dashboards/${d._id}?edit=1`);
    const broken = w.page.locator('.grid-item[data-widget-id="0123456789abcdef01234567"]');
    await broken.getByText('settings.display is required').waitFor();
    // The widget beside it is unaffected.
    await w.page.locator('.grid-item').first().getByText('100').waitFor();
    await screenshot(w.page, 'widget-broken');
    await broken.getByRole('button', { name: /^Settings/ }).click();
    const dialog = w.page.getByRole('dialog');
    await dialog.getByText("Stored settings fail today's rules").waitFor();
    await dialog.locator('#settings_display').selectOption('gauge');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    const stored = await ok(ctx.t, 'GET', `/api/dashboards/${d._id}`);
    const repaired = stored.widgets.find((x: any) => x._id === '0123456789abcdef01234567');
    assert.not.ok(repaired._broken);
    assert.is(repaired.settings.display, 'gauge');
    await broken.locator('svg[aria-label="power: 100"]').waitFor();
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

recovery('given a dashboard whose device was deleted, then its widget says "no access" and the rest shows', async (ctx) => {
  const gone = await ok(ctx.t, 'POST', '/api/iotnodes', { name: 'short-lived', power: 7 });
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Lost device', widgets: [valueWidget(ctx.device._id), valueWidget(gone._id, 4)] });
  await ok(ctx.t, 'DELETE', `/api/iotnodes/${gone._id}`);
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    await logIn(w.page, ADMIN.username, ADMIN.password);
    await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
    await w.page.goto(`/dashboards/${d._id}`);
    await w.page.locator('.dashboard[data-ready="true"]').waitFor();
    assert.is((await w.page.locator('.grid-item').nth(1).locator('.widget-body').innerText()).trim(), 'no access');
    await w.page.locator('.grid-item').nth(0).getByText('100').waitFor();
    await w.page.goto(`/devices/${gone._id}`);
    await w.page.getByRole('heading', { name: 'No access' }).waitFor();
    await w.page.goto('/no-such-page');
    await w.page.getByText('There is no such page.').waitFor();
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

recovery('given a live dashboard, when the connection to the broker drops, then a banner says so, and after the reconnect values flow again', async (ctx) => {
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Live', widgets: [valueWidget(ctx.device._id)] });
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  // Keeps the page's WebSockets at hand, so the test can cut them as a network failure would.
  await w.context.addInitScript(`{
    const Native = window.WebSocket;
    window.__sockets = [];
    window.WebSocket = class extends Native { constructor(...a) { super(...a); window.__sockets.push(this); } };
  }`);
  try {
    await logIn(w.page, ADMIN.username, ADMIN.password);
    await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
    await w.page.goto(`/dashboards/${d._id}`);
    const value = w.page.locator('.grid-item [data-value]');
    await value.filter({ hasText: '100' }).waitFor();
    await w.page.locator('html[data-live="online"]').waitFor();
    await publish(ctx.provider, TOPIC, { power: 101 });
    await value.filter({ hasText: '101' }).waitFor();
    await w.page.evaluate('window.__sockets.forEach((s) => s.close())');
    await w.page.getByRole('status').filter({ hasText: 'Live updates are interrupted' }).waitFor();
    await screenshot(w.page, 'live-interrupted');
    await w.page.getByRole('status').filter({ hasText: 'Live updates are interrupted' }).waitFor({ state: 'detached', timeout: 15_000 });
    await w.page.locator('html[data-live="online"]').waitFor();
    await publish(ctx.provider, TOPIC, { power: 102 });
    await value.filter({ hasText: '102' }).waitFor({ timeout: 5000 });
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

recovery('given a page whose code fails to load (a chunk gone after a redeploy), when the user goes to another page, then that page shows', async (ctx) => {
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    // The Translators page's chunk is missing, as after a redeploy that renamed it while the tab stayed open.
    await w.page.route(/\/assets\/Translators-[\w-]+\.js$/, (route) => route.fulfill({ status: 404, contentType: 'text/plain', body: 'Not found' }));
    await logIn(w.page, ADMIN.username, ADMIN.password);
    await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
    await w.page.getByRole('link', { name: 'Translators' }).click();
    await w.page.getByRole('alert').filter({ hasText: 'This page could not be shown' }).waitFor();
    await screenshot(w.page, 'page-chunk-missing');
    await w.page.getByRole('link', { name: 'Devices' }).click();
    await w.page.getByRole('heading', { name: 'Devices', level: 1 }).waitFor();
    assert.is(await w.page.getByText('could not be shown').count(), 0);
    await w.page.getByRole('link', { name: 'Dashboards' }).click();
    await w.page.getByRole('heading', { name: 'Dashboards', level: 1 }).waitFor();
    assert.is(await w.page.getByText('could not be shown').count(), 0);
    assert.equal(w.errors.filter((e) => !/Translators-/.test(e)), []);
  } finally {
    await w.close();
  }
});

recovery('given a dashboard open for editing in two browsers, when both change it, then the change made over the older version is refused in words and that page shows the other change', async (ctx) => {
  const d = await ok(ctx.t, 'POST', '/api/dashboards', {
    name: 'Two editors',
    title: 'Before',
    widgets: [{ x: 0, y: 0, width: 6, height: 4, template: 'text', settings: { text: 'Note', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' } }],
  });
  const [first, second] = [await openPage(ctx.browser, ctx.t.baseUrl), await openPage(ctx.browser, ctx.t.baseUrl)];
  const saveTitle = async (page: typeof first.page, title: string) => {
    await page.getByRole('button', { name: 'Name and header' }).click();
    const dialog = page.getByRole('dialog', { name: 'Name and header' });
    await dialog.locator('#dashboard_title').fill(title);
    await dialog.getByRole('button', { name: 'Save' }).click();
  };
  const refused = (page: typeof first.page) => page.getByRole('status').filter({ hasText: 'Someone else changed this dashboard in the meantime' });
  try {
    for (const w of [first, second]) {
      await logIn(w.page, ADMIN.username, ADMIN.password);
      await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
      await w.page.goto(`/dashboards/${d._id}?edit=1`);
      await w.page.getByRole('heading', { name: 'Before', level: 1 }).waitFor();
    }
    await saveTitle(first.page, 'From the first');
    await first.page.getByRole('heading', { name: 'From the first', level: 1 }).waitFor();
    // The second still shows "Before": its change is made over that version.
    await saveTitle(second.page, 'From the second');
    await refused(second.page).waitFor();
    await second.page.getByRole('dialog').waitFor({ state: 'detached' });
    await second.page.getByRole('heading', { name: 'From the first', level: 1 }).waitFor();
    await screenshot(second.page, 'dashboard-edit-conflict');
    assert.is((await ok(ctx.t, 'GET', `/api/dashboards/${d._id}`)).title, 'From the first');
    // Read again, the second saves its change over the version it now shows.
    await saveTitle(second.page, 'From the second');
    await second.page.getByRole('heading', { name: 'From the second', level: 1 }).waitFor();
    await refused(second.page).waitFor({ state: 'detached' });
    assert.is((await ok(ctx.t, 'GET', `/api/dashboards/${d._id}`)).title, 'From the second');
    // A layout change over an older version is refused the same way, and the widget stays at its stored place.
    await ok(ctx.t, 'PATCH', `/api/dashboards/${d._id}`, { title: 'Changed elsewhere' });
    await second.page.locator('.drag-handle').focus();
    await second.page.keyboard.press('ArrowRight');
    await refused(second.page).waitFor();
    await second.page.getByRole('heading', { name: 'Changed elsewhere', level: 1 }).waitFor();
    const stored = await ok(ctx.t, 'GET', `/api/dashboards/${d._id}`);
    assert.is(stored.widgets[0].x, 0);
    assert.equal(first.errors, []);
    assert.equal(second.errors, []);
  } finally {
    await first.close();
    await second.close();
  }
});

recovery('given a user who saw a device logs out, when a user who may not read it logs in on the same tab, then it is never shown to them, and the first user\'s other tab is logged out too', async (ctx) => {
  const viewer = await givenUser(ctx.t, 'recovery-viewer', ['viewerBasic']);
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Meter room', widgets: [valueWidget(ctx.device._id)] });
  await ok(ctx.t, 'POST', '/api/access-rights', { resourceType: 'dashboard', resourceId: d._id, subjectType: 'singleton', subjectId: viewer.id, scope: ['read'] });
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  // Records every value the page shows, however briefly.
  await w.context.addInitScript(`{
    window.__shown = [];
    new MutationObserver(() => {
      for (const v of document.querySelectorAll('.grid-item [data-value]')) window.__shown.push(v.getAttribute('data-value'));
    }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
  }`);
  try {
    await logIn(w.page, ADMIN.username, ADMIN.password);
    await w.page.getByRole('link', { name: 'Meter room' }).click();
    await w.page.locator('.grid-item [data-value]').waitFor();
    await w.page.locator('html[data-live="online"]').waitFor();
    const other = await w.context.newPage();
    await other.goto('/');
    await other.getByRole('heading', { name: 'Dashboards' }).waitFor();
    await w.page.getByRole('button', { name: 'Log out' }).click();
    await w.page.getByRole('button', { name: 'Log in' }).waitFor();
    // The other tab follows the stored token: it shows the login too.
    await other.getByRole('button', { name: 'Log in' }).waitFor();
    assert.is(await other.getByRole('heading', { name: 'Dashboards' }).count(), 0);
    // In the same tab, with no reload: the login page stands where the dashboard was.
    await w.page.evaluate('window.__shown = []');
    await w.page.getByLabel('Username').fill('recovery-viewer');
    await w.page.getByLabel('Password').fill(viewer.password);
    await w.page.getByRole('button', { name: 'Log in' }).click();
    await w.page.locator('.dashboard[data-ready="true"]').waitFor();
    await w.page.locator('.grid-item').getByText('no access').waitFor();
    assert.equal(await w.page.evaluate('window.__shown'), []);
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

recovery.run();
