import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { writeLog, type LogEntry } from '../../domain/logs/logEntry.js';
import { eventually } from './support.js';

const logs = suite<{ t: TestPlatform; device: string }>('Device logs filtered as the logs widget asks');

const ENTRIES: Pick<LogEntry, 'type' | 'priority' | 'message'>[] = [
  { type: 'error', priority: 'high', message: 'e-high' },
  { type: 'error', priority: 'severe', message: 'e-severe' },
  { type: 'warning', priority: 'medium', message: 'w-medium' },
  { type: 'info', priority: 'low', message: 'i-low' },
  { type: 'debug', priority: 'low', message: 'd-low' },
];

logs.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'Logged' } });
  ctx.device = device.body._id;
  const context = { actor: 'system:test', correlationId: `log:${ctx.device}`, now: new Date().toISOString() };
  for (const e of ENTRIES) await writeLog(t.platform.deps.store, { ...e, resourceId: ctx.device, resourceType: 'device', category: 'system' }, context);
  await eventually(async () => (await t.call('GET', `/api/logs?resourceId=${ctx.device}`)).body.logs.length === ENTRIES.length, 5000, 'the entries in the read model');
});
logs.after(async (ctx) => {
  await ctx.t.stop();
});

async function messages(t: TestPlatform, query: string): Promise<string[]> {
  const res = await t.call('GET', `/api/logs?${query}`);
  assert.is(res.status, 200, `${query}: ${res.text}`);
  return (res.body.logs as { message: string }[]).map((l) => l.message).sort();
}

logs('when one type or one priority is given, then only those entries are listed', async ({ t, device }) => {
  assert.equal(await messages(t, `resourceId=${device}&type=error`), ['e-high', 'e-severe']);
  assert.equal(await messages(t, `resourceId=${device}&type=Warning`), ['w-medium']);
  assert.equal(await messages(t, `resourceId=${device}&priority=low`), ['d-low', 'i-low']);
});

logs('when type is a list, repeated or comma-separated, then entries of any listed type are listed', async ({ t, device }) => {
  const expected = ['e-high', 'e-severe', 'w-medium'];
  assert.equal(await messages(t, `resourceId=${device}&type=error&type=warning`), expected);
  assert.equal(await messages(t, `resourceId=${device}&type=error,warning`), expected);
  assert.equal(await messages(t, `resourceId=${device}&type=Error,warning&type=info`), [...expected, 'i-low'].sort());
});

logs('when priority is a list, then entries of any listed priority are listed, and it combines with type', async ({ t, device }) => {
  assert.equal(await messages(t, `resourceId=${device}&priority=high&priority=severe`), ['e-high', 'e-severe']);
  assert.equal(await messages(t, `resourceId=${device}&priority=medium,low`), ['d-low', 'i-low', 'w-medium']);
  assert.equal(await messages(t, `resourceId=${device}&type=error&type=info&priority=severe,low`), ['e-severe', 'i-low']);
});

logs('when a listed value is unknown or a list is empty-ended, then 422 names the parameter', async ({ t, device }) => {
  for (const query of ['type=error,bogus', 'type=error&type=fatal', 'priority=high,', 'priority=urgent']) {
    const res = await t.call('GET', `/api/logs?resourceId=${device}&${query}`);
    assert.is(res.status, 422, `${query}: ${res.status} ${res.text}`);
    assert.match(res.text, new RegExp(`^ERR - ${query.startsWith('type') ? 'type' : 'priority'}`), res.text);
  }
});

logs.run();
