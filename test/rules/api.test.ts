import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { receiver } from '../support/receiver.js';
import { assertNothingWritten } from '../security/given.js';
import { button, deviceNow, edge, givenDevice, givenRule, logAction, logged, onDevice, ruleLog, setField, when, type Node } from './given.js';

const api = suite<{ t: TestPlatform; boiler: Record<string, any>; valve: Record<string, any> }>('rules v2 over REST');

api.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.boiler = await givenDevice(ctx.t, 'boiler', { temperature: 20 });
  ctx.valve = await givenDevice(ctx.t, 'valve');
});
api.after(async ({ t }) => t.stop());

const post = (t: TestPlatform, nodes: unknown[], edges: unknown[] = [], name = 'r') => t.call('POST', '/api/rules-v2', { body: { name, definition: { nodes, edges } } });

api('when a rule is created, then it reads back with its owner, is listed, counted, replaced and deleted', async ({ t, valve }) => {
  const created = await givenRule(t, 'valve.open', [button(), setField('open', valve._id, 'open', true)], [edge('press', 'open')]);
  assert.is(created.name, 'valve.open');
  assert.is(created.owner, (await t.call('GET', '/api/users?username=admin')).body[0].id);
  assert.equal((await t.call('GET', `/api/rules-v2/${created._id}`)).body, created);
  const list = await t.call('GET', '/api/rules-v2?options=count');
  assert.is(list.headers.get('x-total-count'), String(list.body.length));
  assert.ok(list.body.some((r: any) => r._id === created._id));
  const replaced = await t.call('PUT', `/api/rules-v2/${created._id}`, { body: { name: 'valve.close', definition: { nodes: [button(), setField('close', valve._id, 'open', false)], edges: [edge('press', 'close')] } } });
  assert.is(replaced.status, 200, replaced.text);
  assert.is(replaced.body.name, 'valve.close');
  assert.ok(replaced.body.revision > created.revision);
  assert.is((await t.call('DELETE', `/api/rules-v2/${created._id}`)).status, 204);
  assert.is((await t.call('GET', `/api/rules-v2/${created._id}`)).status, 404);
});

