/**
 * Time travel: `?at=` on a dashboard, an iotnode and a geofence answers the
 * resource as it was then, folded from its events with the decider's own
 * `evolve`. Each is compared with what the live read model answered at that
 * instant.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { sql } from 'kysely';
import { toNewEvent } from '../../domain/shared/decider.js';
import { stateAt } from '../../domain/audit/history.js';
import { evolveDocState, type DocState } from '../../domain/devices/device.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import { SNAPSHOT_EVERY } from '../../projections/devices.js';
import { projected } from '../ingest/support.js';

const travel = suite<{ t: TestPlatform; ann: GivenUser }>('time travel');

travel.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.ann = await givenUser(ctx.t, 'ann-travels');
});
travel.after(async ({ t }) => t.stop());

const tick = () => new Promise((r) => setTimeout(r, 5));

/** The live answer and the instant it was read at; later writes are stamped after it. */
async function capture(t: TestPlatform, path: string): Promise<{ at: string; body: unknown }> {
  const res = await t.call('GET', path);
  assert.is(res.status, 200, res.text);
  const at = new Date().toISOString();
  await tick();
  return { at, body: res.body };
}

async function ok(t: TestPlatform, method: string, path: string, body?: unknown) {
  const res = await t.call(method, path, body === undefined ? {} : { body });
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

const at = (path: string, time: string) => `${path}?at=${encodeURIComponent(time)}`;

travel('given a dashboard changed over time, when it is read at earlier instants, then each answer equals the live read at that instant', async ({ t }) => {
  const text = { text: 'Hello', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' };
  const beforeCreation = new Date().toISOString();
  await tick();
  const d = await ok(t, 'POST', '/api/dashboards', { name: 'Plant', widgets: [{ template: 'text', settings: text }] });
  const path = `/api/dashboards/${d._id}`;
  const first = await capture(t, path);
  const w = await ok(t, 'POST', `${path}/widgets`, { template: 'text', settings: { ...text, text: 'Second' } });
  await ok(t, 'PATCH', path, { title: 'Plant floor', widgets: [{ _id: d.widgets[0]._id, x: 4, y: 0, width: 6, height: 3 }, { _id: w._id, x: 0, y: 3, width: 4, height: 2 }] });
  const second = await capture(t, path);
  await ok(t, 'PUT', `${path}/widgets/${w._id}`, { template: 'text', settings: { ...text, text: 'Changed' } });
  await ok(t, 'DELETE', `${path}/widgets/${d.widgets[0]._id}`);
  await ok(t, 'PATCH', path, { name: 'Plant (renamed)' });
  const third = await capture(t, path);

  for (const shot of [first, second, third]) {
    const res = await t.call('GET', at(path, shot.at));
    assert.is(res.status, 200, res.text);
    assert.equal(res.body, shot.body);
  }
  assert.not.equal(first.body, third.body, 'the dashboard did change');
  const then = await t.call('GET', at(path, beforeCreation));
  assert.is(then.status, 404, 'before it existed');
  assert.is(then.text, 'Dashboard not found');
  assert.equal((await t.call('GET', at(path, '2999-01-01T00:00:00Z'))).body, third.body, 'a time to come is now');
});

travel('given an iotnode with updates and reports, when it is read at earlier instants, then each answer equals the live read at that instant', async ({ t }) => {
  const beforeCreation = new Date().toISOString();
  await tick();
  const device = await ok(t, 'POST', '/api/iotnodes', { name: 'boiler', category: 'heating', lnglat: { type: 'Point', coordinates: [4.9, 52.37] } });
  const path = `/api/iotnodes/${device._id}`;
  const report = (temperature: number) => ok(t, 'POST', `${path}/uplinks`, { encodedData: { hexEncoded: '00', port: 1 }, temperature });
  await report(60);
  const first = await capture(t, path);
  await ok(t, 'PUT', path, { name: 'boiler 1', lnglat: { type: 'Point', coordinates: [4.91, 52.38] }, room: 'basement' });
  await report(61);
  await report(62);
  const second = await capture(t, path);
  await ok(t, 'PUT', path, { room: null });
  await report(63);
  const third = await capture(t, path);

  for (const shot of [first, second, third]) assert.equal((await t.call('GET', at(path, shot.at))).body, shot.body);
  assert.is((first.body as { temperature: number }).temperature, 60);
  assert.is((await t.call('GET', at(path, beforeCreation))).status, 404);
});

travel('given a geofence replaced over time, when it is read at earlier instants, then each answer equals the live read at that instant', async ({ t }) => {
  const ring = (d: number) => ({ type: 'Polygon', coordinates: [[[4.8, 52.3], [4.8 + d, 52.3], [4.8 + d, 52.3 + d], [4.8, 52.3]]] });
  const beforeCreation = new Date().toISOString();
  await tick();
  const fence = await ok(t, 'POST', '/api/geofences', { fence: ring(0.1) });
  const path = `/api/geofences/${fence._id}`;
  const first = await capture(t, path);
  await ok(t, 'PUT', path, { fence: ring(0.2) });
  const second = await capture(t, path);
  await ok(t, 'PUT', path, { fence: ring(0.3) });

  for (const shot of [first, second]) assert.equal((await t.call('GET', at(path, shot.at))).body, shot.body);
  assert.is((await t.call('GET', at(path, beforeCreation))).status, 404);
});

travel('when time travel is asked by someone, then today\'s rights decide: a reader given access after that time sees it, others get 404, and a deleted resource is gone', async ({ t, ann }) => {
  const d = await ok(t, 'POST', '/api/dashboards', { name: 'Before ann' });
  const path = `/api/dashboards/${d._id}`;
  const then = await capture(t, path);
  assert.is((await t.call('GET', at(path, then.at), { token: ann.token })).status, 404, 'no right today');
  await ok(t, 'POST', '/api/access-rights', { resourceType: 'dashboard', resourceId: d._id, subjectType: 'singleton', subjectId: ann.id, scope: ['read'] });
  const read = await t.call('GET', at(path, then.at), { token: ann.token });
  assert.is(read.status, 200, 'a right given after that time reaches back');
  assert.equal(read.body, then.body);

  const fence = await ok(t, 'POST', '/api/geofences', { fence: { type: 'Polygon', coordinates: [[[1, 1], [2, 1], [2, 2], [1, 1]]] } });
  const alive = await capture(t, `/api/geofences/${fence._id}`);
  await ok(t, 'DELETE', `/api/geofences/${fence._id}`);
  assert.is((await t.call('GET', at(`/api/geofences/${fence._id}`, alive.at))).status, 404, 'its rights went with it');
});

travel('when the time is not an RFC 3339 instant, then the answer is 422 naming `at`', async ({ t }) => {
  const d = await ok(t, 'POST', '/api/dashboards', { name: 'Times' });
  const device = await ok(t, 'POST', '/api/iotnodes', { name: 'times' });
  for (const path of [`/api/dashboards/${d._id}`, `/api/iotnodes/${device._id}`, '/api/geofences/000000000000000000000000']) {
    // The last two are real local times outside the years 0001 to 9999 in UTC, where stored times no longer compare in order.
    for (const bad of ['yesterday', '2026-02-30T00:00:00Z', '2026-01-01', '1700000000', '2026-01-01T25:00:00Z', '9999-12-31T23:59:59-01:00', '0000-06-01T00:00:00Z']) {
      const res = await t.call('GET', at(path, bad));
      assert.is(res.status, 422, `${path} at=${bad}: ${res.text}`);
      assert.match(res.text, /^ERR - at must match format "date-time"/);
    }
  }
});

travel('given an iotnode with more events than a snapshot spans, when it is read at instants around its snapshots, then the answers are the full fold\'s, and the last the live read', async ({ t }) => {
  const device = await ok(t, 'POST', '/api/iotnodes', { name: 'long history' });
  const id = device._id as string;
  const base = Date.now() + 1000;
  const time = (revision: number) => new Date(base + revision * 10).toISOString();
  const context = { actor: 'credentials:6650c0ffee0000000000beef', correlationId: 'snapshot-test' };
  for (let from = 1; from <= 1230; from += 100) {
    const events = [];
    for (let r = from; r < from + 100 && r <= 1230; r++) {
      const report = { type: 'DeviceReported', data: { id, topic: 'bench', path: [], payload: { n: r, even: r % 2 === 0 }, reportedAt: time(r) } };
      events.push(toNewEvent(report, { ...context, now: time(r) }));
    }
    await t.platform.deps.store.append(`device-${id}`, events, 'any');
  }
  await projected(t);
  const { rows } = await sql<{ revision: number }>`SELECT revision FROM device_snapshots WHERE device_id = ${id} ORDER BY revision`.execute(t.platform.deps.db);
  assert.equal(rows.map((r) => Number(r.revision)), [SNAPSHOT_EVERY, 2 * SNAPSHOT_EVERY], 'snapshots at every 500 events');

  const path = `/api/iotnodes/${id}`;
  const full = async (cut: string) => {
    const fold = { initial: (): DocState => ({ status: 'none' }), evolve: (s: DocState, e: RecordedEvent) => evolveDocState(s, e as never) };
    const { state } = await stateAt(t.platform.deps.store, `device-${id}`, fold, cut);
    return state.status === 'active' ? JSON.parse(JSON.stringify({ _id: id, ...state.doc })) : null;
  };
  for (const revision of [499, 500, 501, 999, 1000, 1229, 1230]) {
    const res = await t.call('GET', at(path, time(revision)));
    assert.is(res.status, 200, res.text);
    assert.is(res.body.n, revision);
    assert.equal(res.body, await full(time(revision)), `at revision ${revision}`);
  }
  assert.equal((await t.call('GET', at(path, time(1230)))).body, (await t.call('GET', path)).body, 'the last instant is the live read');
});

travel.run();
