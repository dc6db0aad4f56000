/**
 * GET /api/audit/events: the event log as written, filtered, paged in global
 * order by signed cursors, exported as NDJSON, and shown to each caller only
 * as far as they may see it.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readMatching } from '../../domain/eventstore/filter.js';
import type { EventFilter, EventStore } from '../../domain/eventstore/port.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';

interface Ctx {
  t: TestPlatform;
  ann: GivenUser;
  /** A device ann holds `admin` on, one she only reads, and one she has no right on. */
  hers: string;
  readOnly: string;
  foreign: string;
  /** The request that renamed `hers`, and its id. */
  renameRequest: string;
  before: string;
}

const audit = suite<Ctx>('audit log');

const device = async (t: TestPlatform, name: string) => {
  const res = await t.call('POST', '/api/iotnodes', { body: { name } });
  assert.is(res.status, 201, res.text);
  return res.body._id as string;
};

audit.before(setup);
async function setup(ctx: Ctx) {
  const t = (ctx.t = await startTestPlatform());
  ctx.ann = await givenUser(t, 'ann');
  ctx.before = new Date().toISOString();
  ctx.hers = await device(t, 'ann\'s sensor');
  ctx.readOnly = await device(t, 'shared sensor');
  ctx.foreign = await device(t, 'someone else\'s sensor');
  const grant = async (resourceId: string, scope: string[]) => {
    const res = await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId, subjectType: 'singleton', subjectId: ctx.ann.id, scope } });
    assert.is(res.status, 201, res.text);
  };
  await grant(ctx.hers, ['admin', 'read']);
  await grant(ctx.readOnly, ['read']);
  const renamed = await t.call('PUT', `/api/iotnodes/${ctx.hers}`, { body: { name: 'ann\'s renamed sensor', category: 'climate' } });
  assert.is(renamed.status, 200, renamed.text);
  ctx.renameRequest = renamed.headers.get('x-request-id')!;
  const report = await t.call('POST', `/api/iotnodes/${ctx.hers}/uplinks`, { body: { encodedData: { hexEncoded: '15', port: 1 }, temperature: 21 } });
  assert.ok(report.status < 300, report.text);
}
audit.after(async ({ t }) => t.stop());

