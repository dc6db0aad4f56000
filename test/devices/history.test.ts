import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { deviceStream, type DeviceEvent } from '../../domain/devices/device.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { writeLog, type LogEntry } from '../../domain/logs/logEntry.js';
import { purgeExpiredLogs } from '../../projections/logs.js';
import { textProblem } from '../../domain/shared/json.js';

const T0 = Date.UTC(2024, 0, 1) / 1000;
const at = (s: number) => new Date((T0 + s) * 1000).toISOString();

const history = suite<{ t: TestPlatform; id: string }>('History, stats and logs');

/** Reports as the ingest pipeline writes them, at chosen times. */
async function report(t: TestPlatform, id: string, seconds: number, payload: Record<string, unknown>, path: string[] = []) {
  const event: DeviceEvent = { type: 'DeviceReported', data: { id, topic: 'svc/generic/v2/h', path, payload, reportedAt: at(seconds) } };
  const result = await t.platform.deps.store.append(deviceStream(id), [toNewEvent(event, { actor: 'credentials:x', correlationId: randomUUID(), now: at(seconds) })], 'any');
  await t.platform.deps.projections.waitFor(result.position, 5000);
}

history.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.id = (await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'Meter' } })).body._id;
  await report(ctx.t, ctx.id, -60, { temp: 5 });
  await report(ctx.t, ctx.id, 0, { temp: 10, on: true, mode: 'eco' });
  await report(ctx.t, ctx.id, 30, { temp: 20, on: false });
  await report(ctx.t, ctx.id, 60, { temp: 30, mode: 'comfort' });
  await report(ctx.t, ctx.id, 90, { temp: 40 });
  await report(ctx.t, ctx.id, 150, { temp: 100, mode: 'off' });
  await report(ctx.t, ctx.id, 151, { cpu: 0.25, list: [1, 2] }, ['stats']);
});
history.after(async (ctx) => {
  await ctx.t.stop();
});

const stats = async (t: TestPlatform, id: string, query: string) => {
  const res = await t.call('GET', `/api/iotnodes/${id}/stats?start=${T0}&end=${T0 + 180}&${query}`);
  assert.is(res.status, 200, res.text);
  return res.body as { time: string; value: unknown }[];
};

history('when fields were reported, then stats/fields lists every scalar field, nested ones by dotted path', async ({ t, id }) => {
  const res = await t.call('GET', `/api/iotnodes/${id}/stats/fields`);
  assert.equal(res.body, ['mode', 'on', 'stats.cpu', 'temp']);
});

history('when asking without distance, then the raw values in [start, end) come back in time order', async ({ t, id }) => {
  assert.equal(await stats(t, id, 'measurement=temp'), [at(0), at(30), at(60), at(90), at(150)].map((time, i) => ({ time, value: [10, 20, 30, 40, 100][i] })));
  assert.equal((await stats(t, id, 'measurement=on')).map((p) => p.value), [true, false]);
  assert.equal((await stats(t, id, 'measurement=mode')).map((p) => p.value), ['eco', 'comfort', 'off']);
});

const expected: Record<string, number[]> = {
  mean: [15, 35, 100],
  min: [10, 30, 100],
  max: [20, 40, 100],
  sum: [30, 70, 100],
  count: [2, 2, 1],
  first: [10, 30, 100],
  last: [20, 40, 100],
  // The value before start (5) is the base of the first bucket.
  difference: [15, 20, 60],
  // Bucket 3: 40 holds 30 s, then 100 holds 30 s until end.
  timeWeightedMean: [15, 35, 70],
};

for (const [calculation, values] of Object.entries(expected)) {
  history(`when the calculation is ${calculation} over 60 s buckets, then each bucket has the expected value`, async ({ t, id }) => {
    const points = await stats(t, id, `measurement=temp&distance=60&calculation=${calculation}`);
    assert.equal(points.map((p) => p.time), [at(0), at(60), at(120)]);
    assert.equal(points.map((p) => p.value), values);
  });
}

