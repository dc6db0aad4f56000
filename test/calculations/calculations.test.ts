import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount } from '../users/given.js';
import { givenCalculation, givenCalculator, givenDevice, grant, lastValue, onChange, windowOf } from './given.js';

interface Ctx {
  t: TestPlatform;
  a: string;
  b: string;
  c: string;
}

const calcs = suite<Ctx>('calculations over REST');

calcs.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.a = await givenDevice(ctx.t, 'meter a');
  ctx.b = await givenDevice(ctx.t, 'meter b');
  ctx.c = await givenDevice(ctx.t, 'totals');
});
calcs.after(async (ctx) => {
  await ctx.t.stop();
});

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

calcs('when a lastValue calculation is created, then 201 with the definition as sent, running, without a result yet; GET returns the same', async ({ t, a, b, c }) => {
  const body = lastValue([[a, 'power'], [b, 'power']], [c, 'totalPower'], 'sum');
  const res = await t.call('POST', '/api/calculations', { body });
  assert.is(res.status, 201, res.text);
  const { _id, createdBy, createdAt, updatedAt, ...rest } = res.body;
  assert.match(_id, /^[0-9a-f]{24}$/);
  assert.match(createdAt, ISO);
  assert.is(updatedAt, createdAt);
  assert.type(createdBy, 'string');
  assert.equal(rest, { ...body, status: 'running', lastResult: null });
  const read = await t.call('GET', `/api/calculations/${_id}`);
  assert.is(read.status, 200, read.text);
  assert.equal(read.body, res.body);
  const events = await t.platform.deps.store.readStream(`calculation-${_id}`);
  assert.equal(events.map((e) => e.type), ['CalculationCreated']);
  assert.equal((events[0]!.data as { definition: unknown }).definition, body);
});

calcs('when a window calculation with an interval schedule is created, then it is stored as sent', async ({ t, a, c }) => {
  const body = windowOf([a, 'energy'], 3600, [c, 'energyLastHour'], 'difference', { type: 'interval', seconds: 900 });
  const created = await givenCalculation(t, body);
  assert.equal({ name: created.name, type: created.type, source: created.source, window: created.window, destination: created.destination, aggregation: created.aggregation, schedule: created.schedule }, body);
  assert.is(created.sources, undefined);
});

calcs('when a calculation of either type is written without a schedule, then it is stored, shown and replaced as onChange', async ({ t, a, b, c }) => {
  const { schedule: _, ...bare } = lastValue([[a, 'x'], [b, 'x']], [c, 'total']);
  const created = await t.call('POST', '/api/calculations', { body: bare });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body.schedule, { type: 'onChange' });
  const events = await t.platform.deps.store.readStream(`calculation-${created.body._id}`);
  assert.equal((events[0]!.data as { definition: { schedule: unknown } }).definition.schedule, { type: 'onChange' });
  const { schedule: __, ...window } = windowOf([a, 'x'], 60, [c, 'total'], 'max', { type: 'interval', seconds: 60 });
  const replaced = await t.call('PUT', `/api/calculations/${created.body._id}`, { body: window });
  assert.is(replaced.status, 200, replaced.text);
  assert.equal((await t.call('GET', `/api/calculations/${created.body._id}`)).body.schedule, { type: 'onChange' });
});

calcs('when a calculation reads one field of a device and writes another of the same device, then it is accepted', async ({ t, a }) => {
  await givenCalculation(t, windowOf([a, 'temperature'], 600, [a, 'temperatureMean10m']));
});

calcs('when a calculation is replaced with PUT, even by another type, then the new definition is stored and updatedAt moves', async ({ t, a, b, c }) => {
  const created = await givenCalculation(t, lastValue([[a, 'x']], [c, 'y']));
  const next = windowOf([b, 'x'], 60, [c, 'y'], 'max');
  const res = await t.call('PUT', `/api/calculations/${created._id}`, { body: next });
  assert.is(res.status, 200, res.text);
  assert.equal([res.body.type, res.body.source, res.body.window, res.body.aggregation, res.body.sources], ['window', next.source, next.window, 'max', undefined]);
  assert.is(res.body.createdAt, created.createdAt);
  assert.ok(res.body.updatedAt >= created.updatedAt);
  assert.equal((await t.call('GET', `/api/calculations/${created._id}`)).body, res.body);
  const events = await t.platform.deps.store.readStream(`calculation-${created._id}`);
  assert.equal(events.map((e) => e.type), ['CalculationCreated', 'CalculationReplaced']);
});

