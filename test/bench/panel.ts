/**
 * `npm run bench:panel`: the control panel in headless Chromium (Debian's
 * chromium through playwright-core) against the platform in this process on a
 * throw-away cluster. For a 30-widget dashboard of mixed templates, each round
 * opens a fresh browser context (a cold load: empty cache, a stored token) and
 * measures:
 * - time to interactive: from the navigation's start until every widget shows
 *   its first data (the page's `dashboard-ready` mark);
 * - the first live update: from an MQTT publish by a device until its new value
 *   is on screen;
 * - the JavaScript the dashboard load transferred.
 * The baseline, in the same browser and run: loading `/api/openapi.json` in a
 * fresh context (navigation start to load end). Also printed: the first-load
 * bundle (the entry chunk and its static imports, gzipped). Prints one JSON
 * object; medians over the rounds.
 */
import { join } from 'node:path';
import { startTestCluster } from '../support/cluster.js';
import { startTestPlatform } from '../support/platform.js';
import { ensurePanelBuilt, launch } from '../support/browser.js';
import { connectMqtt, deviceOf, givenProvider, publish } from '../ingest/support.js';
import { firstLoad } from '../../web/firstLoad.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

ensurePanelBuilt();
const cluster = await startTestCluster();
const t = await startTestPlatform({ logLevel: 'warn' });
const browser = await launch();
try {
  const provider = await givenProvider(t, 'bench-panel', Array.from({ length: 10 }, (_, i) => `svc/generic/v2/bench/d${i}`));
  const mqtt = await connectMqtt(t, provider.username, provider.password);
  for (let round = 0; round < 5; round++)
    for (let i = 0; i < 10; i++) await publish(mqtt, `svc/generic/v2/bench/d${i}`, { temperature: 20 + i + round, humidity: 40 + i, power: 100 * i + round });
  const devices = await Promise.all(Array.from({ length: 10 }, (_, i) => deviceOf(t, `svc/generic/v2/bench/d${i}`)));
  const id = (i: number) => devices[i % 10]!._id as string;
  const chart = { timePeriod: 'hour', resolution: 'full', curveType: 'linear', yAxisRange: 'auto', calculation: 'mean', shouldShowHeading: true, shouldShowSubheading: false };
  const widgets: { template: string; settings: Record<string, unknown> }[] = [
    ...Array.from({ length: 12 }, (_, i) => ({ template: 'deviceValue', settings: { deviceId: id(i), field: 'temperature', display: (['text', 'gauge', 'circle', 'bar'] as const)[i % 4], color: 'blue', shouldShowHeading: true, shouldShowSubheading: true, unit: '°C' } })),
    ...Array.from({ length: 6 }, (_, i) => ({ template: 'deviceChart', settings: { deviceId: id(i), field: 'temperature', ...chart } })),
    ...Array.from({ length: 3 }, (_, i) => ({ template: 'multiDeviceValue', settings: { items: [0, 1, 2, 3].map((k) => ({ deviceId: id(i + k), field: 'power' })) } })),
    ...Array.from({ length: 2 }, () => ({ template: 'dataTable', settings: { devices: [0, 1, 2, 3, 4].map((k) => ({ deviceId: id(k), fields: ['temperature', 'humidity'] })), shouldShowHeading: true } })),
    { template: 'multiDeviceChart', settings: { deviceFieldPairs: [0, 1, 2].map((k) => ({ deviceId: id(k), field: 'temperature' })), ...chart, shouldShowSubheading: undefined, shouldShowLegend: true } },
    { template: 'equalizer', settings: { items: [0, 1, 2, 3].map((k) => ({ deviceId: id(k), field: 'humidity' })) } },
    { template: 'swimlane', settings: { signals: [0, 1].map((k) => ({ deviceId: id(k), field: 'power' })) } },
    { template: 'pieChart', settings: { field: 'power', devices: [1, 2, 3].map((k) => ({ deviceId: id(k) })) } },
    { template: 'resourceCount', settings: { resource: 'devices' } },
    { template: 'text', settings: { text: 'Bench', alignment: 'left', color: 'black', fontSize: 'lg', decoration: 'none' } },
    { template: 'navigation', settings: { targetDashboardId: '0123456789abcdef01234567', largeText: 'Elsewhere' } },
  ];
  const created = await t.call('POST', '/api/dashboards', { body: { name: 'Bench 30', widgets } });
  if (created.status !== 201) throw new Error(`creating the dashboard: ${created.status} ${created.text}`);
  const dashboard = created.body as { _id: string; widgets: unknown[] };
  if (dashboard.widgets.length !== 30) throw new Error(`the dashboard has ${dashboard.widgets.length} widgets`);

  const tti: number[] = [];
  const live: number[] = [];
  const jsBytes: number[] = [];
  const baseline: number[] = [];
  const phases: Record<string, number>[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // The baseline: the API document in a fresh context.
    {
      const context = await browser.newContext({ baseURL: t.baseUrl });
      const page = await context.newPage();
      await page.goto('/api/openapi.json', { waitUntil: 'load' });
      baseline.push(Number(await page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")));
      await context.close();
    }
    const context = await browser.newContext({ baseURL: t.baseUrl, viewport: { width: 1280, height: 900 } });
    await context.addInitScript(`localStorage.setItem('panel.token', ${JSON.stringify(t.adminToken)}); localStorage.setItem('panel.tileUrl', '');`);
    const page = await context.newPage();
    await page.goto(`/dashboards/${dashboard._id}`);
    await page.locator('.dashboard[data-ready="true"]').waitFor({ timeout: 30_000 });
    tti.push(Number(await page.evaluate("performance.getEntriesByName('dashboard-ready')[0].startTime")));
    phases.push((await page.evaluate("Object.fromEntries(['session-ready', 'dashboard-data', 'grid-mounted', 'dashboard-ready'].map((n) => [n, Math.round(performance.getEntriesByName(n)[0]?.startTime ?? -1)]))")) as Record<string, number>);
    jsBytes.push(Number(await page.evaluate("performance.getEntriesByType('resource').filter((r) => r.name.endsWith('.js')).reduce((s, r) => s + r.encodedBodySize, 0)")));
    // Live: once the subscription is up, a report reaches the screen.
    await page.locator('html[data-live="online"]').waitFor({ timeout: 10_000 });
    const value = 1000 + round;
    const shown = page.locator(`.grid-item[data-template="deviceValue"] [data-value="${value}"]`).first();
    await page.waitForTimeout(200);
    const started = performance.now();
    await publish(mqtt, 'svc/generic/v2/bench/d0', { temperature: value });
    await shown.waitFor({ timeout: 10_000 });
    live.push(performance.now() - started);
    await context.close();
  }
  await mqtt.endAsync();
  const bundle = firstLoad(join(new URL('../../web/dist', import.meta.url).pathname));
  const ttiMs = Math.round(median(tti));
  const baselineMs = Math.round(median(baseline));
  console.log(
    JSON.stringify(
      {
        benchmark: 'panel',
        widgets: 30,
        rounds: ROUNDS,
        timeToInteractiveMs: ttiMs,
        timeToInteractiveRoundsMs: tti.map(Math.round),
        phasesMs: Object.fromEntries(Object.keys(phases[0] ?? {}).map((k) => [k, median(phases.map((p) => p[k]!))])),
        aimTimeToInteractiveMs: 1500,
        firstLiveUpdateMs: Math.round(median(live)),
        firstLiveUpdateRoundsMs: live.map(Math.round),
        aimLiveUpdateMs: 1000,
        firstLoadJsGzipKB: Number((bundle.gzipBytes / 1024).toFixed(1)),
        aimFirstLoadJsGzipKB: 400,
        dashboardLoadJsTransferredKB: Number((median(jsBytes) / 1024).toFixed(1)),
        baseline: { what: 'GET /api/openapi.json in a fresh browser context, navigation start to load end', loadMs: baselineMs, roundsMs: baseline.map(Math.round) },
        timeToInteractiveOverBaseline: Number((ttiMs / Math.max(1, baselineMs)).toFixed(1)),
      },
      null,
      2,
    ),
  );
} finally {
  await browser.close();
  await t.stop();
  await cluster.stop();
}
