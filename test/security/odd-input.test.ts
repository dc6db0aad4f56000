import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { gzipSync } from 'node:zlib';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { assertNothingWritten } from './given.js';

/**
 * Odd input at the REST edge: text PostgreSQL cannot store, nesting that
 * would overflow a recursive walk, numbers past what a query can use,
 * tampered cursors and bodies that do not decode. Each gets a clear 4xx and
 * writes nothing; none is a 500.
 */
const odd = suite<{ t: TestPlatform; device: string }>('Odd input never gets a 500');

odd.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const res = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'probe target' } });
  assert.is(res.status, 201, res.text);
  ctx.device = res.body._id;
});
odd.after(async (ctx) => {
  await ctx.t.stop();
});

const nested = (levels: number) => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);

odd('when dashboard and device bodies carry NUL or a lone surrogate, then 422 names the field and nothing is stored', async ({ t, device }) => {
  const cases: [string, string, string, RegExp][] = [
    ['POST', '/api/dashboards', '{"name":"a\\u0000b"}', /^ERR - name must not contain NUL characters$/],
    ['POST', '/api/dashboards', '{"name":"ok","title":"\\ud800"}', /^ERR - title must not contain lone UTF-16 surrogates$/],
    ['POST', '/api/iotnodes', '{"name":"n","note":"x\\u0000"}', /^ERR - note must not contain NUL/],
    ['PUT', `/api/iotnodes/${device}`, '{"deep":{"er":"\\udc00"}}', /^ERR - deep\.er must not contain lone/],
    ['PUT', `/api/iotnodes/${device}`, '{"a\\u0000b":1}', /^ERR - a\\u0000b is a field name that must not contain NUL/],
    ['POST', '/api/iotnodes', `{"name":"deep","x":${nested(10_000)}}`, /^ERR - x(\.a)+ is nested deeper than 32 levels$/],
    ['PUT', `/api/iotnodes/${device}`, '{"big":1e309}', /^ERR - big must be a finite number$/],
  ];
  for (const [method, path, raw, message] of cases) {
    const res = await t.call(method, path, { raw });
    assert.is(res.status, 422, `${method} ${path} ${raw.slice(0, 60)}: ${res.status} ${res.text}`);
    assert.match(res.text, message);
    await assertNothingWritten(t, res);
  }
  const read = await t.call('GET', `/api/iotnodes/${device}`);
  assert.is(read.body.deep, undefined);
});

odd('when numeric query parameters are out of range, then 422 naming the parameter', async ({ t, device }) => {
  for (const path of ['/api/iotnodes?offset=1e309', '/api/geofences?offset=1e309', '/api/iotnodes?offset=99999999999', `/api/iotnodes/${device}/stats?measurement=t&end=1e20`, `/api/iotnodes/${device}/stats?measurement=t&start=-1e20`, `/api/iotnodes/${device}/stats?measurement=t&distance=1e12`]) {
    const res = await t.call('GET', path);
    assert.is(res.status, 422, `${path}: ${res.status} ${res.text}`);
    assert.match(res.text, /^ERR - (offset|end|start|distance) /);
  }
});

odd('when a query or path carries NUL or bad percent-encoding, then 4xx, not 500', async ({ t, device }) => {
  const stats = await t.call('GET', `/api/iotnodes/${device}/stats?measurement=a'b%00`);
  assert.is(stats.status, 422, stats.text);
  assert.match(stats.text, /^ERR - measurement must not contain NUL/);
  const logs = await t.call('GET', '/api/logs?message=%25%00');
  assert.is(logs.status, 422, logs.text);
  assert.match(logs.text, /^ERR - message must not contain NUL/);
  const path = await t.call('GET', '/api/roles/a%00b');
  assert.is(path.status, 422, path.text);
  const badEscape = await t.call('GET', '/api/roles/%ff');
  assert.is(badEscape.status, 400, badEscape.text);
});