calcs('when a calculation is deleted, then 204; GET, PUT and a second DELETE are 404; it leaves the list and its rights go', async ({ t, a, c }) => {
  const created = await givenCalculation(t, lastValue([[a, 'x']], [c, 'gone']));
  assert.is((await t.call('DELETE', `/api/calculations/${created._id}`)).status, 204);
  assert.is((await t.call('GET', `/api/calculations/${created._id}`)).status, 404);
  assert.is((await t.call('PUT', `/api/calculations/${created._id}`, { body: lastValue([[a, 'x']], [c, 'gone']) })).status, 404);
  assert.is((await t.call('DELETE', `/api/calculations/${created._id}`)).status, 404);
  const list = await t.call('GET', '/api/calculations');
  assert.not.ok(list.body.some((x: { _id: string }) => x._id === created._id));
  const rights = await t.platform.deps.db.selectFrom('access_rights').select('resource_id').where('resource_id', '=', created._id).execute();
  assert.equal(rights, []);
  const events = await t.platform.deps.store.readStream(`calculation-${created._id}`);
  assert.equal(events.map((e) => e.type), ['CalculationCreated', 'CalculationDeleted']);
});

calcs('given a device, when its id is used as a calculation id, then 404 Calculation not found and nothing is written', async ({ t, a, c }) => {
  const before = await eventCount(t);
  const read = await t.call('GET', `/api/calculations/${a}`);
  assert.is(read.status, 404);
  assert.is(read.text, 'Calculation not found');
  assert.is((await t.call('PUT', `/api/calculations/${a}`, { body: lastValue([[c, 'x']], [c, 'y']) })).status, 404);
  assert.is((await t.call('DELETE', `/api/calculations/${a}`)).status, 404);
  assert.is(await eventCount(t), before);
  assert.is((await t.call('GET', `/api/iotnodes/${a}`)).status, 200, 'the device is untouched');
});

calcs('given calculations of two users, when each lists, then each sees its own, oldest first, paged, with a count', async ({ t }) => {
  const ann = await givenCalculator(t, 'ann');
  const ben = await givenCalculator(t, 'ben');
  const ad = await givenDevice(t, 'ann device', ann.token);
  const bd = await givenDevice(t, 'ben device', ben.token);
  const mine: string[] = [];
  for (let i = 0; i < 3; i++) mine.push((await givenCalculation(t, lastValue([[ad, `in${i}`]], [ad, `out${i}`]), ann.token))._id);
  const theirs = await givenCalculation(t, lastValue([[bd, 'in']], [bd, 'out']), ben.token);
  const list = await t.call('GET', '/api/calculations?options=count', { token: ann.token });
  assert.is(list.status, 200, list.text);
  assert.equal(list.body.map((x: { _id: string }) => x._id), mine);
  assert.is(list.headers.get('x-total-count'), '3');
  const page = await t.call('GET', '/api/calculations?limit=2&offset=1', { token: ann.token });
  assert.equal(page.body.map((x: { _id: string }) => x._id), mine.slice(1));
  assert.is((await t.call('GET', `/api/calculations/${theirs._id}`, { token: ann.token })).status, 404);
});

// ---- the owner's rights over the devices named ----

calcs('given a source device the caller cannot read, when a calculation reads it, then 403 naming it and nothing is written', async ({ t, a }) => {
  const cal = await givenCalculator(t, 'cal');
  const own = await givenDevice(t, 'cal device', cal.token);
  const before = await eventCount(t);
  const res = await t.call('POST', '/api/calculations', { token: cal.token, body: lastValue([[own, 'x'], [a, 'x']], [own, 'y']) });
  assert.is(res.status, 403, res.text);
  assert.match(res.text, new RegExp(`^Forbidden: sources\\.1\\.deviceId is iotnode ${a}, which you cannot read`));
  const window = await t.call('POST', '/api/calculations', { token: cal.token, body: windowOf([a, 'x'], 60, [own, 'y']) });
  assert.is(window.status, 403, window.text);
  assert.match(window.text, /source\.deviceId/);
  assert.is(await eventCount(t), before);
});

calcs('given a destination the caller may only read, when a calculation writes it, then 403 naming it and nothing is written', async ({ t, c }) => {
  const dan = await givenCalculator(t, 'dan');
  const own = await givenDevice(t, 'dan device', dan.token);
  await grant(t, 'device', c, dan.id, ['read']);
  const before = await eventCount(t);
  const res = await t.call('POST', '/api/calculations', { token: dan.token, body: lastValue([[own, 'x']], [c, 'y']) });
  assert.is(res.status, 403, res.text);
  assert.match(res.text, /^Forbidden: destination\.deviceId .*cannot write/);
  assert.is(await eventCount(t), before);
  const shared = await t.call('POST', '/api/calculations', { token: dan.token, body: lastValue([[c, 'x']], [own, 'y']) });
  assert.is(shared.status, 201, 'reading a device shared for reading is enough for a source');
});

