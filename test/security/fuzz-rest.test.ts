import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { gzipSync } from 'node:zlib';
import { request } from 'node:http';
import mqtt from 'mqtt';
import { loadOpenApi, operationMatcher, type OpenApiDocument } from '../../api/openapi.js';
import { startTestPlatform, type Response, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { assertNothingWritten, givenTenant, TENANT_ROLE } from './given.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';
import { ECHO_TRANSLATOR, FUZZ_SEED, ODD_TEXT, Raw, SchemaArbitraries, echoUplinkHex, jsonText, oddJson, oddKey, oddText, percent, runsScaled, textOf } from './fuzz.js';

/**
 * Property-based fuzzing of every operation the OpenAPI document declares,
 * against the whole platform in this process. Each case is one request: a
 * caller (an admin, or a tenant, an ordinary user with a custom role), path
 * parameters filled with ids of real resources (the caller's own, another
 * tenant's, the admin's) or random and odd ones, query parameters, headers
 * and a body generated from the operation's schemas, valid or broken at one
 * place. Whatever comes in:
 * - the answer is never a 5xx;
 * - a 4xx answer stored no event (every event carries its request id).
 *
 * The seed is fixed (`FUZZ_SEED` to change it; `FUZZ_RUNS_FACTOR` to run more
 * cases); a failure names the operation, the seed and the shrunk request.
 */
type Caller = 'admin' | 'tenant';
type Owner = Caller | 'other';
type Kind = 'device' | 'dashboard' | 'widget' | 'image' | 'geofence' | 'credentialsSet' | 'reservedTopic' | 'connector' | 'channel' | 'deviceGroup' | 'translator' | 'usergroup' | 'user' | 'role' | 'command' | 'rule' | 'calculation' | 'location' | 'organization' | 'app';
const KINDS: Kind[] = ['device', 'dashboard', 'widget', 'image', 'geofence', 'credentialsSet', 'reservedTopic', 'connector', 'channel', 'deviceGroup', 'translator', 'usergroup', 'user', 'role', 'command', 'rule', 'calculation', 'location', 'organization', 'app'];

/** What a path parameter names, by its name; `{id}` names the operation's `x-resource`. */
const KIND_OF_PARAM: Record<string, Kind> = { dashboardId: 'dashboard', widgetId: 'widget', imageId: 'image', groupId: 'usergroup', memberId: 'user', userId: 'user', name: 'role', connectorId: 'connector', appId: 'app' };
/** Where `{id}` names something else than the operation's `x-resource`. */
const KIND_OF_TEMPLATE: Record<string, Kind> = { '/api/commands/{id}': 'command' };
const KIND_OF_RESOURCE: Record<string, Kind | 'any'> = {
  device: 'device',
  geofence: 'geofence',
  credentialsSet: 'credentialsSet',
  reservedTopic: 'reservedTopic',
  connector: 'connector',
  channel: 'channel',
  deviceGroup: 'deviceGroup',
  translator: 'translator',
  usergroup: 'usergroup',
  user: 'user',
  rule: 'rule',
  calculation: 'calculation',
  location: 'location',
  organization: 'organization',
  app: 'app',
  // Access-right lookups take the id of any resource or subject.
  accessRight: 'any',
};

/** Cases per operation; `FUZZ_RUNS_FACTOR` scales them. */
const RUNS = runsScaled(25);

interface Op {
  method: string;
  template: string;
  spec: Record<string, any>;
  parameters: Record<string, any>[];
}

interface Req {
  caller: Caller;
  /** The Authorization header instead of the caller's token (a network server's webhook secret, or none). */
  auth?: string | null;
  method: string;
  url: string;
  headers: Record<string, string>;
  body: Body;
}
type Body =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown; type?: string; encoding?: string }
  | { kind: 'raw'; text: string; type: string }
  | { kind: 'form'; fields: [string, string][]; files: { field: string; name: string; bytes: Buffer }[] };

interface World {
  t: TestPlatform;
  doc: OpenApiDocument;
  ops: Op[];
  operationOf: ReturnType<typeof operationMatcher>;
  callers: Record<Caller, GivenUser & { roles: string[] }>;
  /** Resource ids by kind and by who owns them. */
  owned: Record<Kind, Record<Owner, string[]>>;
  /** Ids that belong under another (a dashboard's widgets, a usergroup's members), for path parameters that go together. */
  children: Map<string, string[]>;
  topics: string[];
  translators: string[];
  /** Connectors whose network server calls the platform: the webhook path, the connector, its secret and the DevEUIs of its iotnodes. */
  webhooks: { path: string; connectorId: string; secret: string; euis: string[] }[];
  ns: ChirpStackStandIn;
  cursors: string[];
  etags: string[];
  tenantPermissions: Record<string, string[]>;
  /** Milliseconds spent per fuzzed operation. */
  spent: Map<string, number>;
  /** Answers per operation (`METHOD template`), for the coverage check. */
  answers: Map<string, number[]>;
  requests: number;
  started: number;
  /** Arbitraries built from the world, by what they were built from (`idsOf`, `schemaArbitraries`). */
  memo: { ids: Map<string, fc.Arbitrary<string>>; schemas: Map<string, SchemaArbitraries> };
}

const fuzz = suite<World>('REST fuzzing from the OpenAPI document');

/** Every operation of the document, with path-level and operation-level parameters resolved; writes that remove come last. */
function operationsOf(doc: OpenApiDocument): Op[] {
  const resolve = (p: Record<string, any>) => (p.$ref ? (doc.components as any).parameters[p.$ref.split('/').pop()] : p);
  const ops: Op[] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    const shared = ((item.parameters ?? []) as Record<string, any>[]).map(resolve);
    for (const [method, spec] of Object.entries(item)) {
      if (method === 'parameters' || typeof spec !== 'object' || spec === null) continue;
      const own = (((spec as any).parameters ?? []) as Record<string, any>[]).map(resolve);
      ops.push({ method: method.toUpperCase(), template, spec: spec as Record<string, any>, parameters: [...shared.filter((p) => !own.some((o) => o.name === p.name && o.in === p.in)), ...own] });
    }
  }
  // Deletions last, and of users and roles very last: earlier operations keep finding the resources they name.
  const rank = (op: Op) => (op.method !== 'DELETE' ? 0 : /^\/api\/(users|roles)/.test(op.template) ? 2 : 1);
  return ops.sort((a, b) => rank(a) - rank(b));
}

const keyOf = (method: string, template: string) => `${method} ${template}`;
const DOCUMENT = loadOpenApi();
const OPERATIONS = operationsOf(DOCUMENT);