history('when first and last bucket a string field, then they return strings; count counts them', async ({ t, id }) => {
  assert.equal((await stats(t, id, 'measurement=mode&distance=180&calculation=last')).map((p) => p.value), ['off']);
  assert.equal((await stats(t, id, 'measurement=mode&distance=180&calculation=count')).map((p) => p.value), [3]);
});

history('when the calculation is unknown, start is after end, or the buckets are too many, then 422', async ({ t, id }) => {
  assert.is((await t.call('GET', `/api/iotnodes/${id}/stats?measurement=temp&distance=60&calculation=median`)).status, 422);
  assert.is((await t.call('GET', `/api/iotnodes/${id}/stats?measurement=temp&start=${T0 + 10}&end=${T0}`)).status, 422);
  assert.is((await t.call('GET', `/api/iotnodes/${id}/stats?measurement=temp&start=0&end=${T0}&distance=1`)).status, 422);
  assert.is((await t.call('GET', `/api/iotnodes/${id}/stats`)).status, 422);
});

history('when another user asks for the history, then 404', async ({ t, id }) => {
  const other = await givenUser(t, 'curious');
  assert.is((await t.call('GET', `/api/iotnodes/${id}/stats?measurement=temp`, { token: other.token })).status, 404);
  assert.is((await t.call('GET', `/api/iotnodes/${id}/stats/fields`, { token: other.token })).status, 404);
});

history('when a reported string is longer than history keeps and a surrogate pair straddles the cut, then the pair goes whole and the read models keep up', async ({ t, id }) => {
  const long = `a${'😀'.repeat(600)}`;
  await report(t, id, 170, { long });
  const points = await stats(t, id, 'measurement=long');
  assert.is(points.length, 1);
  const kept = points[0].value as string;
  assert.is(kept, long.slice(0, 1023));
  assert.is(textProblem(kept), null);
});

history('when a reported value sits at a path longer than 1024 bytes, then the device keeps it, its history is left out, the report\'s other values have history and the read models keep up', async ({ t, id }) => {
  // Five levels of 200 three-byte characters: a path of 3,004 bytes, past what an index key of PostgreSQL holds.
  const level = (c: string) => c.repeat(200);
  const deep = { [level('甲')]: { [level('乙')]: { [level('丙')]: { [level('丁')]: { [level('戊')]: 7 } } } } };
  await report(t, id, 172, { ...deep, beside: 3 });
  assert.is((await stats(t, id, 'measurement=beside')).length, 1);
  const fields = await t.call('GET', `/api/iotnodes/${id}/stats/fields`);
  assert.is(fields.status, 200, fields.text);
  assert.ok(!JSON.stringify(fields.body).includes(level('戊')), 'no history field for the long path');
  const device = await t.call('GET', `/api/iotnodes/${id}`);
  assert.is(device.body[level('甲')][level('乙')][level('丙')][level('丁')][level('戊')], 7);
  const parked = await t.platform.deps.db.selectFrom('es.parked_events' as any).select('event_id').execute();
  assert.equal(parked, []);
});

history('when values are near the limits of a 64-bit float, then the mean and the time-weighted mean are computed, and a sum past the limit answers 422 naming it', async ({ t, id }) => {
  await report(t, id, 173, { huge: 1e200, edge: 1.7e308 });
  await report(t, id, 174, { huge: 1, edge: 1.7e308 });
  const over = (calculation: string, field: string) => stats(t, id, `measurement=${field}&distance=180&calculation=${calculation}`);
  const mean = await over('mean', 'huge');
  assert.is(mean.length, 1);
  assert.ok(Math.abs((mean[0]!.value as number) / 5e199 - 1) < 1e-12, String(mean[0]!.value));
  const weighted = await over('timeWeightedMean', 'huge');
  assert.ok(Number.isFinite(weighted[0]!.value as number) && (weighted[0]!.value as number) > 1, String(weighted[0]!.value));
  assert.is((await over('sum', 'huge'))[0]!.value, 1e200);
  assert.is((await over('mean', 'edge'))[0]!.value, 1.7e308);
  const sum = await t.call('GET', `/api/iotnodes/${id}/stats?start=${T0}&end=${T0 + 180}&measurement=edge&distance=180&calculation=sum`);
  assert.is(sum.status, 422, sum.text);
  assert.is(sum.text, 'ERR - calculation sum of edge is out of the range of a 64-bit floating-point number');
});