/** Every page of a query, following `nextCursor`. */
async function allPages(t: TestPlatform, query: string, token?: string): Promise<{ pages: number; events: any[] }> {
  const events: any[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const res = await t.call('GET', `/api/audit/events?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { token });
    assert.is(res.status, 200, res.text);
    pages++;
    events.push(...res.body.events);
    cursor = res.body.nextCursor;
    if (cursor === undefined) assert.not.ok('nextCursor' in res.body, 'the last page has no nextCursor');
  } while (cursor);
  return { pages, events };
}

const byPosition = (a: string, b: string) => {
  const [ac, ap] = a.split('/').map(BigInt);
  const [bc, bp] = b.split('/').map(BigInt);
  return ac! < bc! ? -1 : ac! > bc! ? 1 : ap! < bp! ? -1 : ap! > bp! ? 1 : 0;
};

audit('when an admin reads the log, then every event comes in global order, in the contract\'s shape, and paging by cursor gives the same events as one page', async ({ t }) => {
  const whole = await t.call('GET', '/api/audit/events?limit=1000');
  assert.is(whole.status, 200, whole.text);
  assert.not.ok('nextCursor' in whole.body);
  const events = whole.body.events as any[];
  assert.ok(events.length > 10, `${events.length} events`);
  for (const e of events) {
    assert.equal(Object.keys(e).sort(), ['actor', 'causationId', 'correlationId', 'data', 'id', 'position', 'revision', 'schemaVersion', 'streamId', 'time', 'type'].sort());
    assert.match(e.position, /^\d+\/\d+$/);
    assert.ok(Number.isInteger(e.schemaVersion) && e.schemaVersion >= 1);
    assert.ok(!Number.isNaN(Date.parse(e.time)));
  }
  const positions = events.map((e) => e.position);
  assert.equal(positions, [...positions].sort(byPosition), 'global order');
  assert.is(new Set(positions).size, positions.length);

  const paged = await allPages(t, 'limit=3');
  assert.ok(paged.pages > 3);
  assert.equal(paged.events, events);
});

audit('when filtered by resource, stream, actor, correlation id, type and time, then exactly the matching events come back', async (ctx) => {
  const { t, hers, ann } = ctx;
  const all = (await t.call('GET', '/api/audit/events?limit=1000')).body.events as any[];

  const ofResource = (await allPages(t, `resourceId=${hers}`)).events;
  assert.equal(
    [...new Set(ofResource.map((e) => e.streamId))].sort(),
    [`access-${hers}`, `device-${hers}`, `logs-${hers}`].filter((s) => all.some((e) => e.streamId === s)).sort(),
    'the device\'s own stream, its access rights and its log entries',
  );
  assert.equal(ofResource.map((e) => e.type).filter((x) => x.startsWith('Device')), ['DeviceRegistered', 'DeviceUpdated', 'DeviceReported']);
  assert.ok(ofResource.some((e) => e.type === 'AccessGranted' && e.data.subjectId === ann.id));

  const typed = (await allPages(t, `resourceId=${hers}&resourceType=device&type=DeviceUpdated,DeviceReported`)).events;
  assert.equal(typed.map((e) => e.type), ['DeviceUpdated', 'DeviceReported']);
  assert.equal((await allPages(t, `resourceId=${hers}&resourceType=dashboard`)).events, [], 'a resource type it is not');

  const stream = (await allPages(t, `streamId=device-${hers}`)).events;
  assert.equal(stream, all.filter((e) => e.streamId === `device-${hers}`));

  const request = (await allPages(t, `correlationId=${ctx.renameRequest}`)).events;
  assert.equal(request.map((e) => [e.type, e.streamId]), [['DeviceUpdated', `device-${hers}`]]);
  assert.equal(request[0].data.set, { name: 'ann\'s renamed sensor', category: 'climate' });

  const annsOwn = (await allPages(t, `actor=${ann.id}`)).events;
  assert.equal(annsOwn, all.filter((e) => e.actor === ann.id));
  const adminId = all.find((e) => e.type === 'DeviceRegistered').actor;
  assert.equal((await allPages(t, `actor=${adminId}&type=DeviceRegistered`)).events.length, 3);

  const late = (await allPages(t, `from=${encodeURIComponent(ctx.before)}`)).events;
  assert.equal(late, all.filter((e) => e.time >= ctx.before));
  assert.ok(late.length > 0 && late.length < all.length);
  const early = (await allPages(t, `to=${encodeURIComponent(ctx.before)}`)).events;
  assert.equal([...early, ...late], all, 'from and to split the log at the same instant');
});

audit('when the log is exported as NDJSON, then it streams every matching event, one a line, in the same shape', async ({ t, hers }) => {
  const json = (await t.call('GET', '/api/audit/events?limit=1000')).body.events;
  const res = await t.call('GET', '/api/audit/events?limit=1', { headers: { accept: 'application/x-ndjson' } });
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type')!, /^application\/x-ndjson/);
  const lines = res.text.split('\n');
  assert.is(lines.pop(), '', 'every line ends with a newline');
  assert.equal(lines.map((l) => JSON.parse(l)), json, '`limit` does not cut an export');

  const filtered = await t.call('GET', `/api/audit/events?resourceId=${hers}&type=DeviceUpdated`, { headers: { accept: 'application/x-ndjson' } });
  assert.equal(filtered.text.trim().split('\n').map((l) => JSON.parse(l).type), ['DeviceUpdated']);

  const first = (await t.call('GET', '/api/audit/events?limit=5')).body;
  const rest = await t.call('GET', `/api/audit/events?cursor=${encodeURIComponent(first.nextCursor)}`, { headers: { accept: 'application/x-ndjson' } });
  assert.equal(rest.text.trim().split('\n').map((l) => JSON.parse(l)), json.slice(5), 'an export continues after a cursor');
});

audit('when someone who is not an admin reads the log, then they see one resource at a time, one they hold admin scope on', async (ctx) => {
  const { t, ann, hers, readOnly, foreign } = ctx;
  const token = ann.token;
  const tooBroad = await t.call('GET', '/api/audit/events', { token });
  assert.is(tooBroad.status, 403);
  assert.match(tooBroad.text, /^ERR - resourceId or streamId is required/);
  for (const query of ['resourceType=device', `actor=${ann.id}`, 'type=DeviceRegistered']) {
    assert.is((await t.call('GET', `/api/audit/events?${query}`, { token })).status, 403, query);
  }

  const mine = (await allPages(t, `resourceId=${hers}`, token)).events;
  const asAdmin = (await allPages(t, `resourceId=${hers}`)).events;
  assert.equal(mine, asAdmin, 'the same events an admin sees of that resource');
  assert.equal((await allPages(t, `streamId=device-${hers}`, token)).events, asAdmin.filter((e) => e.streamId === `device-${hers}`));
  assert.equal((await allPages(t, `resourceId=${hers}&streamId=device-${readOnly}`, token)).events, [], 'a stream of another resource adds nothing');

  assert.is((await t.call('GET', `/api/audit/events?resourceId=${readOnly}`, { token })).status, 403, 'read without admin scope');
  assert.is((await t.call('GET', `/api/audit/events?streamId=device-${readOnly}`, { token })).status, 403);
  assert.is((await t.call('GET', `/api/audit/events?resourceId=${foreign}`, { token })).status, 404, 'a resource they cannot read is as missing as one that does not exist');
  assert.is((await t.call('GET', `/api/audit/events?streamId=device-${foreign}`, { token })).status, 404);
  assert.is((await t.call('GET', '/api/audit/events?streamId=device-000000000000000000000000', { token })).status, 404);
});

audit('when a cursor is altered, a time is not a time or a limit is out of range, then the answer is a clear 4xx', async ({ t }) => {
  const first = (await t.call('GET', '/api/audit/events?limit=2')).body;
  const [body, tag] = (first.nextCursor as string).split('.');
  const forged = Buffer.from(JSON.stringify({ c: '0', p: '0' })).toString('base64url');
  for (const cursor of [`${forged}.${tag}`, `${body}.${tag!.slice(0, -2)}AA`, 'nonsense', `${body}`]) {
    const res = await t.call('GET', `/api/audit/events?cursor=${encodeURIComponent(cursor)}`);
    assert.is(res.status, 400, cursor);
    assert.match(res.text, /^ERR - cursor is not a cursor this API returned/);
  }
  for (const [query, field] of [['from=yesterday', 'from'], ['to=2026-02-30T00:00:00Z', 'to'], ['limit=0', 'limit'], ['limit=1001', 'limit'], ['type=not%20a%20type', 'type.0']] as const) {
    const res = await t.call('GET', `/api/audit/events?${query}`);
    assert.is(res.status, 422, `${query}: ${res.text}`);
    assert.match(res.text, new RegExp(`^ERR - ${field.replace('.', '\\.')} `));
  }
});

audit('given a store without filtered reads (EventStoreDB), when the same filters are read by scanning, then the same events come back', async ({ t, hers, ann, renameRequest }) => {
  const store = t.platform.deps.store;
  const { readFiltered: _indexed, ...rest } = store;
  const scanning = rest as EventStore;
  assert.is(scanning.readFiltered, undefined);
  const filters: EventFilter[] = [
    {},
    { streamIds: [`device-${hers}`, `access-${hers}`] },
    { types: ['DeviceRegistered', 'AccessGranted'] },
    { actor: ann.id },
    { correlationId: renameRequest },
    { from: '2000-01-01T00:00:00.000Z', to: new Date().toISOString(), types: ['DeviceUpdated'] },
    { streamIds: [] },
  ];
  for (const filter of filters) {
    for (const limit of [1, 4, 1000]) {
      const indexed = await readMatching(store, filter, { limit });
      const scanned = await readMatching(scanning, filter, { limit });
      assert.equal(scanned.map((e) => e.id), indexed.map((e) => e.id), `${JSON.stringify(filter)} limit ${limit}`);
    }
  }
});

audit.run();