fuzz.before(async (w) => {
  w.t = await startTestPlatform({ logLevel: 'warn' });
  w.doc = DOCUMENT;
  w.ops = OPERATIONS;
  w.operationOf = operationMatcher(w.doc);
  w.answers = new Map();
  w.spent = new Map();
  w.requests = 0;
  w.owned = Object.fromEntries(KINDS.map((k) => [k, { admin: [] as string[], tenant: [] as string[], other: [] as string[] }])) as unknown as World['owned'];
  w.children = new Map();
  w.memo = { ids: new Map(), schemas: new Map() };
  w.topics = [];
  w.translators = [];
  w.webhooks = [];
  w.cursors = [];
  w.etags = [];
  const t = w.t;

  const fuzzAdmin = await givenUser(t, 'fuzz-admin', { attributes: { roles: ['admin'] } });
  const alice = await givenTenant(t, 'alice');
  const bob = await givenTenant(t, 'bob');
  const carol = await givenUser(t, 'carol');
  w.callers = { admin: { ...fuzzAdmin, roles: ['admin'] }, tenant: { ...alice, roles: [TENANT_ROLE] } };
  w.tenantPermissions = (await t.call('GET', `/api/roles/${TENANT_ROLE}`)).body.permissions;
  const customRole = await t.call('POST', '/api/roles', { body: { name: 'fuzz-role', permissions: { device: ['GET'] } } });
  assert.is(customRole.status, 201, customRole.text);
  w.owned.user = { admin: [fuzzAdmin.id], tenant: [alice.id], other: [bob.id, carol.id] };
  w.owned.role = { admin: ['admin', 'fuzz-role'], tenant: [TENANT_ROLE], other: ['viewerBasic', 'installer'] };

  const ok = async (token: string, method: string, path: string, body?: unknown): Promise<any> => {
    const res = await t.call(method, path, { token, ...(body === undefined ? {} : { body }) });
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  const echo = { version: '1.0.0', ...ECHO_TRANSLATOR };
  const png = Buffer.from('89504e470d0a1a0a0000000d494844520000000100000001080600000000', 'hex');

  // A ChirpStack stand-in answers the commands of the owners' ChirpStack connectors at once.
  const euiOf = (n: number) => `70b3d57ed00500${n.toString(16).padStart(2, '0')}`;
  w.ns = await new ChirpStackStandIn('fuzz-api-token', new Set([0, 1, 2].map(euiOf))).start();

  const owners: [Owner, GivenUser][] = [['admin', fuzzAdmin], ['tenant', alice], ['other', bob]];
  for (const [index, [owner, user]] of owners.entries()) {
    const tok = user.token;
    const add = (kind: Kind, id: string) => w.owned[kind][owner].push(id);
    const set = await ok(tok, 'POST', '/api/basic-credentials-sets', { username: `${user.username}-set`, password: `${user.username}-mqtt-password` });
    add('credentialsSet', set._id);
    const topic = `svc/generic/v2/${user.username}-site`;
    add('reservedTopic', (await ok(tok, 'POST', '/api/reserved-mqtt-topics', { topic, basicCredentialsSetId: set._id }))._id);
    w.topics.push(topic);
    const translator = await ok(tok, 'POST', '/api/translators', { ...echo, name: `${user.username}-echo`, match: { deviceModelName: `${user.username}-model` } });
    add('translator', translator._id);
    w.translators.push(translator.name);
    const device = await ok(tok, 'POST', '/api/iotnodes', {
      name: `${user.username} meter`,
      secret: topic,
      temperature: 21.5,
      translatorPreferences: [{ name: `${user.username}-echo`, version: '1.0.0', upgradePolicy: 'none' }],
    });
    add('device', device._id);
    await ok(tok, 'POST', `/api/iotnodes/${device._id}/uplinks`, { encodedData: { hexEncoded: Buffer.from('{"a":1}').toString('hex'), port: 1 } });
    add('device', (await ok(tok, 'POST', '/api/iotnodes', { name: `${user.username} tracker`, lnglat: { type: 'Point', coordinates: [10.5, 59.9] } }))._id);
    const dashboard = await ok(tok, 'POST', '/api/dashboards', {
      name: `${user.username} board`,
      widgets: [{ template: 'text', settings: { text: 'Hello', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' } }],
    });
    add('dashboard', dashboard._id);
    add('widget', dashboard.widgets[0]._id);
    w.children.set(dashboard._id, [dashboard.widgets[0]._id]);
    const read = await t.call('GET', `/api/dashboards/${dashboard._id}`, { token: tok });
    if (read.headers.get('etag')) w.etags.push(read.headers.get('etag')!);
    const square = [[10, 59], [10.01, 59], [10.01, 59.01], [10, 59.01], [10, 59]];
    add('geofence', (await ok(tok, 'POST', '/api/geofences', { fence: { type: 'Polygon', coordinates: [square] }, ref: device._id }))._id);
    add('connector', (await ok(tok, 'POST', '/api/connectors', { name: `${user.username} connector`, integration: 'Generic', basicCredentialsSetId: set._id }))._id);
    const network = await ok(tok, 'POST', '/api/connectors', { name: `${user.username} network`, integration: 'ChirpStack', chirpstack: { url: w.ns.url, apiToken: 'fuzz-api-token' } });
    add('connector', network._id);
    const node = await ok(tok, 'POST', '/api/iotnodes', { name: `${user.username} lora node`, connector: network._id, devEui: euiOf(index), translatorPreferences: device.translatorPreferences });
    add('device', node._id);
    w.webhooks.push({ path: 'chirpstack', connectorId: network._id, secret: network.webhookSecret, euis: [euiOf(index)] });
    const queued = await ok(tok, 'PUT', '/api/iotnodes/command', { command: 'loraAppServerQueueDownlink', iotnodeId: node._id, data: { fPort: 10, data: '0a0b' } });
    add('command', queued.commandId);
    add('channel', (await ok(tok, 'POST', '/api/channels', { iotnode: device._id, mqtt: { type: 'keycloakUser', recipient: user.id } }))._id);
    add('deviceGroup', (await ok(tok, 'POST', '/api/devicegroups', { name: `${user.username} group`, devices: [device._id] }))._id);
    const form = new FormData();
    form.append('name', `${user.username} picture`);
    form.append('category', 'widget');
    form.append('image', new Blob([png]), 'a.png');
    const image = await fetch(`${t.baseUrl}/api/images`, { method: 'POST', headers: { authorization: `Bearer ${tok}` }, body: form });
    assert.is(image.status, 201, await image.clone().text());
    add('image', ((await image.json()) as { _id: string })._id);
    const rule = {
      name: `${user.username}.run`,
      definition: {
        nodes: [{ id: 'press', type: 'trigger', config: { resourceType: 'button' } }, { id: 'note', type: 'action', config: { action: 'log', message: 'pressed' } }],
        edges: [{ from: 'press', to: 'note' }],
      },
    };
    add('rule', (await ok(tok, 'POST', '/api/rules-v2', rule))._id);
    const total = await ok(tok, 'POST', '/api/iotnodes', { name: `${user.username} total` });
    add('device', total._id);
    const calculation = { name: `${user.username} hourly`, type: 'window', source: { deviceId: device._id, field: 'temperature' }, window: { seconds: 3600 }, destination: { deviceId: total._id, field: 'temperature' }, aggregation: 'mean', schedule: { type: 'onChange' } };
    add('calculation', (await ok(tok, 'POST', '/api/calculations', calculation))._id);
    const plan = { name: 'Plan 1', items: [{ deviceId: device._id, type: 'sensor', top: 10, left: 20 }] };
    add('location', (await ok(tok, 'POST', '/api/locations', { name: `${user.username} office`, lat: 59.33, lng: 18.06, defaultLayer: plan }))._id);
    add('organization', (await ok(tok, 'POST', '/api/organizations', { name: `${user.username} unit` }))._id);
    add('app', (await ok(tok, 'POST', '/api/apps', { name: `${user.username} app` }))._id);
  }
  // Connectors of the other network servers that call the platform, each with an iotnode to report for. Their
  // iotnodes stay out of the fuzzed ids: a command to them would wait for a network server that is not there.
  for (const [integration, path, settings] of [
    ['TheThingsStack', 'the-things-stack', { theThingsStack: { url: 'http://127.0.0.1:9', apiKey: 'k', applicationId: 'app1', webhookId: 'platform' } }],
    ['Loriot', 'loriot', { loriot: { url: 'http://127.0.0.1:9', applicationId: 'BE7A0123', token: 't' } }],
    ['ThingPark', 'thingpark', { thingPark: { url: 'http://127.0.0.1:9', clientId: 'c', clientSecret: 's' } }],
  ] as const) {
    const connector = await ok(fuzzAdmin.token, 'POST', '/api/connectors', { name: `${path} network`, integration, ...settings });
    const eui = euiOf(16 + w.webhooks.length);
    await ok(fuzzAdmin.token, 'POST', '/api/iotnodes', { name: `${path} node`, connector: connector._id, devEui: eui, networkDeviceId: `eui-${eui}` });
    w.webhooks.push({ path, connectorId: connector._id, secret: connector.webhookSecret, euis: [eui] });
  }

  // Usergroups are an admin's: one of the fuzzing admin with the tenant in it, one of the bootstrap admin.
  const group = await ok(fuzzAdmin.token, 'POST', '/api/usergroups', { name: 'fuzz group' });
  await ok(fuzzAdmin.token, 'POST', `/api/usergroups/${group._id}/members`, { userId: alice.id });
  w.children.set(group._id, [fuzzAdmin.id, alice.id]);
  w.owned.usergroup = { admin: [group._id], tenant: [group._id], other: [(await ok(t.adminToken, 'POST', '/api/usergroups', { name: 'root group' }))._id] };

  // Log entries to page through (refused MQTT logins are logged on the set), and a real cursor to tamper with.
  for (let i = 0; i < 3; i++) {
    await mqtt.connectAsync(`mqtt://127.0.0.1:${t.mqttPort}`, { username: 'alice-set', password: 'wrong', reconnectPeriod: 0 }).then((c) => c.endAsync(), () => undefined);
  }
  for (let i = 0; i < 200 && w.cursors.length === 0; i++) {
    const page = await t.call('GET', `/api/logs?limit=1`, { token: alice.token });
    if (page.body?.nextCursor) w.cursors.push(page.body.nextCursor);
    else await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(w.cursors.length, 'a log cursor to start from');
  w.started = Date.now();
});

fuzz.after(async (w) => {
  await w.t?.stop();
  await w.ns?.stop();
});

/*
 * Made-up ids and names, built once: `fc.stringMatching` does real work when it is built, and arbitraries are pure,
 * so sharing one gives the same values.
 */
const MADE_UUID = fc.uuid();
const MADE_ROLE_NAME = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_.-]{0,20}$/);
const MADE_HEX_ID = fc.stringMatching(/^[0-9a-f]{24}$/);
const EDGE_HEX_IDS = fc.constantFrom('ffffffffffffffffffffffff', '000000000000000000000000', 'FFFFFFFFFFFFFFFFFFFFFFFF');
const TOPIC_LEVEL = fc.stringMatching(/^[a-z0-9-]{1,10}$/);
const MADE_TRANSLATOR_NAME = fc.stringMatching(/^[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,4})?$/);

/** Ids of a kind: the caller's own, someone else's, and made up. */
function idsOf(w: World, kind: Kind | 'any', caller: Caller): fc.Arbitrary<string> {
  const kinds = kind === 'any' ? KINDS.filter((k) => k !== 'role') : [kind];
  const mine = kinds.flatMap((k) => w.owned[k][caller]);
  const others = kinds.flatMap((k) => (Object.keys(w.owned[k]) as Owner[]).filter((o) => o !== caller).flatMap((o) => w.owned[k][o]));
  // Kept by everything it is made of, so an id replaced in `owned` (restoreCallers) gives a new one.
  const key = JSON.stringify([kind, mine, others]);
  const known = w.memo.ids.get(key);
  if (known) return known;
  const made = kind === 'user' ? MADE_UUID : kind === 'role' ? MADE_ROLE_NAME : MADE_HEX_ID;
  const options: fc.WeightedArbitrary<string>[] = [{ arbitrary: made, weight: 1 }, { arbitrary: EDGE_HEX_IDS, weight: 1 }];
  if (mine.length) options.push({ arbitrary: fc.constantFrom(...mine), weight: 4 });
  if (others.length) options.push({ arbitrary: fc.constantFrom(...others), weight: 3 });
  const ids = fc.oneof(...options);
  w.memo.ids.set(key, ids);
  return ids;
}

const TEMPLATE_PARAM = /\{([^}]+)\}/g;

function pathParamKind(op: Op, name: string): Kind | 'any' {
  const kind = name === 'id' ? (KIND_OF_TEMPLATE[op.template] ?? KIND_OF_RESOURCE[op.spec['x-resource']]) : KIND_OF_PARAM[name];
  if (!kind) throw new Error(`${op.method} ${op.template}: no fuzzing kind for the path parameter {${name}}; add it to KIND_OF_PARAM or KIND_OF_RESOURCE`);
  return kind;
}

/** The arbitraries of the document's schemas, with real ids, topics and the like mixed in where the document names them. */
function schemaArbitraries(w: World, caller: Caller): SchemaArbitraries {
  // Kept by what they are made of that can change between operations: the ids in `owned` and the caller's password.
  const key = JSON.stringify([caller, w.callers[caller].password, w.owned]);
  let arbs = w.memo.schemas.get(key);
  if (!arbs) w.memo.schemas.set(key, (arbs = buildSchemaArbitraries(w, caller)));
  return arbs;
}

function buildSchemaArbitraries(w: World, caller: Caller): SchemaArbitraries {
  const allIds = idsOf(w, 'any', caller);
  const userIds = idsOf(w, 'user', caller);
  const resourceTypes = fc.constantFrom('device', 'dashboard', 'geofence', 'image', 'credentialsSet', 'reservedTopic', 'deviceGroup', 'usergroup', 'channel', 'connector', 'translator');
  const square = fc.tuple(fc.double({ min: -179, max: 178, noNaN: true }), fc.double({ min: -89, max: 88, noNaN: true }), fc.constantFrom(1e-9, 0.001, 0.5, 1)).map(([x, y, d]) => [[x, y], [x + d, y], [x + d, y + d], [x, y + d], [x, y]]);
  const semver = fc.tuple(fc.nat(3), fc.nat(3), fc.nat(3)).map((v) => v.join('.'));
  const topicLevel = TOPIC_LEVEL;
  const odd = fc.constantFrom(...ODD_TEXT);
  return new SchemaArbitraries(w.doc, {
    named: {
      Id: allIds,
      Uuid: userIds,
      RoleName: idsOf(w, 'role', caller),
      ResourceType: resourceTypes,
      GeofenceRing: square,
      GeoPosition: fc.tuple(fc.double({ min: -180, max: 180, noNaN: true }), fc.double({ min: -90, max: 90, noNaN: true })),
      TranslatorVersion: semver,
      TranslatorName: fc.oneof(fc.constantFrom(...w.translators), MADE_TRANSLATOR_NAME),
      // Exactly one target and one protocol, as the document requires of a channel.
      ChannelCreate: (arbs) => {
        const { schema } = arbs.resolve({ $ref: '#/components/schemas/ChannelCreate' });
        const target = fc.oneof(idsOf(w, 'device', caller).map((id) => ['iotnode', id]), idsOf(w, 'deviceGroup', caller).map((id) => ['deviceGroup', id]));
        const protocol = fc.constantFrom('http', 'mqtt', 'cloudIotHub', 'bacnet', 'knx', 'modbus').chain((p) => arbs.valid(schema.properties[p], `ChannelCreate.${p}`).map((v) => [p, v]));
        return fc.tuple(target, protocol, fc.option(fc.string({ maxLength: 20 }), { nil: undefined })).map(([[t, id], [p, v], name]) => ({ [t as string]: id, [p as string]: v, ...(name === undefined ? {} : { name }) }));
      },
      // A command the integration takes, with data of its shape, to a device that may have a connector of it.
      DeviceCommand: (arbs) => {
        const data = (name: string) => arbs.valid({ $ref: `#/components/schemas/${name}` });
        const command = fc.oneof(
          fc.tuple(fc.constant('loraAppServerQueueDownlink'), data('LoraQueueDownlinkData')),
          fc.tuple(fc.constantFrom('loraAppServerGetDeviceQueue', 'loraAppServerFlushQueue'), fc.option(data('NoCommandData'), { nil: undefined })),
          fc.tuple(fc.constant('apiCall'), data('ApiCallData')),
          fc.tuple(fc.constant('sendDownlink'), data('GenericDownlinkData')),
        );
        return fc.tuple(command, idsOf(w, 'device', caller), fc.option(arbs.valid({ $ref: '#/components/schemas/Integration' }), { nil: undefined, freq: 3 })).map(([[c, d], id, integration]) => ({
          command: c,
          iotnodeId: id,
          ...(d === undefined ? {} : { data: d }),
          ...(integration === undefined ? {} : { integrationName: integration }),
        }));
      },
      // A connector with the settings object its integration requires.
      ConnectorCreate: (arbs) => {
        const settings: Record<string, [string, string]> = { ChirpStack: ['chirpstack', 'ChirpStackSettings'], TheThingsStack: ['theThingsStack', 'TheThingsStackSettings'], Loriot: ['loriot', 'LoriotSettings'], ThingPark: ['thingPark', 'ThingParkSettings'] };
        return fc.constantFrom(...Object.keys(settings)).chain((integration) => {
          const [field, schema] = settings[integration]!;
          return fc.tuple(fc.string({ minLength: 1, maxLength: 20 }), arbs.valid({ $ref: `#/components/schemas/${schema}` })).map(([name, value]) => ({ name, integration, [field]: value }));
        });
      },
      // A right on a resource of the type it names, for a subject of the kind it names.
      AccessRight: rightOf(w, caller, true),
      AccessRightRevoke: rightOf(w, caller, false),
    },
    hints: {
      'ReservedTopicCreate.topic': fc.oneof(
        fc.tuple(fc.constantFrom('svc/generic/v2', 'svc/tracker/v1', 'svc/meter/v1', 'svc/gateway/v1'), topicLevel).map(([root, level]) => `${root}/${level}`),
        fc.tuple(fc.constantFrom(...w.topics), fc.oneof(topicLevel, odd)).map(([topic, level]) => `${topic}/${level}`),
        fc.tuple(idsOf(w, 'credentialsSet', caller), topicLevel).map(([set, level]) => `svc/push/v1/${set}/${level}`),
      ),
      'DeviceClaim.secret': fc.constantFrom(...w.topics),
      'DeviceWrite.secret': fc.oneof(fc.constantFrom(...w.topics), topicLevel.map((l) => `svc/generic/v2/${l}`)),
      'DeviceWrite.deviceModelName': fc.constantFrom(...w.translators.map((n) => n.replace(/-echo$/, '-model')), 'fuzz-echo-model'),
      'AccessRight.subjectId': fc.oneof(userIds, idsOf(w, 'usergroup', caller), fc.constantFrom('Sales', 'Ops')),
      'AccessRightRevoke.subjectId': fc.oneof(userIds, idsOf(w, 'usergroup', caller)),
      'ChannelMqtt.recipient': fc.oneof(userIds, idsOf(w, 'credentialsSet', caller)),
      'TranslatorUpload.spec': fc.constantFrom({ text: 'string', echo: 'object' }, { level: { type: 'number', unit: '%', quantity: 'level' } }, {}),
      'TranslatorUpload.code': fc.constantFrom('function translate(input) { return { result: {} }; }', 'function translate({ encodedData }) { return { result: { text: encodedData.hexEncoded } }; }', 'function translate() { return { result: { text: "\\u0000" } }; }'),
      'Uplink.encodedData.hexEncoded': echoUplinkHex(w.topics),
      'UserAttributes.roles[]': idsOf(w, 'role', caller),
      'PasswordChange.currentPassword': fc.constant(w.callers[caller].password),
      'query:resourceId': allIds,
      'query:ref': allIds,
      'query:iotnode': allIds,
      'query:deviceGroup': allIds,
      'query:measurement': fc.constantFrom('temperature', 'text', 'echo.a', 'lnglat', 'radio.rssi'),
      'query:event': fc.constantFrom('up', 'txack', 'ack', 'log', 'join', 'status', 'location', 'integration'),
      'query:status': fc.constantFrom('queued', 'queued,sent', 'pending,refused,failed'),
      'query:cursor': fc.oneof(fc.constantFrom(...w.cursors), fc.constantFrom(...w.cursors).map((c) => `${c.slice(0, -2)}AA`), fc.constantFrom(...w.cursors).map((c) => c.split('.').reverse().join('.'))),
      'query:geoquery': fc.oneof(
        square.map((ring) => `type:contains;coordinates=${JSON.stringify(ring)}`),
        idsOf(w, 'geofence', caller).map((id) => `id:${id}`),
        fc.constantFrom('type:contains;coordinates=[[0,0],[1,0],[0,0]]', 'type:within;coordinates=[]', 'id:', 'coordinates=[[1e309,0]]', `type:contains;coordinates=${'['.repeat(5000)}`),
      ),
      'header:If-Match': fc.oneof(fc.constantFrom(...w.etags), fc.constantFrom('"0"', '"-1"', '"1e309"', '"99999999999999999999999"', '*', 'W/"1"', '"', '', 'x'.repeat(41), '"1", "2"')),
    },
  });
}

/** Where a request is broken: nowhere, or in one part. */
type Focus = 'none' | 'path' | 'query' | 'header' | 'body';

/** An access right (to grant or revoke) naming a real resource by its own type, and a user or usergroup by its kind. */
function rightOf(w: World, caller: Caller, scoped: boolean): fc.Arbitrary<unknown> {
  const types = KINDS.filter((k) => !['widget', 'translator', 'user', 'role'].includes(k));
  const resource = fc.constantFrom(...types).chain((k) => idsOf(w, k, caller).map((id) => ({ resourceType: k, resourceId: id })));
  const subject = fc.oneof(idsOf(w, 'user', caller).map((id) => ({ subjectType: 'user', subjectId: id })), idsOf(w, 'usergroup', caller).map((id) => ({ subjectType: 'group', subjectId: id })));
  const scope = fc.uniqueArray(fc.constantFrom('admin', 'write', 'read', 'peek'), { minLength: 1, maxLength: 2 });
  return fc.tuple(resource, subject, scoped ? scope : fc.option(scope, { nil: undefined })).map(([r, s, sc]) => ({ ...r, ...s, ...(sc ? { scope: sc } : {}) }));
}

/** Query string pairs of one parameter's value, in the parameter's style. */
function pairsOf(p: Record<string, any>, v: unknown): [string, string][] {
  const plain = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x) && !(x instanceof Raw);
  if (p.style === 'deepObject' && plain(v)) {
    return Object.keys(v).flatMap((k): [string, string][] => {
      const inner = v[k];
      return plain(inner) ? Object.keys(inner).map((k2): [string, string] => [`${p.name}[${k}][${k2}]`, textOf(inner[k2])]) : [[`${p.name}[${k}]`, textOf(inner)]];
    });
  }
  if (Array.isArray(v)) return v.slice(0, 50).map((item): [string, string] => [p.name, textOf(item)]);
  return [[p.name, textOf(v)]];
}