history('when a report brings a category of 3,000 random bytes or a lnglat with a crs naming no reference system, then the device keeps both reports, its point is its coordinates, and nothing is set aside', async ({ t, id }) => {
  const category = randomBytes(2250).toString('base64');
  await report(t, id, 175, { category, level: 1 });
  await report(t, id, 176, { lnglat: { type: 'Point', coordinates: [18.07, 59.33], crs: { type: 'name', properties: { name: 'EPSG:99999999999' } } }, level: 2 });
  const device = (await t.call('GET', `/api/iotnodes/${id}`)).body;
  assert.is(device.level, 2);
  assert.is(device.category, category);
  const { rows } = await sql<{ category: string | null; lng: number; lat: number }>`SELECT category, ST_X(lnglat) AS lng, ST_Y(lnglat) AS lat FROM devices WHERE id = ${id}`.execute(t.platform.deps.db);
  assert.equal(rows[0], { category: null, lng: 18.07, lat: 59.33 });
  const parked = await t.platform.deps.db.selectFrom('es.parked_events' as any).select('event_id').execute();
  assert.equal(parked, []);
});

history('logs: filters, cursor paging, access and expiry', async ({ t, id }) => {
  const store = t.platform.deps.store;
  const write = (entry: Partial<LogEntry>, seconds: number) =>
    writeLog(store, { resourceId: id, resourceType: 'device', type: 'info', priority: 'low', category: 'update', message: 'm', ...entry }, { actor: 'system:test', correlationId: 'c', now: at(seconds) });
  for (let i = 0; i < 5; i++) await write({ message: `info ${i}` }, i);
  await write({ type: 'debug', category: 'system', priority: 'medium', message: 'translator failed', expiresAt: new Date(Date.now() + 3600_000).toISOString() }, 10);
  await write({ type: 'error', priority: 'severe', category: 'command', message: 'expired', expiresAt: new Date(Date.now() + 300).toISOString() }, 11);
  await write({ type: 'warning', priority: 'high', category: 'access', message: 'old warning' }, 12);
  await new Promise((r) => setTimeout(r, 400));
  const q = async (query: string) => {
    const res = await t.call('GET', `/api/logs?resourceId=${id}&${query}`);
    assert.is(res.status, 200, `${query}: ${res.text}`);
    return res.body;
  };
  await eventually(async () => (await q('')).logs.length >= 7);

  assert.equal((await q('type=Debug&category=System')).logs.map((l: { message: string }) => l.message), ['translator failed']);
  assert.equal((await q('priority=high')).logs.map((l: { message: string }) => l.message), ['old warning']);
  assert.equal((await q('type=error')).logs, [], 'an expired entry is not shown');
  assert.equal((await q(`resourceType=device&from=${encodeURIComponent(at(1))}&to=${encodeURIComponent(at(3))}`)).logs.map((l: { message: string }) => l.message), ['info 2', 'info 1']);
  assert.equal((await q('resourceType=channel')).logs, []);

  const seen: string[] = [];
  let cursor: string | null = '';
  while (cursor !== null) {
    const page: { logs: { message: string }[]; nextCursor: string | null } = await q(`type=info&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    seen.push(...page.logs.map((l) => l.message));
    cursor = page.nextCursor;
  }
  assert.equal(seen, ['info 4', 'info 3', 'info 2', 'info 1', 'info 0']);
  assert.is((await t.call('GET', `/api/logs?cursor=garbage`)).status, 400, 'a cursor this API did not issue');

  const other = await givenUser(t, 'nosy');
  assert.equal((await t.call('GET', `/api/logs?resourceId=${id}`, { token: other.token })).body.logs, []);

  assert.ok((await purgeExpiredLogs(t.platform.deps.db)) >= 1);
  const rows = await t.platform.deps.db.selectFrom('device_logs').select('message').where('resource_id', '=', id).execute();
  assert.not.ok(rows.some((r) => r.message === 'expired'));
});

async function eventually<T>(check: () => Promise<T | false | undefined>, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

history.run();