odd('when a date-time names no real instant, or one outside the years 0001 to 9999 in UTC, then 422 naming the parameter; a real one in them, even at their ends, is read', async ({ t }) => {
  for (const from of ['0000-00-00T00:00:00Z', '2023-02-29T00:00:00Z', '2024-01-01T24:00:00Z', '2024-01-01T00:00:00+99:99', '9999-12-31T23:59:60Z', '0000-01-01T00:00:00Z', '9999-12-31T23:59:59-01:00', '0001-01-01T00:30:00+01:00']) {
    const res = await t.call('GET', `/api/logs?from=${encodeURIComponent(from)}`);
    assert.is(res.status, 422, `${from}: ${res.status} ${res.text}`);
    assert.is(res.text, 'ERR - from must match format "date-time"');
  }
  for (const from of ['0001-01-01T00:00:00Z', '2024-02-29T23:59:59.999999+14:00', '9999-12-31t23:59:59z', '9999-12-31T23:59:59+01:00']) {
    const res = await t.call('GET', `/api/logs?from=${encodeURIComponent(from)}&to=${encodeURIComponent(from)}`);
    assert.is(res.status, 200, `${from}: ${res.status} ${res.text}`);
  }
});

odd('when a logs cursor is tampered with, then 400; an issued cursor still pages', async ({ t }) => {
  // Log entries to page through: refused MQTT logins are logged on their credentials set.
  const set = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'cursor-set', password: 'cursor-pass' } });
  const { default: mqtt } = await import('mqtt');
  for (let i = 0; i < 3; i++) {
    await mqtt.connectAsync(`mqtt://127.0.0.1:${t.mqttPort}`, { username: 'cursor-set', password: 'wrong', reconnectPeriod: 0 }).then((c) => c.endAsync(), () => undefined);
  }
  const first = await (async () => {
    for (let i = 0; i < 200; i++) {
      const page = await t.call('GET', `/api/logs?resourceId=${set.body._id}&limit=1`);
      if (page.body.nextCursor) return page.body;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('no second page of log entries appeared');
  })();
  const next = await t.call('GET', `/api/logs?resourceId=${set.body._id}&limit=1&cursor=${first.nextCursor}`);
  assert.is(next.status, 200, next.text);
  assert.is(next.body.logs.length, 1);
  const [body, tag] = String(first.nextCursor).split('.');
  const forged = Buffer.from(JSON.stringify({ time: '2020-01-01T00:00:00Z', id: "x'; DROP TABLE device_logs; --" })).toString('base64url');
  for (const cursor of [`${forged}.${tag}`, `${body}.AAAA`, 'garbage', `${body}`, `${forged}`]) {
    const res = await t.call('GET', `/api/logs?cursor=${encodeURIComponent(cursor)}`);
    assert.is(res.status, 400, `${cursor}: ${res.status} ${res.text}`);
    assert.match(res.text, /^ERR - cursor /);
  }
});

odd('when a body says gzip but is not, then 400; an unknown encoding is 415; real gzip is read', async ({ t }) => {
  const headers = (encoding: string) => ({ 'content-type': 'application/json', 'content-encoding': encoding });
  const bad = await t.call('POST', '/api/dashboards', { raw: '{"name":"plain"}', headers: headers('gzip') });
  assert.is(bad.status, 400, bad.text);
  await assertNothingWritten(t, bad);
  const unknown = await t.call('POST', '/api/dashboards', { raw: '{"name":"plain"}', headers: headers('compress') });
  assert.is(unknown.status, 415, unknown.text);
  assert.match(unknown.text, /Content-Encoding compress is not supported/);
  const good = await t.call('POST', '/api/dashboards', { raw: gzipSync('{"name":"zipped"}'), headers: headers('gzip') });
  assert.is(good.status, 201, good.text);
  assert.is(good.body.name, 'zipped');
});

odd.run();