/**
 * Query string pairs for the operation's query parameters: valid ones, or
 * (when broken) valid ones but one, which is broken, undeclared, repeated or
 * bracketed.
 */
function queryOf(arbs: SchemaArbitraries, op: Op, broken: boolean): fc.Arbitrary<[string, string][]> {
  const params = op.parameters.filter((p) => p.in === 'query');
  const valueOf = (p: Record<string, any>, bad: boolean) => {
    const generic = bad ? arbs.broken(p.schema, `query:${p.name}`) : arbs.valid(p.schema, `query:${p.name}`);
    const hint = arbs.hint(`query:${p.name}`);
    return (hint ? fc.oneof({ arbitrary: hint, weight: 2 }, { arbitrary: generic, weight: 1 }) : generic).map((v) => pairsOf(p, v));
  };
  const valid = fc.tuple(...params.map((p) => fc.option(valueOf(p, false), { nil: [], freq: 2 }))).map((groups) => groups.flat());
  if (!broken) return valid;
  const names = params.map((p) => p.name);
  const faults: fc.Arbitrary<[string, string][]>[] = [fc.tuple(oddKey, oddText()).map(([k, v]): [string, string][] => [[k, textOf(v)]])];
  if (params.length) {
    faults.push(
      fc.constantFrom(...params).chain((p) => valueOf(p, true)),
      fc.tuple(fc.constantFrom(...names), fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([n, a, b]): [string, string][] => [[n, a], [n, b]]),
      fc.tuple(fc.constantFrom(...names), fc.constantFrom('[]', '[0]', '[a]', '[__proto__]', '[a][b][c][d][e][f][g]')).map(([n, b]): [string, string][] => [[`${n}${b}`, '1']]),
    );
  }
  return fc.tuple(valid, fc.oneof(...faults)).map(([ok, bad]) => [...ok.filter(([k]) => !bad.some(([b]) => b === k)), ...bad]);
}

