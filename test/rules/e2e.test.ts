import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { snapshotReadModels } from '../support/readmodels.js';
import { connectMqtt, deviceOf, eventually, givenProvider, projected, publish } from '../ingest/support.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';
import { rebuild } from '../../projections/rebuild.js';
import { rulesProjection } from '../../projections/rules.js';
import { logsProjection } from '../../projections/logs.js';
import { MAX_RUN_DEPTH } from '../../domain/rules/run.js';
import { button, deviceNow, edge, givenDevice, givenRule, logged, onDevice, ruleLog, setField, when } from './given.js';

const EUI = '70b3d57ed0052a42';
const TOKEN = 'chirpstack-rules-token';

const e2e = suite<{ t: TestPlatform; ns: ChirpStackStandIn }>('rules v2 end to end');

e2e.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
});
e2e.after(async ({ t, ns }) => {
  await t.stop();
  await ns.stop();
});

e2e('given a commandButtons widget tied to the rule <device-name>.<button-name>, when its button is executed, then the downlink reaches ChirpStack once', async ({ t, ns }) => {
  const connector = await t.call('POST', '/api/connectors', { body: { name: 'lora', integration: 'ChirpStack', chirpstack: { url: ns.url, apiToken: TOKEN } } });
  assert.is(connector.status, 201, connector.text);
  const valve = await givenDevice(t, 'valve-7', { connector: connector.body._id, devEui: EUI });
  // The spec's flow: a rule named <device-name>.<button-name>, with no trigger condition, to which actions are added.
  const rule = await givenRule(t, `${valve.name}.open`, [button('open-pressed')], []);
  const command = { id: 'queue', type: 'action', config: { action: 'command', iotnodeId: valve._id, command: 'loraAppServerQueueDownlink', data: { fPort: '10', data: '01ff', reference: 'open' } } };
  const added = await t.call('PUT', `/api/rules-v2/${rule._id}`, { body: { name: rule.name, definition: { nodes: [...rule.definition.nodes, command], edges: [edge('open-pressed', 'queue')] } } });
  assert.is(added.status, 200, added.text);
  const dashboard = await t.call('POST', '/api/dashboards', {
    body: { name: 'Valves', widgets: [{ template: 'commandButtons', settings: { buttons: [{ ruleV2Id: rule._id, triggerNodeId: 'open-pressed', label: 'Open' }] } }] },
  });
  assert.is(dashboard.status, 201, dashboard.text);
  // What the panel does on a press: the button's rule and trigger, read from the stored widget.
  const stored = await t.call('GET', `/api/dashboards/${dashboard.body._id}`);
  const pressed = stored.body.widgets.find((w: any) => w.template === 'commandButtons').settings.buttons[0];
  const run = await t.call('POST', `/api/rules-v2/${pressed.ruleV2Id}/execute`, { body: { triggerNodeId: pressed.triggerNodeId } });
  assert.is(run.status, 202, run.text);
  const queued = await eventually(async () => ns.queues.get(EUI)?.[0], 10_000, 'the downlink at ChirpStack');
  assert.is(queued.data, Buffer.from('01ff', 'hex').toString('base64'));
  assert.is(queued.fPort, 10);
  const entry = await logged(t, rule._id, /action 'queue' \(command\): command loraAppServerQueueDownlink requested for iotnode \w+ through ChirpStack/);
  const downlinks = await eventually(async () => {
    const d = (await t.call('GET', `/api/iotnodes/${valve._id}/downlinks`)).body as any[];
    return d[0]?.status === 'queued' ? d : undefined;
  }, 10_000, 'the command queued');
  assert.is(downlinks[0].commandId, entry.data!.commandId);
  assert.is(downlinks[0].requestedBy, `rule:${rule._id}`);
  await projected(t);
  assert.is(ns.queues.get(EUI)!.length, 1, 'queued once');
});