// ---- bad input: each a 422 naming the problem, and nothing is written ----

const rejects = (name: string, body: (c: Ctx) => unknown, pattern: RegExp | ((c: Ctx) => RegExp)) =>
  calcs(`when ${name}, then 422 naming the problem and no event is written`, async (ctx) => {
    const before = await eventCount(ctx.t);
    const res = await ctx.t.call('POST', '/api/calculations', { body: body(ctx) });
    assert.is(res.status, 422, res.text);
    assert.match(res.text, /^ERR - /);
    assert.match(res.text, typeof pattern === 'function' ? pattern(ctx) : pattern);
    assert.is(await eventCount(ctx.t), before);
  });

rejects('the destination is one of the sources', ({ a, b }) => lastValue([[a, 'x'], [b, 'x']], [b, 'x']), /^ERR - destination is also the calculation's sources\.1: the calculation would feed itself$/);
rejects('a window writes its own source', ({ a }) => windowOf([a, 'x'], 60, [a, 'x']), /^ERR - destination is also the calculation's source: the calculation would feed itself$/);
rejects('the type is unknown', ({ a, c }) => ({ ...lastValue([[a, 'x']], [c, 'y']), type: 'average' }), /^ERR - type must be equal to one of the allowed values: lastValue, window$/);
rejects('the type is missing', ({ a, c }) => ({ ...lastValue([[a, 'x']], [c, 'y']), type: undefined }), /^ERR - type /);
rejects('the schedule type is unknown', ({ a, c }) => lastValue([[a, 'x']], [c, 'y'], 'sum', { type: 'cron' }), /^ERR - schedule\.type must be equal to one of the allowed values: onChange, interval$/);
rejects('an interval has no seconds', ({ a, c }) => lastValue([[a, 'x']], [c, 'y'], 'sum', { type: 'interval' }), /^ERR - schedule\.seconds is required when schedule\.type is interval$/);
rejects('an interval is shorter than 10 s', ({ a, c }) => lastValue([[a, 'x']], [c, 'y'], 'sum', { type: 'interval', seconds: 5 }), /^ERR - schedule\.seconds must be >= 10$/);
rejects('an interval is longer than 31 days', ({ a, c }) => lastValue([[a, 'x']], [c, 'y'], 'sum', { type: 'interval', seconds: 2678401 }), /^ERR - schedule\.seconds must be <= 2678400$/);
rejects('an interval is not a whole number', ({ a, c }) => lastValue([[a, 'x']], [c, 'y'], 'sum', { type: 'interval', seconds: 12.5 }), /^ERR - schedule\.seconds must be integer$/);
rejects('an onChange schedule has seconds', ({ a, c }) => lastValue([[a, 'x']], [c, 'y'], 'sum', { type: 'onChange', seconds: 60 }), /^ERR - schedule\.seconds is only for schedule\.type interval/);
rejects('a source device does not exist', ({ c }) => lastValue([[c, 'x'], ['aaaaaaaaaaaaaaaaaaaaaaaa', 'x']], [c, 'y']), /^ERR - sources\.1\.deviceId aaaaaaaaaaaaaaaaaaaaaaaa is not an iotnode$/);
rejects('the destination device does not exist', ({ a }) => windowOf([a, 'x'], 60, ['bbbbbbbbbbbbbbbbbbbbbbbb', 'y']), /^ERR - destination\.deviceId bbbbbbbbbbbbbbbbbbbbbbbb is not an iotnode$/);
rejects('a device id is malformed', ({ c }) => lastValue([['nope', 'x']], [c, 'y']), /^ERR - sources\.0\.deviceId must match pattern/);
rejects('a lastValue aggregation is a window one', ({ a, c }) => lastValue([[a, 'x']], [c, 'y'], 'first'), /^ERR - aggregation must be equal to one of the allowed values: sum, mean, min, max, count$/);
rejects('a window aggregation is unknown', ({ a, c }) => windowOf([a, 'x'], 60, [c, 'y'], 'median'), /^ERR - aggregation must be equal to one of the allowed values/);
rejects('a window has no window', ({ a, c }) => ({ ...windowOf([a, 'x'], 60, [c, 'y']), window: undefined }), /^ERR - window is required$/);
rejects('a window is 0 s long', ({ a, c }) => windowOf([a, 'x'], 0, [c, 'y']), /^ERR - window\.seconds must be >= 1$/);
rejects('a window is longer than 31 days', ({ a, c }) => windowOf([a, 'x'], 2678401, [c, 'y']), /^ERR - window\.seconds must be <= 2678400$/);
rejects('a source repeats', ({ a, b, c }) => lastValue([[a, 'x'], [b, 'x'], [a, 'x']], [c, 'y']), /^ERR - sources\.2 repeats sources\.0$/);
rejects('there are no sources', ({ c }) => lastValue([], [c, 'y']), /^ERR - sources must NOT have fewer than 1 items$/);
rejects('there are more than 100 sources', ({ a, c }) => lastValue(Array.from({ length: 101 }, (_, i) => [a, `f${i}`] as [string, string]), [c, 'y']), /^ERR - sources must NOT have more than 100 items$/);
rejects('the destination field is the device name', ({ a, c }) => lastValue([[a, 'x']], [c, 'name']), /^ERR - destination\.field name is kept by the platform or set through the REST API/);
rejects('the destination field is a dotted path', ({ a, c }) => lastValue([[a, 'x']], [c, 'y.z']), /^ERR - destination\.field must match pattern/);
rejects('a field is empty', ({ a, c }) => lastValue([[a, '']], [c, 'y']), /^ERR - sources\.0\.field must NOT have fewer than 1 characters$/);
rejects('the name is missing', ({ a, c }) => ({ ...lastValue([[a, 'x']], [c, 'y']), name: undefined }), /^ERR - name is required$/);
rejects('an unknown field is sent', ({ a, c }) => ({ ...lastValue([[a, 'x']], [c, 'y']), colour: 'red' }), /^ERR - colour is not allowed$/);
rejects('a lastValue carries a window', ({ a, c }) => ({ ...lastValue([[a, 'x']], [c, 'y']), window: { seconds: 60 } }), /^ERR - window is not allowed$/);

calcs('given a calculation a → b, when another would write a from b, then 422 naming the first, and nothing is written', async ({ t, a, b }) => {
  const first = await givenCalculation(t, lastValue([[a, 'loop']], [b, 'loop'], 'sum', onChange, 'forward'));
  const before = await eventCount(t);
  const res = await t.call('POST', '/api/calculations', { body: windowOf([b, 'loop'], 60, [a, 'loop'], 'mean', onChange, 'back') });
  assert.is(res.status, 422, res.text);
  assert.is(res.text, `ERR - destination feeds back into this calculation's sources through calculation ${first._id} (forward): calculations must not form a cycle`);
  assert.is(await eventCount(t), before);
});

calcs('given a chain a → b → c, when a third would close it from c to a, then 422 naming both on the way; an open chain is fine', async ({ t, a, b, c }) => {
  const one = await givenCalculation(t, lastValue([[a, 'ring']], [b, 'ring'], 'sum', onChange, 'one'));
  const two = await givenCalculation(t, windowOf([b, 'ring'], 60, [c, 'ring'], 'max', onChange, 'two'));
  const before = await eventCount(t);
  const res = await t.call('POST', '/api/calculations', { body: lastValue([[c, 'ring'], [b, 'other']], [a, 'ring'], 'sum', onChange, 'three') });
  assert.is(res.status, 422, res.text);
  assert.match(res.text, new RegExp(`through calculation ${one._id} \\(one\\) → ${two._id} \\(two\\): calculations must not form a cycle$`));
  assert.is(await eventCount(t), before);
  await givenCalculation(t, lastValue([[c, 'ring']], [a, 'notRing'], 'sum', onChange, 'three, open'));
});

calcs('given a chain, when a PUT would close a cycle, then 422 and the definition is unchanged', async ({ t, a, b }) => {
  const one = await givenCalculation(t, lastValue([[a, 'p']], [b, 'p'], 'sum', onChange, 'p one'));
  const two = await givenCalculation(t, lastValue([[b, 'p']], [a, 'q'], 'sum', onChange, 'p two'));
  const before = await eventCount(t);
  const res = await t.call('PUT', `/api/calculations/${two._id}`, { body: lastValue([[b, 'p']], [a, 'p'], 'sum', onChange, 'p two') });
  assert.is(res.status, 422, res.text);
  assert.match(res.text, new RegExp(`through calculation ${one._id} \\(p one\\)`));
  assert.is(await eventCount(t), before);
  assert.equal((await t.call('GET', `/api/calculations/${two._id}`)).body.destination, { deviceId: a, field: 'q' });
});

calcs('given concurrent creates that would close a cycle together, when both are sent at once, then one is refused', async ({ t, a, b }) => {
  const [x, y] = await Promise.all([
    t.call('POST', '/api/calculations', { body: lastValue([[a, 'race']], [b, 'race'], 'sum', onChange, 'race one') }),
    t.call('POST', '/api/calculations', { body: lastValue([[b, 'race']], [a, 'race'], 'sum', onChange, 'race two') }),
  ]);
  assert.equal([x.status, y.status].sort(), [201, 422], `${x.text} / ${y.text}`);
});

calcs.run();