const RAW_BODIES = [
  '',
  'null',
  '[]',
  '"x"',
  '1',
  '{',
  '{"a":1,}',
  '{"a":1}{"b":2}',
  '\ufeff{}',
  '{"a":"\\ud800"}',
  '{"__proto__":{"admin":true}}',
  '{"constructor":{"prototype":{"polluted":true}}}',
  '{"a":1,"a":2}',
  `{"a":${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
];

/** The request body: JSON from the operation's schema, or (when broken) JSON broken at one place, odd JSON text, other media types and encodings. */
function bodyOf(arbs: SchemaArbitraries, op: Op, broken: boolean): fc.Arbitrary<Body> {
  const content = (op.spec.requestBody?.content ?? {}) as Record<string, { schema: Record<string, any> }>;
  const raw = fc.oneof(
    fc.constantFrom(...RAW_BODIES).map((text): Body => ({ kind: 'raw', text, type: 'application/json' })),
    fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=utf-16', 'application/xml', 'multipart/form-data; boundary=x').map((type): Body => ({ kind: 'raw', text: type.startsWith('application/x-www') ? 'a=1&b[c]=2' : '{"name":"x"}', type })),
  );
  if (content['multipart/form-data']) {
    const form = formOf(arbs, content['multipart/form-data'].schema, broken);
    return broken ? fc.oneof({ arbitrary: form, weight: 5 }, { arbitrary: raw, weight: 1 }) : form;
  }
  const schema = content['application/json']?.schema;
  if (!schema) return broken ? fc.oneof(oddJson.map((value): Body => ({ kind: 'json', value })), raw) : fc.constant<Body>({ kind: 'none' });
  if (!broken) return arbs.valid(schema, '').map((value): Body => ({ kind: 'json', value }));
  return fc.oneof(
    { arbitrary: arbs.broken(schema, '').map((value): Body => ({ kind: 'json', value })), weight: 10 },
    { arbitrary: raw, weight: 2 },
    { arbitrary: fc.tuple(arbs.valid(schema, ''), fc.constantFrom('gzip', 'deflate', 'br', 'compress', 'gzip, gzip', 'GZIP')).map(([value, encoding]): Body => ({ kind: 'json', value, encoding })), weight: 1 },
    { arbitrary: fc.constant<Body>({ kind: 'none' }), weight: 1 },
  );
}

/** A multipart form from the schema: its fields (valid or odd), and a file that is an image, a hostile SVG, noise, or missing. */
function formOf(arbs: SchemaArbitraries, schema: Record<string, any>, broken: boolean): fc.Arbitrary<Body> {
  const { schema: s } = arbs.resolve(schema);
  const fields = Object.entries((s.properties ?? {}) as Record<string, any>).filter(([, p]) => arbs.resolve(p).schema.format !== 'binary');
  const fileField = Object.entries((s.properties ?? {}) as Record<string, any>).find(([, p]) => arbs.resolve(p).schema.format === 'binary')?.[0] ?? 'file';
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
  const file = fc.oneof(
    fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.concat([png, Buffer.from(b)])),
    fc.constantFrom(
      '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
      '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
      '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg">&e;</svg>',
      '<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>',
      '<svg',
    ).map((text) => Buffer.from(text)),
    fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
    fc.constant(Buffer.alloc(0)),
  );
  const field = ([name, p]: [string, any]) => fc.option((broken ? arbs.any(p, `form.${name}`) : arbs.valid(p, `form.${name}`)).map((v): [string, string] => [name, textOf(v)]), { nil: null, freq: broken ? 6 : 1000 });
  return fc
    .tuple(
      fc.tuple(...fields.map(field)),
      broken ? fc.option(fc.tuple(oddKey, oddText()).map(([k, v]): [string, string] => [k, textOf(v)]), { nil: null, freq: 4 }) : fc.constant(null),
      broken
        ? fc.array(fc.tuple(fc.constantFrom(fileField, fileField, 'other'), fc.constantFrom('a.png', 'a.svg', '', '../../etc/passwd', 'a\u0000.png', '😀.png'), file), { maxLength: 2 })
        : fc.tuple(fc.constant(fileField), fc.constantFrom('a.png', 'a.svg'), file).map((f) => [f]),
    )
    .map(([given, extra, files]): Body => ({
      kind: 'form',
      fields: [...given, extra].filter((f): f is [string, string] => f !== null).map(([k, v]) => [k, v.length > 8192 ? v.slice(0, 8192) : v]),
      files: files.map(([f, name, bytes]) => ({ field: f, name, bytes })),
    }));
}

/** A public operation a network server calls, authenticated by a connector's webhook secret. */
const isWebhook = (op: Op) => Array.isArray(op.spec.security) && op.spec.security.length === 0 && op.template.includes('{connectorId}');

/**
 * What each network server posts, as docs/integrations.md describes it, as
 * JSON schemas the fuzzing derives valid and broken bodies from; `euis` are
 * the DevEUIs of the connector's iotnodes, so uplinks find their device.
 */
function webhookBody(path: string, euis: string[]): Record<string, any> {
  const int = { type: 'integer', minimum: 0, maximum: 100_000 };
  const eui = { anyOf: [{ enum: euis }, { type: 'string', pattern: '^[0-9a-fA-F]{16}$' }] };
  const b64 = { type: 'string', pattern: '^([A-Za-z0-9+/]{4})*$', maxLength: 400 };
  const hex = { type: 'string', pattern: '^([0-9a-f]{2})*$', maxLength: 484 };
  const uuid = { type: 'string', format: 'uuid' };
  const object = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object', properties, required });
  switch (path) {
    case 'chirpstack': {
      const deviceInfo = object({ devEui: eui, deviceName: { type: 'string', maxLength: 40 } }, ['devEui']);
      return {
        oneOf: [
          object({ deduplicationId: uuid, time: { type: 'string', format: 'date-time' }, deviceInfo, fCnt: int, fPort: { type: 'integer', minimum: 0, maximum: 255 }, data: b64, rxInfo: { type: 'array', maxItems: 3, items: object({ gatewayId: { type: 'string', pattern: '^[0-9a-f]{16}$' }, rssi: { type: 'integer', minimum: -150, maximum: 0 }, snr: { type: 'number', minimum: -20, maximum: 20 } }) }, txInfo: object({ frequency: int, modulation: object({ lora: object({ spreadingFactor: { type: 'integer', minimum: 7, maximum: 12 } }) }) }) }, ['deviceInfo']),
          object({ deviceInfo, queueItemId: uuid, acknowledged: { type: 'boolean' }, fCntDown: int }, ['deviceInfo', 'queueItemId']),
          object({ deviceInfo, level: { enum: ['INFO', 'WARNING', 'ERROR'] }, code: { enum: ['EXPIRED', 'UPLINK_CODEC', 'DOWNLINK_GATEWAY'] }, description: { type: 'string', maxLength: 200 }, context: object({ deviceQueueItemId: uuid }) }, ['deviceInfo']),
        ],
      };
    }
    case 'the-things-stack': {
      const ids = object({ device_id: { type: 'string', pattern: '^[a-z0-9-]{1,36}$' }, dev_eui: eui, dev_addr: { type: 'string', pattern: '^[0-9A-F]{8}$' } });
      const downlink = object({ f_port: int, frm_payload: b64, confirmed: { type: 'boolean' }, correlation_ids: { type: 'array', maxItems: 3, items: { type: 'string', maxLength: 80 } } });
      const uplink = object({ f_port: int, f_cnt: int, frm_payload: b64, rx_metadata: { type: 'array', maxItems: 3, items: object({ gateway_ids: object({ gateway_id: { type: 'string', maxLength: 36 } }), rssi: int, snr: { type: 'number' } }) }, settings: object({ frequency: { type: 'string', pattern: '^[0-9]{9}$' } }) });
      const message = (field: string, value: unknown) => object({ end_device_ids: ids, correlation_ids: { type: 'array', maxItems: 3, items: { type: 'string', maxLength: 80 } }, [field]: value }, ['end_device_ids', field]);
      return { oneOf: [message('uplink_message', uplink), ...['downlink_sent', 'downlink_ack', 'downlink_nack', 'downlink_failed', 'downlink_queued'].map((f) => message(f, downlink)), message('join_accept', object({ session_key_id: b64 }))] };
    }
    case 'loriot':
      return {
        oneOf: [
          object({ cmd: { enum: ['rx'] }, EUI: eui, ts: int, fcnt: int, port: int, data: hex, rssi: int, snr: { type: 'number' }, freq: int, dr: { type: 'string', maxLength: 20 }, ack: { type: 'boolean' } }, ['cmd', 'EUI']),
          object({ cmd: { enum: ['txd'] }, EUI: eui, seqdn: int, port: int, data: hex }, ['cmd', 'EUI']),
          object({ cmd: { enum: ['gw'] }, EUI: eui, gws: { type: 'array', maxItems: 3, items: object({ rssi: int, snr: { type: 'number' } }) } }, ['cmd', 'EUI']),
        ],
      };
    case 'thingpark': {
      const report = (field: string, extra: Record<string, unknown>) => object({ [field]: object({ DevEUI: eui, FPort: int, Time: { type: 'string', format: 'date-time' }, ...extra }, ['DevEUI']) }, [field]);
      return { oneOf: [report('DevEUI_uplink', { FCntUp: int, payload_hex: hex, LrrRSSI: { type: 'number' }, LrrSNR: { type: 'number' } }), report('DevEUI_downlink_Sent', { FCntDn: int, payload_hex: hex }), report('DevEUI_downlink_Rejected', { DownlinkRejectionCause: { type: 'string', maxLength: 40 } }), report('DevEUI_notification', { Type: { type: 'string', maxLength: 40 } })] };
    }
    default:
      return { type: 'object' };
  }
}

/**
 * One call of a network server's webhook: the secret of the connector in its
 * path, valid everywhere, or broken in one part: the body, the query, the path
 * (another connector, another network server, an odd id) or the secret
 * (another connector's, a wrong one, none).
 */
function webhookRequestOf(w: World, op: Op): fc.Arbitrary<Req> {
  const arbs = schemaArbitraries(w, 'admin');
  const focus = fc.constantFrom<Focus | 'auth'>('none', 'none', 'body', 'body', 'body', 'query', 'path', 'auth');
  return fc.tuple(fc.constantFrom(...w.webhooks), focus).chain(([hook, f]) => {
    const schema = webhookBody(hook.path, hook.euis);
    const body: fc.Arbitrary<Body> = f === 'body' ? bodyOf(arbs, { ...op, spec: { requestBody: { content: { 'application/json': { schema } } } } }, true) : arbs.valid(schema).map((value): Body => ({ kind: 'json', value }));
    const others = w.webhooks.filter((o) => o !== hook);
    const auth = f === 'auth' ? fc.constantFrom<string | null>(null, 'Bearer wrong-secret', `Bearer ${others[0]!.secret}`, hook.secret, `Basic ${hook.secret}`, `Bearer ${hook.secret} x`) : fc.constant(`Bearer ${hook.secret}`);
    const path =
      f === 'path'
        ? fc.oneof(
            fc.constantFrom(...others).map((o) => `/api/integrations/${o.path}/${hook.connectorId}`),
            fc.constantFrom(...others).map((o) => `/api/integrations/${hook.path}/${o.connectorId}`),
            oddText(64).map((v) => `/api/integrations/${hook.path}/${percent(textOf(v))}`),
            oddText(64).map((v) => `/api/integrations/${percent(textOf(v))}/${hook.connectorId}`),
          )
        : fc.constant(`/api/integrations/${hook.path}/${hook.connectorId}`);
    return fc.record({ auth, path, body, query: queryOf(arbs, op, f === 'query') }).map(({ auth, path, body, query }) => {
      const search = query.map(([k, v]) => `${percent(k)}=${percent(v)}`).join('&');
      const req: Req = { caller: 'admin', auth, method: op.method, url: search ? `${path}?${search}` : path, headers: {}, body };
      return Object.defineProperty(req, fc.toStringMethod, { value: () => describe(req) });
    });
  });
}

/** One request to `op`, by either caller: valid everywhere, or broken in one part. */
function requestOf(w: World, op: Op): fc.Arbitrary<Req> {
  if (isWebhook(op)) return fc.limitShrink(webhookRequestOf(w, op), 40);
  const names = [...op.template.matchAll(TEMPLATE_PARAM)].map((m) => m[1]!);
  const headerParams = op.parameters.filter((p) => p.in === 'header');
  const focuses: fc.WeightedArbitrary<Focus>[] = [
    { arbitrary: fc.constant('none'), weight: 3 },
    { arbitrary: fc.constant('body'), weight: op.spec.requestBody ? 4 : 1 },
    { arbitrary: fc.constant('query'), weight: op.parameters.some((p) => p.in === 'query') ? 3 : 1 },
  ];
  if (names.length) focuses.push({ arbitrary: fc.constant('path'), weight: 1 });
  if (headerParams.length) focuses.push({ arbitrary: fc.constant('header'), weight: 1 });
  const arbsOf = { admin: schemaArbitraries(w, 'admin'), tenant: schemaArbitraries(w, 'tenant') };
  const byCaller = (caller: Caller, focus: Focus): fc.Arbitrary<Req> => {
    const arbs = arbsOf[caller];
    const idOf = (name: string) => (focus === 'path' ? fc.oneof(idsOf(w, pathParamKind(op, name), caller), oddText(64).map(textOf)) : idsOf(w, pathParamKind(op, name), caller));
    // A later parameter is often one that belongs under the first (a widget of that very dashboard, a member of that group).
    const params = names.length < 2 ? fc.tuple(...names.map(idOf)) : fc.tuple(idOf(names[0]!), ...names.slice(1).map(() => fc.nat())).chain(([first, ...picks]) => {
      const under = w.children.get(String(first)) ?? [];
      return fc.tuple(fc.constant(first), ...names.slice(1).map((name, i) => (under.length ? fc.oneof(fc.constant(under[picks[i]! % under.length]!), idOf(name)) : idOf(name))));
    });
    const headerValue = (p: Record<string, any>) => (focus === 'header' ? arbs.hint(`header:${p.name}`) : undefined) ?? fc.constantFrom(...w.etags);
    const headers = fc.tuple(...headerParams.map((p) => fc.option(headerValue(p).map((v): [string, string] => [p.name, textOf(v)]), { nil: null, freq: 2 })));
    return fc.record({ values: params, query: queryOf(arbs, op, focus === 'query'), headers, body: bodyOf(arbs, op, focus === 'body') }).map(({ values, query, headers, body }) => {
      let i = 0;
      const path = op.template.replace(TEMPLATE_PARAM, () => percent(String(values[i++])));
      const search = query.map(([k, v]) => `${percent(k)}=${percent(v)}`).join('&');
      const req: Req = { caller, method: op.method, url: search ? `${path}?${search}` : path, headers: Object.fromEntries(headers.filter((h): h is [string, string] => h !== null)), body };
      return Object.defineProperty(req, fc.toStringMethod, { value: () => describe(req) });
    });
  };
  const request = fc.tuple(fc.constantFrom<Caller>('admin', 'tenant'), fc.oneof(...focuses)).chain(([caller, focus]) => byCaller(caller, focus));
  return fc.limitShrink(request, 40);
}

function describe(req: Req): string {
  const body =
    req.body.kind === 'json'
      ? fc.stringify(req.body.value)
      : req.body.kind === 'raw'
        ? `${req.body.type}: ${JSON.stringify(req.body.text.slice(0, 200))}`
        : req.body.kind === 'form'
          ? `form ${fc.stringify(req.body.fields)} files ${req.body.files.map((f) => `${f.field}=${JSON.stringify(f.name)} (${f.bytes.length} bytes)`).join(', ')}`
          : '(no body)';
  const url = req.url.length > 400 ? `${req.url.slice(0, 400)}… (${req.url.length} chars)` : req.url;
  const shown = body.length > 2000 ? `${body.slice(0, 2000)}… (${body.length} chars)` : body;
  const who = req.auth === undefined ? req.caller : req.auth === null ? 'no Authorization' : `Authorization ${JSON.stringify(req.auth.slice(0, 20))}…`;
  return `${who}: ${req.method} ${url} ${JSON.stringify(req.headers)} ${req.body.kind === 'json' && req.body.encoding ? `[Content-Encoding ${req.body.encoding}] ` : ''}${shown}`;
}

/** Sends the request as a raw HTTP client would: a body on a GET too, bytes as generated. */
async function send(w: World, req: Req): Promise<Response> {
  const auth = req.auth === undefined ? `Bearer ${w.callers[req.caller].token}` : req.auth;
  const headers: Record<string, string> = { ...(auth === null ? {} : { authorization: auth }), ...req.headers };
  let body: Buffer | undefined;
  if (req.body.kind === 'json') {
    const text = jsonText(req.body.value);
    headers['content-type'] = req.body.type ?? 'application/json';
    if (req.body.encoding) headers['content-encoding'] = req.body.encoding;
    body = req.body.encoding === 'gzip' ? gzipSync(text) : Buffer.from(text);
  } else if (req.body.kind === 'raw') {
    headers['content-type'] = req.body.type;
    body = Buffer.from(req.body.text);
  } else if (req.body.kind === 'form') {
    const form = new FormData();
    for (const [k, v] of req.body.fields) form.append(k, v);
    for (const f of req.body.files) form.append(f.field, new Blob([f.bytes]), f.name);
    const encoded = new Request('http://form.invalid/', { method: 'POST', body: form });
    headers['content-type'] = encoded.headers.get('content-type')!;
    body = Buffer.from(await encoded.arrayBuffer());
  }
  if (body) headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const out = request(w.t.baseUrl + req.url, { method: req.method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
        resolve({ status: res.statusCode ?? 0, body: undefined, text: Buffer.concat(chunks).toString('utf8'), headers: h });
      });
      res.on('error', reject);
    });
    out.on('error', reject);
    out.end(body);
  });
}

/** The logged cause of a 500, found by its error id. */
function causeOf(w: World, res: Response): string {
  const id = res.headers.get('x-error-id');
  const line = id && w.t.logs.find((l) => l.errorId === id);
  if (!line) return '';
  const err = line.err as { message?: string; stack?: string } | undefined;
  return `\ncause: ${err?.stack?.split('\n').slice(0, 6).join('\n  ') ?? err?.message ?? JSON.stringify(line).slice(0, 500)}`;
}

/**
 * Gives the callers back what a successful fuzzed write on users or roles
 * took from them (their account, their role, its permissions), so later
 * cases still act as an admin and as a tenant.
 */
async function restoreCallers(w: World): Promise<void> {
  const t = w.t;
  const role = await t.call('PUT', `/api/roles/${TENANT_ROLE}`, { body: { permissions: w.tenantPermissions } });
  if (role.status === 404) await t.call('POST', '/api/roles', { body: { name: TENANT_ROLE, permissions: w.tenantPermissions } });
  for (const caller of ['admin', 'tenant'] as Caller[]) {
    const who = w.callers[caller];
    const user = await t.call('GET', `/api/users/${who.id}`);
    if (user.status === 404) {
      const again = await givenUser(t, who.username, { attributes: { roles: who.roles } });
      for (const k of KINDS) for (const o of Object.keys(w.owned[k]) as Owner[]) w.owned[k][o] = w.owned[k][o].map((id) => (id === who.id ? again.id : id));
      w.callers[caller] = { ...again, roles: who.roles };
      continue;
    }
    const roles = (user.body.attributes?.roles ?? []) as string[];
    if (!user.body.enabled || who.roles.some((r) => !roles.includes(r))) {
      const res = await t.call('PATCH', `/api/users/${who.id}`, { body: { enabled: true, attributes: { roles: who.roles } } });
      assert.is(res.status, 200, res.text);
    }
    // A password change or reset ended the caller's token: a new one, with the password it has now.
    if ((await t.call('GET', `/api/users/${who.id}`, { token: who.token })).status === 401) who.token = await t.login(who.username, who.password);
  }
}

const TOUCHES_CALLERS = /^\/api\/(users|roles|auth)|\/reset-password$/;

async function check(w: World, op: Op, req: Req): Promise<void> {
  const logsBefore = w.t.logs.length;
  const res = await send(w, req);
  w.requests++;
  const matched = w.operationOf(req.method, req.url.split('?')[0]!);
  const key = keyOf(req.method, matched?.template ?? op.template);
  w.answers.set(key, [...(w.answers.get(key) ?? []), res.status]);
  // The one 5xx allowed: a 502 the operation documents, a network server's refusal passed on with its message.
  const passedOn = res.status === 502 && op.spec.responses?.['502'] !== undefined && res.text.startsWith('ERR - ');
  if (res.status >= 500 && !passedOn) throw new Error(`answered ${res.status}: ${res.text.slice(0, 300)}${causeOf(w, res)}`);
  if (res.status >= 400 && !res.headers.get('x-request-id')) {
    // Refused by the HTTP server before the application saw it (a request line or headers past 64 KiB): nothing could be stored.
    assert.ok([400, 413, 414, 431].includes(res.status), `an answer ${res.status} without X-Request-Id: ${res.text.slice(0, 200)}`);
  } else if (res.status >= 400) {
    await assertNothingWritten(w.t, res);
  }
  const errors = w.t.logs.slice(logsBefore).filter((l) => Number(l.level) >= 50);
  assert.equal(errors.map((l) => `${l.msg}: ${JSON.stringify((l.err as { message?: string } | undefined)?.message ?? '').slice(0, 300)}`), [], `answered ${res.status}, and the platform logged an error`);
  if (res.status < 300 && op.template === '/api/auth/password' && req.body.kind === 'json') {
    // Every token issued before the change stopped working; the answer carries the caller's next one.
    w.callers[req.caller].password = (req.body.value as { newPassword: string }).newPassword;
    w.callers[req.caller].token = (JSON.parse(res.text) as { token: string }).token;
  }
  if (res.status < 300 && op.template.endsWith('/reset-password')) {
    const path = req.url.split('?')[0]!.toLowerCase();
    for (const who of Object.values(w.callers)) if (path.includes(who.id)) who.password = (JSON.parse(res.text) as { temporaryPassword: string }).temporaryPassword;
  }
  if (res.status < 300 && TOUCHES_CALLERS.test(op.template)) await restoreCallers(w);
}

// One property per operation of the document, so a failure names the operation; the list is read from the document itself.
for (const op of OPERATIONS) {
  fuzz(`${op.method} ${op.template}: never a 5xx (but a documented 502 from a network server), and a refused request stores nothing`, async (w) => {
    const began = Date.now();
    await fc.assert(
      fc.asyncProperty(requestOf(w, op), (req) => check(w, op, req)),
      { seed: FUZZ_SEED, numRuns: RUNS, includeErrorInReport: true },
    );
    w.spent.set(keyOf(op.method, op.template), Date.now() - began);
  });
}

fuzz('every operation of the document was fuzzed, and each got past authentication and the role check at least once', async (w) => {
  const declared = w.ops.map((o) => keyOf(o.method, o.template)).sort();
  const fuzzed = [...w.answers.keys()].filter((k) => declared.includes(k)).sort();
  assert.equal(fuzzed, declared, 'the fuzzed operations are those of the document');
  const blocked = declared.filter((k) => (w.answers.get(k) ?? []).every((s) => s === 401 || s === 403));
  assert.equal(blocked, [], 'operations never answered other than 401/403');
  const statuses = new Map<number, number>();
  for (const list of w.answers.values()) for (const s of list) statuses.set(s, (statuses.get(s) ?? 0) + 1);
  if (process.env.FUZZ_VERBOSE) {
    for (const k of declared) console.log(`  ${k.padEnd(66)} ${String(w.spent.get(k)).padStart(6)} ms ${JSON.stringify(Object.fromEntries([...new Set(w.answers.get(k))].sort().map((s) => [s, w.answers.get(k)!.filter((x) => x === s).length])))}`);
  }
  console.log(`  fuzz-rest: ${w.requests} requests over ${declared.length} operations in ${((Date.now() - w.started) / 1000).toFixed(1)} s (seed ${FUZZ_SEED}); answers ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
});

fuzz.run();