e2e('when a device reports over MQTT, then a condition rule sets a field on another device', async ({ t }) => {
  const provider = await givenProvider(t, 'rules-provider', ['svc/generic/v2/rules/boiler']);
  const client = await connectMqtt(t, provider.username, provider.password);
  try {
    await publish(client, 'svc/generic/v2/rules/boiler', { temperature: 20 });
    const boiler = await deviceOf(t, 'svc/generic/v2/rules/boiler');
    const fan = await givenDevice(t, 'fan');
    const rule = await givenRule(
      t,
      'cool the boiler',
      [onDevice('report', boiler._id, ['temperature']), when('hot', boiler._id, 'temperature', 'gte', 75), setField('on', fan._id, 'running', true)],
      [edge('report', 'hot'), edge('hot', 'on')],
    );
    await publish(client, 'svc/generic/v2/rules/boiler', { temperature: 60 });
    await publish(client, 'svc/generic/v2/rules/boiler', { humidity: 40 });
    await publish(client, 'svc/generic/v2/rules/boiler', { temperature: 80 });
    const after = await eventually(async () => {
      const d = await deviceNow(t, fan._id);
      return d.running === true ? d : undefined;
    }, 10_000, 'the fan switched on');
    assert.ok(after.updatedAt);
    const runs = (await ruleLog(t, rule._id)).filter((l) => l.data?.trigger);
    assert.is(runs.length, 1);
    assert.is(runs[0]!.data!.trigger.deviceId, boiler._id);
    assert.equal(runs[0]!.data!.conditions[0].actual, 80);
  } finally {
    client.end(true);
  }
});

e2e('given a rule whose action triggers itself, then the chain stops after a bounded depth and the rule log says why', async ({ t }) => {
  const lamp = await givenDevice(t, 'lamp', { mode: 'off' });
  const rule = await givenRule(
    t,
    'blink',
    [onDevice('changed', lamp._id, ['mode']), when('isOn', lamp._id, 'mode', 'eq', 'on'), when('isOff', lamp._id, 'mode', 'eq', 'off'), setField('toOff', lamp._id, 'mode', 'off'), setField('toOn', lamp._id, 'mode', 'on')],
    [edge('changed', 'isOn'), edge('changed', 'isOff'), edge('isOn', 'toOff'), edge('isOff', 'toOn')],
  );
  await t.call('PUT', `/api/iotnodes/${lamp._id}`, { body: { mode: 'on' } });
  const halted = await logged(t, rule._id, /stopped: it would be run \d+ in a chain of runs each caused by a rule's own action/);
  assert.equal([halted.type, halted.priority], ['warning', 'high']);
  assert.is(halted.data!.depth, MAX_RUN_DEPTH + 1);
  await projected(t);
  await new Promise((r) => setTimeout(r, 300));
  const runs = (await ruleLog(t, rule._id)).filter((l) => l.data?.trigger && /^Run /.test(l.message) && !/stopped/.test(l.message));
  assert.is(runs.length, MAX_RUN_DEPTH + 1);
  assert.equal(runs.map((r) => r.data!.depth), Array.from({ length: MAX_RUN_DEPTH + 1 }, (_, i) => i));
});

e2e('when the read models are rebuilt from the events, then the rules, their schedules and their logs come back exactly; a batch applied twice changes nothing', async ({ t }) => {
  await givenRule(t, 'nightly', [{ id: 'night', type: 'trigger', config: { resourceType: 'schedule', cron: '0 3 * * *', timezone: 'Europe/Stockholm' } }, { id: 'note', type: 'action', config: { action: 'log', message: 'night' } }], [edge('night', 'note')]);
  await projected(t);
  const { db, store } = t.platform.deps;
  const before = await snapshotReadModels(db);
  assert.ok(before.rules_v2!.length >= 4);
  assert.ok(before.device_logs!.some((row) => row.includes('"resource_type":"ruleV2"')));
  await rebuild(store, db, pino({ level: 'silent' }));
  assert.equal(await snapshotReadModels(db), before);
  const events = await store.readAll({ limit: 100_000 });
  await db.transaction().execute(async (tx) => {
    await rulesProjection.apply(tx, events);
    await logsProjection.apply(tx, events);
  });
  assert.equal(await snapshotReadModels(db), before);
});

e2e.run();
