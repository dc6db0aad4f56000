import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Browser, Locator } from 'playwright-core';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';
import { ensurePanelBuilt, launch, logIn, openPage, screenshot, type WatchedPage } from '../support/browser.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';
import { ok } from './support.js';

/**
 * The panel's pages for what devices are told and how they connect, in a real
 * browser against the whole platform: device commands and their downlink
 * queue (through ChirpStack's documented API, played by its stand-in),
 * connectors with the integrations the platform offers, rules, and
 * `resourceCount` widgets counting rules, locations, organizations and apps.
 */
interface Ctx {
  t: TestPlatform;
  ns: ChirpStackStandIn;
  browser: Browser;
  admin: WatchedPage;
  connector: Record<string, any>;
  device: Record<string, any>;
}
const ops = suite<Ctx>('control panel: commands, connectors, rules, counts');

const EUI = '70b3d57ed0052a42';
const TOKEN = 'chirpstack-token-never-shown';

ops.before(async (ctx) => {
  ensurePanelBuilt();
  ctx.t = await startTestPlatform();
  ctx.ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
  ctx.connector = await ok(ctx.t, 'POST', '/api/connectors', { name: 'plant network', integration: 'ChirpStack', chirpstack: { url: ctx.ns.url, apiToken: TOKEN } });
  ctx.ns.integration = { url: `${ctx.t.baseUrl}/api/integrations/chirpstack/${ctx.connector._id}`, headers: { Authorization: `Bearer ${ctx.connector.webhookSecret}` } };
  ctx.device = await ok(ctx.t, 'POST', '/api/iotnodes', { name: 'valve 7', connector: ctx.connector._id, devEui: EUI });
  ctx.browser = await launch();
  ctx.admin = await openPage(ctx.browser, ctx.t.baseUrl);
  await logIn(ctx.admin.page, ADMIN.username, ADMIN.password);
  await ctx.admin.page.getByRole('heading', { name: 'Dashboards' }).waitFor();
});

ops.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.t?.stop();
  await ctx.ns?.stop();
});

ops('when a command is sent from the device page, then a refusal shows beside its field, and the downlink appears queued, then sent', async (ctx) => {
  const { page } = ctx.admin;
  await page.goto(`/devices/${ctx.device._id}`);
  const form = page.getByRole('region', { name: 'Send a command' });
  const queue = page.getByRole('region', { name: 'Downlink queue' });
  await queue.getByText('No downlinks yet.').waitFor();
  // The commands of the connector's integration, as GET /api/integrations lists them.
  await form.getByLabel('Command').waitFor();
  const offered = await form.getByLabel('Command').locator('option').allInnerTexts();
  assert.ok(offered.some((o) => o.startsWith('loraAppServerQueueDownlink')), offered.join());
  assert.ok(offered.some((o) => o.startsWith('apiCall')), offered.join());
  await form.getByLabel('Command').selectOption('loraAppServerQueueDownlink');
  await form.locator('#command_fPort').fill('10');
  await form.locator('#command_data').fill('abc');
  await form.getByRole('button', { name: 'Send' }).click();
  // The API's 422 names data.data: its message is shown beside that field, and nothing is queued.
  const refusal = besideField(form, '#command_data');
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /^data /);
  assert.is(ctx.ns.queues.get(EUI)?.length ?? 0, 0);
  await form.locator('#command_data').fill('0a0b');
  await form.getByRole('button', { name: 'Send' }).click();
  await form.getByRole('status').filter({ hasText: 'Accepted: queued' }).waitFor();
  const [downlink] = await ok(ctx.t, 'GET', `/api/iotnodes/${ctx.device._id}/downlinks`);
  const row = queue.locator(`tr[data-command="${downlink.commandId}"]`);
  await row.locator('[data-status="queued"]').waitFor();
  assert.equal(await row.locator('td').allInnerTexts().then((c) => c.slice(1, 4)), ['loraAppServerQueueDownlink', '10', '0a0b']);
  await screenshot(page, 'device-command-queued');
  // The device's receive window takes the item: ChirpStack reports it sent, and the queue follows without a reload.
  await ctx.ns.transmit(EUI);
  await row.locator('[data-status="sent"]').waitFor();
  await screenshot(page, 'device-command-sent');
  assert.equal(ctx.admin.errors, []);
});