api('when a definition is bad, then 422 names the problem and nothing is stored', async ({ t, boiler, valve }) => {
  const cases: [unknown[], unknown[], RegExp][] = [
    [[button(), logAction('a', 'x')], [edge('press', 'a'), edge('a', 'press')], /^ERR - definition\.edges\.1\.from 'a' is an action/],
    [[button(), when('c1', boiler._id, 'temperature', 'gt', 1), when('c2', boiler._id, 'temperature', 'lt', 9), logAction('a', 'x')], [edge('press', 'c1'), edge('c1', 'c2'), edge('c2', 'c1'), edge('c2', 'a')], /^ERR - definition\.edges form a cycle: c1 → c2 → c1/],
    [[button(), logAction('a', 'x')], [edge('press', 'gone')], /^ERR - definition\.edges\.0\.to 'gone' names no node of the rule/],
    [[button(), logAction('a', 'x')], [], /^ERR - definition\.nodes\.1 \('a'\) is not reached from any trigger/],
    [[button(), when('c', boiler._id, 'temperature', 'gt', 1)], [edge('press', 'c')], /^ERR - definition\.nodes\.1 \('c'\) is a condition that leads nowhere/],
    [[{ id: 'x', type: 'filter', config: {} }], [], /^ERR - definition\.nodes\.0\.type must be equal to one of the allowed values/],
    [[{ id: 'x', type: 'trigger', config: { resourceType: 'webhook' } }], [], /^ERR - definition\.nodes\.0\.config\.resourceType must be one of button, device, schedule, geofence/],
    [[{ id: 'x', type: 'action', config: { action: 'email' } }], [], /^ERR - definition\.nodes\.0\.config\.action must be one of command, setField, channel, log/],
    [[{ id: 's', type: 'trigger', config: { resourceType: 'schedule', cron: '61 * * * *' } }], [], /^ERR - definition\.nodes\.0\.config\.cron is not a 5-field cron expression .*minute/],
    [[{ id: 's', type: 'trigger', config: { resourceType: 'schedule', cron: '0 0 * * * *' } }], [], /^ERR - definition\.nodes\.0\.config\.cron is not a 5-field cron expression/],
    [[{ id: 's', type: 'trigger', config: { resourceType: 'schedule', cron: '0 0 31 2 *' } }], [], /^ERR - definition\.nodes\.0\.config\.cron never fires/],
    [[{ id: 's', type: 'trigger', config: { resourceType: 'schedule', cron: '0 9 * * *', timezone: 'Mars/Olympus' } }], [], /^ERR - definition\.nodes\.0\.config\.timezone 'Mars\/Olympus' is not an IANA time zone/],
    [[button(), button()], [], /^ERR - definition\.nodes\.1\.id 'press' is the id of an earlier node/],
    [[button(), when('c', boiler._id, 'temperature', 'gt', 'hot'), logAction('a', 'x')], [edge('press', 'c'), edge('c', 'a')], /^ERR - definition\.nodes\.1\.config\.value must be a number with the gt operator/],
    [[button(), { id: 'c', type: 'condition', config: { deviceId: boiler._id, field: 't', operator: 'near' } }], [], /^ERR - definition\.nodes\.1\.config\.operator must be one of gt, gte, eq, lte, lt, changed/],
    [[button(), setField('a', valve._id, 'secret', 'x')], [edge('press', 'a')], /^ERR - definition\.nodes\.1\.config\.field secret names or identifies the device/],
    [[button(), setField('a', valve._id, 'lnglat', { type: 'Point', coordinates: [500, 0] })], [edge('press', 'a')], /^ERR - definition\.nodes\.1\.config\.value must be a GeoJSON Point/],
    [[button(), { id: 'a', type: 'action', config: { action: 'command', iotnodeId: valve._id, command: 'reboot', integrationName: 'ChirpStack' } }], [edge('press', 'a')], /^ERR - definition\.nodes\.1\.config\.command is not a command of the ChirpStack integration/],
    [[button(), setField('a', 'ffffffffffffffffffffffff', 'x', 1)], [edge('press', 'a')], /^ERR - definition\.nodes\.1\.config\.iotnodeId names no iotnode you can read/],
    [[onDevice('d', boiler._id, []), logAction('a', 'x')], [edge('d', 'a')], /^ERR - definition\.nodes\.0\.config\.fields must have at least 1 item/],
  ];
  for (const [nodes, edges, expected] of cases) {
    const res = await post(t, nodes, edges);
    assert.is(res.status, 422, `${JSON.stringify(nodes)} → ${res.status} ${res.text}`);
    assert.match(res.text, expected);
    await assertNothingWritten(t, res);
  }
});

api('when a definition is past its caps, then 422 names the cap', async ({ t }) => {
  const many = Array.from({ length: 101 }, (_, i): Node => (i === 0 ? button() : logAction(`a${i}`, 'x')));
  const nodes = await post(t, many, many.slice(1).map((n) => edge('press', n.id)));
  assert.is(nodes.status, 422);
  assert.match(nodes.text, /^ERR - definition\.nodes must NOT have more than 100 items/);
  const big = [button(), ...Array.from({ length: 40 }, (_, i) => logAction(`a${i}`, 'x'.repeat(1990)))];
  const bytes = await post(t, big, big.slice(1).map((n) => edge('press', n.id)));
  assert.is(bytes.status, 422);
  assert.match(bytes.text, /^ERR - definition is \d+ bytes of JSON; at most 65536 are allowed/);
  await assertNothingWritten(t, bytes);
});

api('when execute names a node that is not a button trigger, then 422; a missing rule is 404', async ({ t, boiler }) => {
  const rule = await givenRule(t, 'r', [button(), onDevice('dev', boiler._id), logAction('a', 'x')], [edge('press', 'a'), edge('dev', 'a')]);
  for (const [node, expected] of [['dev', /'dev' is not a button trigger \(its type is a device trigger\)/], ['a', /'a' is not a button trigger \(its type is action\)/], ['nope', /'nope' names no node of rule/]] as const) {
    const res = await t.call('POST', `/api/rules-v2/${rule._id}/execute`, { body: { triggerNodeId: node } });
    assert.is(res.status, 422, res.text);
    assert.match(res.text, expected);
    await assertNothingWritten(t, res);
  }
  assert.is((await t.call('POST', '/api/rules-v2/ffffffffffffffffffffffff/execute', { body: { triggerNodeId: 'press' } })).status, 404);
});

