import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Browser } from 'playwright-core';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';
import { ensurePanelBuilt, launch, logIn, openPage, screenshot, type WatchedPage } from '../support/browser.js';
import { ok } from './support.js';

/** The panel's other pages in a real browser: devices, the map and its fences, translators, resources, users and sharing. */
const pages = suite<{ t: TestPlatform; browser: Browser; admin: WatchedPage; located: string }>('control panel: pages');

pages.before(async (ctx) => {
  ensurePanelBuilt();
  ctx.t = await startTestPlatform();
  ctx.browser = await launch();
  for (let i = 0; i < 30; i++) {
    const body: Record<string, unknown> = { name: `sensor ${String(i).padStart(2, '0')}`, category: i % 2 ? 'odd' : 'even', temperature: 20 + i };
    if (i === 0) body.lnglat = { type: 'Point', coordinates: [18.07, 59.33] };
    const d = await ok(ctx.t, 'POST', '/api/iotnodes', body);
    if (i === 0) ctx.located = d._id;
  }
  ctx.admin = await openPage(ctx.browser, ctx.t.baseUrl);
  await logIn(ctx.admin.page, ADMIN.username, ADMIN.password);
  await ctx.admin.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
});

pages.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.t?.stop();
});

pages('given a user created with a temporary password, when it logs in, then it must choose a password, and a short one is refused next to the field', async (ctx) => {
  const created = await ok(ctx.t, 'POST', '/api/users', { username: 'newcomer', attributes: { roles: ['viewerBasic'] } });
  const w = await openPage(ctx.browser, ctx.t.baseUrl);
  try {
    await logIn(w.page, 'newcomer', created.temporaryPassword);
    await w.page.getByRole('heading', { name: 'Choose your own password' }).waitFor();
    await screenshot(w.page, 'password-change-forced');
    await w.page.getByLabel('Current password').fill(created.temporaryPassword);
    await w.page.getByLabel('New password', { exact: true }).fill('short');
    await w.page.getByLabel('New password again').fill('short');
    await w.page.getByRole('button', { name: 'Set password' }).click();
    const message = w.page.locator('#f-new-password-error');
    await message.waitFor();
    assert.match(await message.innerText(), /fewer than 8 characters/);
    await w.page.getByLabel('New password', { exact: true }).fill('a-good-password');
    await w.page.getByLabel('New password again').fill('a-good-password');
    await w.page.getByRole('button', { name: 'Set password' }).click();
    await w.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
    const user = await ok(ctx.t, 'GET', `/api/users/${created.id}`);
    assert.equal(user.requiredActions, []);
    await w.page.getByRole('button', { name: 'Log out' }).click();
    await w.page.getByRole('button', { name: 'Log in' }).waitFor();
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

pages('when the device list is paged and filtered, then the count and the rows follow the API', async ({ admin }) => {
  const { page } = admin;
  await page.getByRole('link', { name: 'Devices' }).click();
  // The pager and the filters change at once; the rows are those of the new query only once the table is no longer busy.
  const rows = page.locator('table[aria-label="Devices"][aria-busy="false"] tbody tr');
  await page.getByRole('status').filter({ hasText: '30 devices' }).waitFor();
  assert.is(await rows.count(), 25);
  await page.getByRole('button', { name: 'Next' }).click();
  await page.getByText('Page 2 of 2').waitFor();
  await rows.first().waitFor();
  assert.is(await rows.count(), 5);
  await page.getByLabel('Category').fill('odd');
  await page.getByRole('status').filter({ hasText: '15 devices' }).waitFor();
  await page.getByLabel('Name contains').fill('sensor 1');
  // sensor 11, 13, 15, 17, 19 are odd
  await page.getByRole('status').filter({ hasText: '5 devices' }).waitFor();
  await rows.first().waitFor();
  assert.equal(await rows.locator('td:first-child').allInnerTexts(), ['sensor 11', 'sensor 13', 'sensor 15', 'sensor 17', 'sensor 19']);
  await screenshot(page, 'devices');
  await page.getByRole('link', { name: 'sensor 13' }).click();
  await page.getByRole('heading', { name: 'sensor 13' }).waitFor();
  assert.is(await page.locator('[data-field="temperature"]').innerText(), '33');
  // A device on no connector: the queue is empty, and the command form says why it cannot send.
  await page.getByRole('region', { name: 'Downlink queue' }).getByText('No downlinks yet.').waitFor();
  await page.getByRole('region', { name: 'Send a command' }).getByRole('note').filter({ hasText: 'this device has none' }).waitFor();
  await page.locator('.history canvas, .history .muted').first().waitFor();
  await screenshot(page, 'device');
  // Access rights for admins: the device shared with a user in two clicks.
  await page.getByRole('button', { name: 'Share' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('button', { name: 'User: newcomer' }).click();
  await dialog.getByRole('button', { name: 'Give view access to newcomer' }).click();
  await dialog.getByRole('status').filter({ hasText: 'newcomer can now see sensor 13.' }).waitFor();
  await dialog.getByRole('button', { name: 'Close' }).click();
  assert.equal(admin.errors, []);
});

pages('when a fence is drawn on the map and saved, then it is stored counter-clockwise and lists the device inside', async (ctx) => {
  const { page } = ctx.admin;
  await page.getByRole('link', { name: 'Map' }).click();
  const map = page.getByRole('region', { name: 'Map of devices and geofences' });
  await map.waitFor();
  await page.locator('.leaflet-interactive').first().waitFor();
  const box = (await map.boundingBox())!;
  const cx = box.x + box.width / 2;
  const cy = box.y + box.height / 2;
  await page.locator('.leaflet-pm-icon-polygon').click();
  // Clockwise on screen; the panel sends it counter-clockwise, as the API requires.
  const corners = [[-60, -60], [60, -60], [60, 60], [-60, 60]];
  for (const [dx, dy] of corners) await page.mouse.click(cx + dx!, cy + dy!);
  await page.mouse.click(cx - 60, cy - 60);
  await page.getByRole('button', { name: 'Save fence' }).click();
  await page.getByRole('status').filter({ hasText: 'The fence is saved.' }).waitFor();
  const fences = await ok(ctx.t, 'GET', '/api/geofences');
  assert.is(fences.length, 1);
  const ring = fences[0].fence.coordinates[0];
  assert.is(ring.length, 5);
  assert.equal(ring[0], ring[4]);
  await page.getByRole('list', { name: 'Devices inside' }).getByRole('link', { name: 'sensor 00' }).waitFor();
  await screenshot(page, 'map-geofence');
  assert.equal(ctx.admin.errors, []);
});

pages('given a map widget with fence drawing on, when a fence is drawn in it, then it is saved, and its view can be kept', async (ctx) => {
  const { page } = ctx.admin;
  const before = (await ok(ctx.t, 'GET', '/api/geofences')).length;
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Site map', widgets: [{ x: 0, y: 0, width: 16, height: 14, template: 'map', settings: { createGeofenceEnabled: true, viewId: 'site' } }] });
  await page.goto(`/dashboards/${d._id}`);
  await page.locator('.dashboard[data-ready="true"]').waitFor();
  const map = page.getByRole('region', { name: 'Devices map' });
  const tool = page.locator('.grid-item .leaflet-pm-icon-polygon');
  await tool.waitFor();
  const box = (await map.boundingBox())!;
  const [cx, cy] = [box.x + box.width / 2, box.y + box.height / 2];
  await tool.click();
  for (const [dx, dy] of [[-40, -40], [40, -40], [40, 40], [-40, 40], [-40, -40]]) await page.mouse.click(cx + dx!, cy + dy!);
  await page.getByRole('status').filter({ hasText: 'The fence is saved.' }).waitFor();
  assert.is((await ok(ctx.t, 'GET', '/api/geofences')).length, before + 1);
  await page.getByRole('button', { name: 'Save view' }).click();
  await page.getByRole('status').filter({ hasText: 'The view is saved in this browser.' }).waitFor();
  assert.ok(await page.evaluate("localStorage.getItem('panel.mapView.site') !== null"));
  await screenshot(page, 'map-widget-fence');
  assert.equal(ctx.admin.errors, []);
});

pages('when a translator is uploaded, then a bad version is refused next to its field, every problem of a bad spec beside the spec, and a good one is listed with the devices it runs on', async (ctx) => {
  const { page } = ctx.admin;
  await page.getByRole('link', { name: 'Translators' }).click();
  await page.getByLabel('Name', { exact: true }).fill('acme-probe');
  await page.getByLabel('Version', { exact: true }).fill('one');
  await page.getByLabel('Device model name', { exact: true }).fill('acme-probe-1');
  await page.getByRole('button', { name: 'Upload' }).click();
  const err = page.locator('#f-version-error');
  await err.waitFor();
  assert.match(await err.innerText(), /^version /);
  await page.getByLabel('Version', { exact: true }).fill('1.0.0');
  // A spec that fails the platform's rules twice over: the API answers JSON naming each problem, and both show beside the spec.
  await page.getByLabel('Spec (JSON)').fill(JSON.stringify({ name: { type: 'string' }, temperature: { type: 'number', unit: '°C', quantity: 'temperature' }, createdAt: { type: 'string' } }));
  await page.getByRole('button', { name: 'Upload' }).click();
  const specErr = page.locator('#f-spec-json--error');
  await specErr.waitFor();
  const specText = await specErr.innerText();
  assert.match(specText, /^spec\.name /);
  assert.match(specText, /spec\.createdAt /);
  assert.not.match(specText, /[{}"]/);
  assert.is(await page.getByText('"errors"').count(), 0);
  await page.getByLabel('Spec (JSON)').fill(JSON.stringify({ temperature: { type: 'number', unit: '°C', quantity: 'temperature' } }));
  await page.getByRole('button', { name: 'Upload' }).click();
  await page.getByRole('status').filter({ hasText: 'Uploaded acme-probe 1.0.0.' }).waitFor();
  await ok(ctx.t, 'PUT', `/api/iotnodes/${ctx.located}`, { deviceModelName: 'acme-probe-1' });
  await page.reload();
  await page.getByRole('button', { name: '1.0.0' }).click();
  await page.getByText('Runs on: sensor 00').waitFor();
  await screenshot(page, 'translators');
  assert.equal(ctx.admin.errors, []);
});

pages('when a credentials set and a reserved topic are created, then the API refusals show next to the field they name', async (ctx) => {
  const { page } = ctx.admin;
  await page.getByRole('link', { name: 'Credentials' }).click();
  const sets = page.getByRole('region', { name: 'Credentials sets', exact: true });
  await sets.getByRole('button', { name: 'New' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.locator('#create_username').fill('0f8fad5b-d9cb-469f-a165-70867728950e');
  await dialog.locator('#create_password').fill('a-long-password');
  await dialog.getByRole('button', { name: 'Create' }).click();
  // The API's message for the field, shown beside it.
  const fieldError = dialog.locator('#create_username').locator('xpath=ancestor::*[contains(@class,"form-group")][1]').locator('.error-detail, .text-danger');
  await fieldError.first().waitFor();
  assert.match(await fieldError.first().innerText(), /username/);
  await dialog.locator('#create_username').fill('gateway-7');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await dialog.waitFor({ state: 'detached' });
  await sets.getByRole('cell', { name: 'gateway-7', exact: true }).waitFor();
  const [set] = await ok(ctx.t, 'GET', '/api/basic-credentials-sets');
  const topics = page.getByRole('region', { name: 'Reserved topics', exact: true });
  await topics.getByRole('button', { name: 'New' }).click();
  await dialog.locator('#create_topic').fill('elsewhere/x');
  await dialog.locator('#create_basicCredentialsSetId').selectOption(set._id);
  await dialog.getByRole('button', { name: 'Create' }).click();
  await dialog.getByRole('alert').first().waitFor();
  assert.match(await dialog.getByRole('alert').first().innerText(), /svc\/generic\/v2/);
  await screenshot(page, 'credentials');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await sets.getByRole('button', { name: 'Delete gateway-7' }).click();
  await sets.getByText('None yet.').waitFor();
  assert.equal(await ok(ctx.t, 'GET', '/api/basic-credentials-sets'), []);
  for (const [link, path] of [['Rules', '/api/rules-v2'], ['Calculations', '/api/calculations']] as const) {
    await page.getByRole('link', { name: link, exact: true }).click();
    const offered = (await ok(ctx.t, 'GET', '/api/openapi.json')).paths[path];
    if (!offered) await page.getByRole('note').filter({ hasText: `its API has no GET ${path}` }).waitFor();
    else await page.getByRole('heading', { name: link, exact: true }).first().waitFor();
    await screenshot(page, link.toLowerCase());
  }
  for (const [link, name] of [['Connectors', 'connectors'], ['Channels', 'channels']] as const) {
    await page.getByRole('link', { name: link, exact: true }).click();
    await page.getByRole('heading', { name: link, exact: true }).first().waitFor();
    await screenshot(page, name);
  }
  assert.equal(ctx.admin.errors, []);
});

pages('when an admin shares a dashboard with a group, then it takes two clicks and the right is stored', async (ctx) => {
  const { page } = ctx.admin;
  const group = await ok(ctx.t, 'POST', '/api/usergroups', { name: 'Operators' });
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Plant' });
  await page.goto(`/dashboards/${d._id}`);
  await page.getByRole('button', { name: 'Share' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('button', { name: 'Group: Operators' }).click();
  await dialog.getByRole('button', { name: 'Give view access to Operators' }).click();
  await dialog.getByRole('status').filter({ hasText: 'Operators can now see Plant.' }).waitFor();
  const rights = await ok(ctx.t, 'GET', `/api/access-rights/resource/${d._id}`);
  assert.ok(rights.some((r: any) => r.subjectType === 'group' && r.subjectId === group._id && r.scope.includes('read')), JSON.stringify(rights));
  await screenshot(page, 'share');
  await dialog.getByRole('button', { name: 'Close' }).click();
  await page.getByRole('link', { name: 'Users' }).click();
  await page.getByRole('cell', { name: 'newcomer', exact: true }).waitFor();
  await screenshot(page, 'users');
  await page.getByRole('link', { name: 'Groups' }).click();
  await page.getByRole('region', { name: 'Group Operators' }).waitFor();
  await screenshot(page, 'groups');
  assert.equal(ctx.admin.errors, []);
});

pages('given a device named in HTML and a trail widget whose alias is HTML, when their markers are hovered, then the tooltips show the text as written and none of it becomes part of the page', async (ctx) => {
  const { page } = ctx.admin;
  const name = '<b id="injected-name">Pump</b> & <img src="/x.png" id="injected-img">';
  const alias = '<i id="injected-alias">Main</i> pump';
  const device = await ok(ctx.t, 'POST', '/api/iotnodes', { name, lnglat: { type: 'Point', coordinates: [10.75, 59.91] } });
  const d = await ok(ctx.t, 'POST', '/api/dashboards', { name: 'Trails', widgets: [{ x: 0, y: 0, width: 12, height: 10, template: 'geomap', settings: { devices: [{ deviceId: device._id, alias }] } }] });
  const injected = page.locator('#injected-name, #injected-img, #injected-alias');
  const tooltip = page.locator('.leaflet-tooltip');
  await page.goto(`/dashboards/${d._id}`);
  await page.locator('.dashboard[data-ready="true"]').waitFor();
  const trail = page.locator('.grid-item[data-template="geomap"] path.leaflet-interactive');
  const shown: string[] = [];
  // The trail is drawn before the map has its size: hover it again until it can be and its tooltip has shown.
  for (const until = Date.now() + 15_000; !shown.includes(alias) && Date.now() < until; ) {
    await trail.first().hover({ force: true, timeout: 1_000 }).catch(() => undefined);
    shown.push(...(await tooltip.allInnerTexts()));
  }
  assert.ok(shown.includes(alias), JSON.stringify(shown));
  assert.is(await injected.count(), 0);
  // The map page: every device by name. Device markers are circles (drawn with arcs), fences are not.
  await page.getByRole('link', { name: 'Map' }).click();
  const markers = page.getByRole('region', { name: 'Map of devices and geofences' }).locator('path.leaflet-interactive[d*="a"]');
  await markers.nth(1).waitFor();
  // Markers come in as the map's devices load: hover them all again until the device's tooltip has shown.
  const seen: string[] = [];
  for (const until = Date.now() + 15_000; !seen.includes(name) && Date.now() < until; ) {
    for (let i = 0; i < (await markers.count()); i++) {
      await markers.nth(i).hover({ force: true, timeout: 1_000 }).catch(() => undefined);
      seen.push(...(await tooltip.allInnerTexts()));
    }
  }
  assert.ok(seen.includes(name), JSON.stringify(seen));
  assert.is(await injected.count(), 0);
  await screenshot(page, 'map-tooltip-text');
  assert.equal(ctx.admin.errors, []);
});

pages('given a user with a custom role and one with two roles, then the users page shows all of each one\'s roles, and a change sends the whole set, custom roles included', async (ctx) => {
  const { page } = ctx.admin;
  await ok(ctx.t, 'POST', '/api/roles', { name: 'lineOperator', permissions: { device: ['GET'] } });
  await ok(ctx.t, 'POST', '/api/users', { username: 'operator-1', attributes: { roles: ['lineOperator'] } });
  const twoHats = await ok(ctx.t, 'POST', '/api/users', { username: 'two-hats', attributes: { roles: ['editor', 'installer'] } });
  await page.getByRole('link', { name: 'Users' }).click();
  const rolesCell = (username: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name: username, exact: true }) }).getByRole('cell').nth(1);
  await rolesCell('two-hats').waitFor();
  assert.is(await rolesCell('operator-1').innerText(), 'lineOperator');
  assert.is(await rolesCell('two-hats').innerText(), 'editor, installer');
  await page.getByRole('button', { name: 'Change the roles of two-hats' }).click();
  const dialog = page.getByRole('dialog', { name: 'Roles of two-hats' });
  const roles = dialog.getByLabel('Roles');
  const chosen = () => roles.evaluate((s: any) => [...s.selectedOptions].map((o: any) => o.value));
  assert.equal(await chosen(), ['editor', 'installer']);
  // The platform's roles, built-in and custom.
  const offered = await roles.locator('option').allInnerTexts();
  for (const r of ['admin', 'editor', 'installer', 'viewerBasic', 'viewerStandard', 'viewerFull', 'lineOperator']) assert.ok(offered.includes(r), r);
  await screenshot(page, 'user-roles');
  await roles.selectOption(['installer', 'lineOperator']);
  await dialog.getByRole('button', { name: 'Save' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal([...(await ok(ctx.t, 'GET', `/api/users/${twoHats.id}`)).attributes.roles].sort(), ['installer', 'lineOperator']);
  await page.getByRole('cell', { name: 'installer, lineOperator', exact: true }).waitFor();
  // A new user, given a custom role beside a built-in one.
  const form = page.getByRole('form', { name: 'New user' });
  await form.getByLabel('Username').fill('operator-2');
  await form.getByLabel('Roles').selectOption(['viewerStandard', 'lineOperator']);
  await form.getByRole('button', { name: 'Create user' }).click();
  await page.getByRole('status').filter({ hasText: 'operator-2 was created' }).waitFor();
  const [created] = await ok(ctx.t, 'GET', '/api/users?username=operator-2');
  assert.equal([...created.attributes.roles].sort(), ['lineOperator', 'viewerStandard']);
  assert.equal(ctx.admin.errors, []);
});

pages('at a phone width, then the menu folds, a dashboard stacks its widgets in one column and nothing is wider than the screen', async (ctx) => {
  const d = await ok(ctx.t, 'POST', '/api/dashboards', {
    name: 'Phone',
    widgets: [
      { x: 0, y: 0, width: 12, height: 4, template: 'text', settings: { text: 'Left', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' } },
      { x: 12, y: 0, width: 12, height: 4, template: 'text', settings: { text: 'Right', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' } },
    ],
  });
  const w = await openPage(ctx.browser, ctx.t.baseUrl, { width: 390, height: 844 });
  try {
    await logIn(w.page, ADMIN.username, ADMIN.password);
    await w.page.getByRole('button', { name: 'Menu' }).waitFor();
    await w.page.goto(`/dashboards/${d._id}`);
    await w.page.locator('.dashboard[data-ready="true"]').waitFor();
    const [left, right] = [await w.page.getByText('Left').boundingBox(), await w.page.getByText('Right').boundingBox()];
    assert.ok(right!.y > left!.y, 'stacked');
    const overflow = Number(await w.page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth'));
    assert.ok(overflow <= 0, `${overflow}px wider than the screen`);
    await screenshot(w.page, 'phone-dashboard');
    assert.equal(w.errors, []);
  } finally {
    await w.close();
  }
});

pages.run();