ops('when a connector is created, then the integrations offered are the platform\'s, a refusal shows beside its field, the webhook URL and secret are shown once, and the API token never', async (ctx) => {
  const { page } = ctx.admin;
  await page.getByRole('link', { name: 'Connectors', exact: true }).click();
  const listed = (await ok(ctx.t, 'GET', '/api/integrations')) as { name: string; available: boolean }[];
  const integrations = page.getByRole('region', { name: 'Integrations', exact: true });
  for (const i of listed) await integrations.getByRole('cell', { name: i.name, exact: true }).waitFor();
  const connectors = page.getByRole('region', { name: 'Connectors', exact: true });
  await connectors.getByRole('button', { name: 'New' }).click();
  const dialog = page.getByRole('dialog');
  // The form is drawn once the integrations are read.
  await dialog.locator('#create_integration').waitFor();
  const offered = await dialog.locator('#create_integration option').evaluateAll((os: any[]) => os.filter((o) => o.value !== '').map((o) => String(o.textContent)));
  assert.equal(offered, listed.filter((i) => i.available).map((i) => i.name));
  await dialog.locator('#create_name').fill('field network');
  await dialog.locator('#create_integration').selectOption({ label: 'ChirpStack' });
  // Only the chosen integration's settings; its API token is typed in a password field.
  assert.is(await dialog.locator('#create_theThingsStack').count(), 0);
  assert.is(await dialog.locator('#create_basicCredentialsSetId').count(), 0);
  assert.is(await dialog.locator('#create_chirpstack_apiToken').getAttribute('type'), 'password');
  await dialog.locator('#create_chirpstack_url').fill('chirpstack.example.com');
  await dialog.locator('#create_chirpstack_apiToken').fill('field-token-write-only');
  await dialog.getByRole('button', { name: 'Create' }).click();
  const refusal = besideField(dialog, '#create_chirpstack_url');
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /^url /);
  assert.is((await ok(ctx.t, 'GET', '/api/connectors')).length, 1);
  await dialog.locator('#create_chirpstack_url').fill(ctx.ns.url);
  await dialog.getByRole('button', { name: 'Create' }).click();
  const url = await dialog.locator('[data-given="webhookUrl"]').innerText();
  const secret = await dialog.locator('[data-given="webhookSecret"]').innerText();
  const created = (await ok(ctx.t, 'GET', '/api/connectors')).find((c: any) => c.name === 'field network');
  assert.is(url, `${ctx.t.baseUrl}/api/integrations/chirpstack/${created._id}`);
  // What was shown is what the network server must send: the webhook takes it, and refuses another.
  const call = (bearer: string) => fetch(`${url}?event=up`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` }, body: JSON.stringify({ deduplicationId: '5c0f1a7e-2a1b-4c3d-9e8f-0a1b2c3d4e5f', time: new Date().toISOString(), deviceInfo: { devEui: 'ffffffffffffffff' }, fCnt: 1, fPort: 1, data: 'AQ==' }) });
  assert.is((await call(secret)).status, 200);
  assert.is((await call('not-the-secret')).status, 401);
  await screenshot(page, 'connector-created');
  await dialog.getByRole('button', { name: 'Done' }).click();
  await connectors.getByRole('cell', { name: 'field network', exact: true }).waitFor();
  // Shown once: neither the secret nor the token is on the page after, nor after a reload.
  for (const when of ['after', 'after a reload']) {
    if (when !== 'after') {
      await page.reload();
      await connectors.getByRole('cell', { name: 'field network', exact: true }).waitFor();
    }
    const text = await page.locator('main').innerText();
    assert.not.ok(text.includes(secret), `the webhook secret is on the page ${when}`);
    assert.not.ok(text.includes('field-token-write-only'), `the API token is on the page ${when}`);
  }
  await screenshot(page, 'connectors');
  assert.equal(ctx.admin.errors, []);
});

ops('when a rule is built in the form of its schema, then a refusal shows beside the field it names, and the rule is listed, then deleted', async (ctx) => {
  const { page } = ctx.admin;
  await page.getByRole('link', { name: 'Rules', exact: true }).click();
  const rules = page.getByRole('region', { name: 'Rules', exact: true });
  await rules.getByText('None yet.').waitFor();
  await rules.getByRole('button', { name: 'New' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.locator('#create_name').fill('hall.lights');
  // Each node's config is one of the node schemas the document names; its kind is filled in.
  await dialog.locator('#create_definition_nodes__add').click();
  await dialog.locator('#create_definition_nodes_0_id').fill('press');
  await dialog.locator('#create_definition_nodes_0_type').selectOption({ label: 'trigger' });
  await dialog.locator('#create_definition_nodes_0_config__oneof_select').selectOption({ label: 'Button trigger' });
  await dialog.locator('#create_definition_nodes__add').click();
  await dialog.locator('#create_definition_nodes_1_id').fill('note');
  await dialog.locator('#create_definition_nodes_1_type').selectOption({ label: 'action' });
  await dialog.locator('#create_definition_nodes_1_config__oneof_select').selectOption({ label: 'Log action' });
  await dialog.locator('#create_definition_nodes_1_config_message').fill('lights on');
  await dialog.locator('#create_definition_edges__add').click();
  // An item's buttons say what they do in words (rjsf draws them as icons the panel does not ship).
  const remove = dialog.getByRole('button', { name: 'Remove' }).first();
  assert.is(await remove.evaluate((b) => (globalThis as any).getComputedStyle(b, '::after').content), '"Remove"');
  await dialog.locator('#create_definition_edges_0_from').fill('press');
  await dialog.locator('#create_definition_edges_0_to').fill('nowhere');
  await dialog.getByRole('button', { name: 'Create' }).click();
  const refusal = besideField(dialog, '#create_definition_edges_0_to');
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /^to .*nowhere/);
  await screenshot(page, 'rule-refused');
  assert.equal(await ok(ctx.t, 'GET', '/api/rules-v2'), []);
  await dialog.locator('#create_definition_edges_0_to').fill('note');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await dialog.waitFor({ state: 'detached' });
  await rules.getByRole('cell', { name: 'hall.lights', exact: true }).waitFor();
  const [rule] = await ok(ctx.t, 'GET', '/api/rules-v2');
  assert.equal(rule.definition.nodes.map((n: any) => [n.id, n.type, n.config]), [['press', 'trigger', { resourceType: 'button' }], ['note', 'action', { action: 'log', message: 'lights on', type: 'info', priority: 'low' }]]);
  await screenshot(page, 'rules');
  await rules.getByRole('button', { name: 'Delete hall.lights' }).click();
  await rules.getByText('None yet.').waitFor();
  assert.equal(await ok(ctx.t, 'GET', '/api/rules-v2'), []);
  assert.equal(ctx.admin.errors, []);
});

ops('given rules, locations, organizations and apps, when resourceCount widgets are added for each kind the template allows, then each shows the count the API gives', async (ctx) => {
  const { page } = ctx.admin;
  const rule = (name: string) => ({ name, definition: { nodes: [{ id: 'press', type: 'trigger', config: { resourceType: 'button' } }, { id: 'note', type: 'action', config: { action: 'log', message: name } }], edges: [{ from: 'press', to: 'note' }] } });
  for (const name of ['pump.start', 'pump.stop']) await ok(ctx.t, 'POST', '/api/rules-v2', rule(name));
  await ok(ctx.t, 'POST', '/api/locations', { name: 'Plant', lat: 59.33, lng: 18.07, defaultLayer: { name: 'Ground' } });
  const top = await ok(ctx.t, 'POST', '/api/organizations', { name: 'Acme' });
  for (const name of ['Acme North', 'Acme South']) await ok(ctx.t, 'POST', '/api/organizations', { name, parent: top._id });
  await ok(ctx.t, 'POST', '/api/apps', { name: 'field app' });
  const doc = await ok(ctx.t, 'GET', '/api/openapi.json');
  const kinds = doc.components.schemas.ResourceCountSettings.properties.resource.enum as string[];
  assert.ok(['rules', 'locations', 'organizations', 'apps'].every((k) => kinds.includes(k)), kinds.join());
  const paths: Record<string, string> = { devices: '/api/iotnodes', rules: '/api/rules-v2', locations: '/api/locations', organizations: '/api/organizations', apps: '/api/apps' };
  const expected: Record<string, number> = {};
  for (const kind of kinds) {
    const res = await ctx.t.call('GET', `${paths[kind]}?options=count&limit=1`);
    expected[kind] = Number(res.headers.get('x-total-count'));
  }
  assert.equal([expected.rules, expected.locations, expected.organizations, expected.apps], [2, 1, 3, 1]);

  await page.getByRole('link', { name: 'Dashboards', exact: true }).click();
  await page.getByRole('button', { name: 'New dashboard' }).click();
  await page.getByLabel('Name').fill('Counts');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.waitForURL(/\/dashboards\/[0-9a-f]{24}/);
  for (const kind of kinds) {
    await page.getByRole('button', { name: 'Add widget' }).click();
    await page.getByLabel('Widget type').selectOption('resourceCount');
    await page.locator('#settings_resource').selectOption({ label: kind });
    await page.getByRole('button', { name: 'Add to dashboard' }).click();
    await page.getByRole('dialog').waitFor({ state: 'detached' });
  }
  await page.getByRole('button', { name: 'Done editing' }).click();
  await page.locator('.dashboard[data-ready="true"]').waitFor();
  const counts = page.locator('.grid-item[data-template="resourceCount"]');
  assert.is(await counts.count(), kinds.length);
  const labels: Record<string, string> = { devices: 'Devices', rules: 'Rules', locations: 'Locations', organizations: 'Organizations', apps: 'Apps' };
  for (const kind of kinds) {
    const value = counts.filter({ has: page.locator('.w-title', { hasText: labels[kind] }) }).locator('[data-value]');
    assert.is(await value.innerText(), String(expected[kind]), kind);
  }
  await screenshot(page, 'resource-counts');
  assert.equal(ctx.admin.errors, []);
});

ops('when a calculation is built in the form of its schema, then a refusal shows beside the field it names, and it is listed, then deleted', async (ctx) => {
  const { page } = ctx.admin;
  await page.getByRole('link', { name: 'Calculations', exact: true }).click();
  const calcs = page.getByRole('region', { name: 'Calculations', exact: true });
  await calcs.getByText('None yet.').waitFor();
  await calcs.getByRole('button', { name: 'New' }).click();
  const dialog = page.getByRole('dialog');
  // The shapes of CalculationWrite, by their type; the window one chosen.
  await dialog.locator('#create__oneof_select').selectOption({ label: 'window' });
  await dialog.locator('#create_name').fill('valve hourly mean');
  await dialog.locator('#create_source_deviceId').selectOption(ctx.device._id);
  await dialog.locator('#create_source_field').fill('temperature');
  await dialog.locator('#create_window_seconds').fill('3600');
  await dialog.locator('#create_destination_deviceId').selectOption(ctx.device._id);
  await dialog.locator('#create_destination_field').fill('name');
  await dialog.locator('#create_aggregation').selectOption({ label: 'mean' });
  await dialog.locator('#create_schedule_type').selectOption({ label: 'onChange' });
  await dialog.getByRole('button', { name: 'Create' }).click();
  // A field only REST sets is no destination: the API says so beside it.
  const refusal = besideField(dialog, '#create_destination_field');
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /^field /);
  await screenshot(page, 'calculation-refused');
  assert.equal(await ok(ctx.t, 'GET', '/api/calculations'), []);
  await dialog.locator('#create_destination_field').fill('temperatureMean');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await dialog.waitFor({ state: 'detached' });
  const row = calcs.getByRole('row').filter({ has: page.getByRole('cell', { name: 'valve hourly mean', exact: true }) });
  // The list is read again after the dialog closes: its row comes a moment later.
  await row.waitFor();
  assert.equal((await row.getByRole('cell').allInnerTexts()).slice(0, 4), ['valve hourly mean', 'window', 'mean', 'running']);
  const [stored] = await ok(ctx.t, 'GET', '/api/calculations');
  assert.equal([stored.source, stored.window, stored.destination, stored.schedule], [{ deviceId: ctx.device._id, field: 'temperature' }, { seconds: 3600 }, { deviceId: ctx.device._id, field: 'temperatureMean' }, { type: 'onChange' }]);
  await screenshot(page, 'calculations');
  await calcs.getByRole('button', { name: 'Delete valve hourly mean' }).click();
  await calcs.getByText('None yet.').waitFor();
  assert.equal(await ok(ctx.t, 'GET', '/api/calculations'), []);
  assert.equal(ctx.admin.errors, []);
});

/** The API's message rjsf shows beside a field. */
const besideField = (scope: Locator, field: string) => scope.locator(field).locator('xpath=ancestor::*[contains(@class,"form-group")][1]').locator('.error-detail, .text-danger').first();

ops.run();