api('when a button is executed, then the run and its action outcomes are in the rule log, and the action is done once', async ({ t, valve }) => {
  const rule = await givenRule(t, `${valve.name}.open`, [button(), setField('open', valve._id, 'open', true), logAction('note', 'valve opened', { type: 'warning', priority: 'medium' })], [edge('press', 'open'), edge('press', 'note')]);
  const res = await t.call('POST', `/api/rules-v2/${rule._id}/execute`, { body: { triggerNodeId: 'press' } });
  assert.is(res.status, 202, res.text);
  assert.equal(res.body.actions, ['open', 'note']);
  assert.is(res.body.status, 'started');
  await eventually(async () => (await deviceNow(t, valve._id)).open === true, 10_000, 'the field set');
  const note = await logged(t, rule._id, /^valve opened$/);
  assert.equal([note.type, note.priority, note.category, note.resourceType], ['warning', 'medium', 'rule', 'ruleV2']);
  await logged(t, rule._id, /action 'open' \(setField\): open of iotnode \w+ set to true/);
  const log = await ruleLog(t, rule._id);
  assert.match(log[0]!.message, new RegExp(`^Run ${res.body.runId}: button 'press' pressed by user`));
  const history = await t.platform.deps.store.readStream(`device-${valve._id}`);
  const updates = history.filter((e) => e.type === 'DeviceUpdated');
  assert.is(updates.length, 1);
  assert.is(updates[0]!.metadata.actor, `rule:${rule._id}`);
  assert.is(updates[0]!.metadata.causationId, res.body.runId);
});

api('when a button runs a channel action over http, then the message names the rule and run, and carries its id as the idempotency key', async ({ t, valve }) => {
  const r = await receiver();
  try {
    const channel = await t.call('POST', '/api/channels', { body: { iotnode: valve._id, http: { url: r.url, headers: { 'X-Site': 'plant 2' } } } });
    assert.is(channel.status, 201, channel.text);
    const rule = await givenRule(t, `${valve.name}.notify`, [button(), { id: 'tell', type: 'action', config: { action: 'channel', channelId: channel.body._id, message: 'valve checked' } }], [edge('press', 'tell')]);
    const res = await t.call('POST', `/api/rules-v2/${rule._id}/execute`, { body: { triggerNodeId: 'press' } });
    assert.is(res.status, 202, res.text);
    const got = await eventually(async () => r.received.find((x) => x.body.runId === res.body.runId), 10_000, 'the channel message');
    assert.equal([got.body.rule._id, got.body.nodeId, got.body.message], [rule._id, 'tell', 'valve checked']);
    assert.is(got.headers['x-site'], 'plant 2');
    assert.type(got.body.id, 'string');
    assert.is(got.headers['idempotency-key'], got.body.id);
    await logged(t, rule._id, /action 'tell' \(channel\): message posted to http:\/\/127\.0\.0\.1/);
  } finally {
    await r.close();
  }
});

api('when a device report matches a device trigger, then conditions decide; a failing condition leaves no run', async ({ t, boiler, valve }) => {
  const rule = await givenRule(
    t,
    'too hot',
    [onDevice('report', boiler._id, ['temperature']), when('hot', boiler._id, 'temperature', 'gt', 80), when('moved', boiler._id, 'temperature', 'changed'), setField('alarm', valve._id, 'alarm', 'hot')],
    [edge('report', 'hot'), edge('hot', 'moved'), edge('moved', 'alarm')],
  );
  await t.call('PUT', `/api/iotnodes/${boiler._id}`, { body: { temperature: 50 } });
  await t.call('PUT', `/api/iotnodes/${boiler._id}`, { body: { humidity: 99 } });
  await t.call('PUT', `/api/iotnodes/${boiler._id}`, { body: { temperature: 90 } });
  await eventually(async () => (await deviceNow(t, valve._id)).alarm === 'hot', 10_000, 'the alarm');
  const runs = (await ruleLog(t, rule._id)).filter((l) => /^Run /.test(l.message) && l.data?.trigger);
  assert.is(runs.length, 1, JSON.stringify(runs));
  assert.equal(runs[0]!.data!.conditions.map((c: any) => [c.nodeId, c.actual, c.passed]), [['hot', 90, true], ['moved', 90, true]]);
});

api.run();
