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

/** The API's message rjsf shows beside a field. */
const besideField = (scope: Locator, field: string) => scope.locator(field).locator('xpath=ancestor::*[contains(@class,"form-group")][1]').locator('.error-detail, .text-danger').first();

ops.run();
