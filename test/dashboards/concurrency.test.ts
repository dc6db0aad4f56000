import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type Response, type TestPlatform } from '../support/platform.js';
import { TEMPLATES, getDashboard, givenDashboard, givenWidget } from './given.js';

const race = suite<{ t: TestPlatform }>('dashboard concurrency');

race.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
race.after(async (ctx) => {
  await ctx.t.stop();
});

const text = TEMPLATES.text!.minimal;

/**
 * Holds the dashboard's stream row locked, so that the requests fired meanwhile
 * all read the same revision, decide, and queue at the append: they meet the
 * store at the same moment, in the order they queued. Releases once `waiting`
 * appends are queued, and answers what the requests answered.
 */
async function atTheSameMoment(t: TestPlatform, dashboardId: string, requests: (() => Promise<Response>)[]): Promise<Response[]> {
  const lock = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await lock.connect();
  const queued = async () =>
    (await lock.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0]!.n;
  try {
    await lock.query('BEGIN');
    await lock.query('SELECT 1 FROM es.streams WHERE stream_id = $1 FOR UPDATE', [`dashboard-${dashboardId}`]);
    const answers: Promise<Response>[] = [];
    for (const [i, request] of requests.entries()) {
      answers.push(request());
      // One at a time, so the queue order is the order of `requests`.
      for (let waited = 0; (await queued()) < i + 1; waited += 10) {
        if (waited > 10_000) throw new Error(`only ${await queued()} of ${i + 1} requests reached the append`);
        await sleep(10);
      }
    }
    await lock.query('COMMIT');
    return await Promise.all(answers);
  } finally {
    await lock.end();
  }
}

race('given two widget additions that meet the store at the same moment, then both are stored: the second is decided again on the new state', async ({ t }) => {
  const d = await givenDashboard(t);
  const add = (label: string) => () => t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { template: 'text', settings: { ...text, text: label } } });
  const [a, b] = await atTheSameMoment(t, d._id, [add('first'), add('second')]);
  assert.equal([a!.status, b!.status], [201, 201], `${a!.text} ${b!.text}`);
  const widgets = (await getDashboard(t, d._id)).widgets;
  assert.equal(widgets.map((w: any) => w.settings.text).sort(), ['first', 'second']);
});

race('given two layouts computed from the same layout that meet the store at the same moment, then the first is stored and the second gets 409, never a silent overwrite', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  const move = (x: number) => () => t.call('PATCH', `/api/dashboards/${d._id}`, { body: { widgets: [{ _id: w._id, x, y: 0, width: 7, height: 2 }] } });
  const [first, second] = await atTheSameMoment(t, d._id, [move(1), move(2)]);
  assert.is(first!.status, 200, first!.text);
  assert.is(second!.status, 409, second!.text);
  assert.is((await getDashboard(t, d._id)).widgets[0].x, 1);
});

race('given a widget PUT that meets its deletion at the store, when the deletion lands first, then the PUT gets 409 and the widget stays deleted', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  const keep = await givenWidget(t, d._id, 'text');
  const [deleted, put] = await atTheSameMoment(t, d._id, [
    () => t.call('DELETE', `/api/dashboards/${d._id}/widgets/${w._id}`),
    () => t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { body: { template: 'text', settings: { ...text, bold: true } } }),
  ]);
  assert.is(deleted!.status, 204, deleted!.text);
  assert.is(put!.status, 409, put!.text);
  assert.equal((await getDashboard(t, d._id)).widgets.map((x: any) => x._id), [keep._id]);
});

race('given a header change and a widget PUT that meet at the store, then both are stored', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  const [header, put] = await atTheSameMoment(t, d._id, [
    () => t.call('PATCH', `/api/dashboards/${d._id}`, { body: { title: 'New title' } }),
    () => t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { body: { template: 'text', settings: { ...text, text: 'New text' } } }),
  ]);
  assert.equal([header!.status, put!.status], [200, 201]);
  const got = await getDashboard(t, d._id);
  assert.equal([got.title, got.widgets[0].settings.text], ['New title', 'New text']);
});

race('given many concurrent additions, deletions of different widgets and header edits, then none is lost', async ({ t }) => {
  const d = await givenDashboard(t);
  const doomed = [];
  for (let i = 0; i < 5; i++) doomed.push(await givenWidget(t, d._id, 'text'));
  const answers = await Promise.all([
    ...Array.from({ length: 15 }, (_, i) => t.call('POST', `/api/dashboards/${d._id}/widgets`, { body: { template: 'text', settings: { ...text, text: `w${i}` } } })),
    ...doomed.map((w) => t.call('DELETE', `/api/dashboards/${d._id}/widgets/${w._id}`)),
    t.call('PATCH', `/api/dashboards/${d._id}`, { body: { description: 'busy' } }),
  ]);
  assert.ok(answers.every((r) => r.status < 300), answers.map((r) => `${r.status} ${r.text}`).join('\n'));
  const got = await getDashboard(t, d._id);
  assert.is(got.description, 'busy');
  assert.equal(got.widgets.map((w: any) => w.settings.text).sort(), Array.from({ length: 15 }, (_, i) => `w${i}`).sort());
});

race('given several layouts sent at once with the same If-Match, then exactly one is stored and the others get 412', async ({ t }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  const etag = (await t.call('GET', `/api/dashboards/${d._id}`)).headers.get('etag')!;
  const answers = await Promise.all(
    Array.from({ length: 6 }, (_, x) => t.call('PATCH', `/api/dashboards/${d._id}`, { body: { widgets: [{ _id: w._id, x, y: 0, width: 7, height: 2 }] }, headers: { 'if-match': etag } })),
  );
  const statuses = answers.map((r) => r.status);
  assert.is(statuses.filter((s) => s === 200).length, 1, statuses.join(','));
  assert.is(statuses.filter((s) => s === 412).length, 5, statuses.join(','));
  const winner = statuses.indexOf(200);
  assert.is((await getDashboard(t, d._id)).widgets[0].x, winner);
});

race.run();
