import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CONNECTOR_NOT_FOUND, connectorDecider, type ConnectorCommand, type ConnectorDoc, type ConnectorEvent } from '../../domain/connectors/connector.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const connectors = suite('connector decider');

const at = '2026-01-01T00:00:00.000Z';
const ID = 'cccccccccccccccccccccccc';
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const hash = 'a'.repeat(64);

const given = (events: ConnectorEvent[]) => deciderSpec(connectorDecider).given(events);
const create = (body: ConnectorDoc, webhookSecretHash?: string): ConnectorCommand => ({ type: 'CreateConnector', id: ID, createdBy: owner, body, ...(webhookSecretHash ? { webhookSecretHash } : {}), at });
const created: ConnectorEvent = { type: 'ConnectorCreated', data: { id: ID, createdBy: owner, doc: { name: 'lab', integration: 'Generic', basicCredentialsSetId: 'set-1' }, secrets: {}, at } };
const deleted: ConnectorEvent = { type: 'ConnectorDeleted', data: { id: ID, at } };
const failing: ConnectorEvent = { type: 'ConnectorStatusChanged', data: { id: ID, status: 'failing', error: 'connect ECONNREFUSED', at } };

connectors('given no connector, when a ChirpStack one is created, then its API token and webhook secret hash go to secrets and the doc keeps neither', () => {
  const body = { _id: 'x', name: 'cs', integration: 'ChirpStack', status: 'ok', webhookSecret: 'clear', chirpstack: { url: 'https://cs.example', apiToken: 'tok' } };
  given([])
    .when(create(body, hash))
    .then([
      {
        type: 'ConnectorCreated',
        data: { id: ID, createdBy: owner, doc: { name: 'cs', integration: 'ChirpStack', chirpstack: { url: 'https://cs.example' } }, secrets: { settings: { 'chirpstack.apiToken': 'tok' }, webhookSecretHash: hash }, at },
      },
    ]);
  assert.equal(body.chirpstack, { url: 'https://cs.example', apiToken: 'tok' }, 'the command body is left as sent');
});

connectors('given no connector, when each network server integration is created, then its own write-only setting goes to secrets', () => {
  const cases: [string, string, string][] = [
    ['TheThingsStack', 'theThingsStack', 'apiKey'],
    ['Loriot', 'loriot', 'token'],
    ['ThingPark', 'thingPark', 'clientSecret'],
  ];
  for (const [integration, field, secret] of cases) {
    const [event] = given([]).when(create({ integration, [field]: { url: 'https://ns.example', [secret]: 's3cret' } }, hash)).events();
    assert.equal(event, {
      type: 'ConnectorCreated',
      data: { id: ID, createdBy: owner, doc: { integration, [field]: { url: 'https://ns.example' } }, secrets: { settings: { [`${field}.${secret}`]: 's3cret' }, webhookSecretHash: hash }, at },
    });
  }
});

connectors('given no connector, when a Generic one on the internal broker is created with a webhook secret hash, then it keeps no hash: Generic takes no webhook', () => {
  given([]).when(create({ name: 'lab', integration: 'Generic', basicCredentialsSetId: 'set-1' }, hash)).then([created]);
  const [event] = given([]).when(create({ integration: 'GenericHttp' }, hash)).events();
  assert.equal(event?.type === 'ConnectorCreated' && event.data.secrets, { webhookSecretHash: hash }, 'GenericHttp does');
});

connectors('given no connector, when a Generic one on an external broker is created, then the broker password goes to secrets and a valid uplink filter is kept', () => {
  const body = { integration: 'Generic', mqttServer: { host: 'broker.example', port: 8883, password: 'pw' }, downlink: { topic: 'plant/down' }, uplink: { topic: 'plant/+/up/#' } };
  given([])
    .when(create(body))
    .then([
      {
        type: 'ConnectorCreated',
        data: { id: ID, createdBy: owner, doc: { integration: 'Generic', mqttServer: { host: 'broker.example', port: 8883 }, downlink: { topic: 'plant/down' }, uplink: { topic: 'plant/+/up/#' } }, secrets: { mqttPassword: 'pw' }, at },
      },
    ]);
});

connectors('given a connector, live or deleted, when it is created again, then a conflict names it', () => {
  for (const events of [[created], [created, deleted]]) {
    given(events).when(create({ integration: 'GenericHttp' })).thenThrows(ConflictError, `Connector ${ID} already exists`);
  }
});

connectors('when the integration is not one of the catalog, then a validation error lists them', () => {
  for (const integration of [undefined, 'chirpstack', 'MQTT']) {
    given([]).when(create({ integration })).thenThrows(ValidationError, 'ERR - integration must be one of ChirpStack, TheThingsStack, Generic, GenericHttp, Loriot, ThingPark');
  }
});

connectors("when the body carries another integration's settings, then a validation error names whose they are", () => {
  given([])
    .when(create({ integration: 'ChirpStack', chirpstack: { url: 'u' }, theThingsStack: { url: 'u' } }))
    .thenThrows(ValidationError, 'ERR - theThingsStack is a setting of the TheThingsStack integration, not of ChirpStack');
  given([])
    .when(create({ integration: 'GenericHttp', loriot: {} }))
    .thenThrows(ValidationError, 'ERR - loriot is a setting of the Loriot integration, not of GenericHttp');
});

connectors("when a network server integration comes without its settings object, then a validation error says it is required", () => {
  given([]).when(create({ integration: 'ChirpStack' })).thenThrows(ValidationError, 'ERR - chirpstack is required for the ChirpStack integration');
  given([]).when(create({ integration: 'ThingPark', thingPark: null })).thenThrows(ValidationError, 'ERR - thingPark is required for the ThingPark integration');
});

connectors('when a Generic connector names both brokers or neither, then a validation error asks for exactly one', () => {
  const message = 'ERR - basicCredentialsSetId or mqttServer must be given, exactly one: basicCredentialsSetId for the internal broker, mqttServer with downlink.topic for an external broker';
  given([]).when(create({ integration: 'Generic' })).thenThrows(ValidationError, message);
  given([]).when(create({ integration: 'Generic', basicCredentialsSetId: 'set-1', mqttServer: { host: 'h' }, downlink: { topic: 't' } })).thenThrows(ValidationError, message);
});

connectors('when a Generic connector on an external broker has no downlink topic, or one with a wildcard, NUL or a leading $, then a validation error names downlink.topic', () => {
  const external = (downlink: unknown) => create({ integration: 'Generic', mqttServer: { host: 'h' }, ...(downlink === undefined ? {} : { downlink }) });
  for (const downlink of [undefined, {}, { topic: '' }, { topic: 7 }]) {
    given([]).when(external(downlink)).thenThrows(ValidationError, 'ERR - downlink.topic is required with an external broker');
  }
  for (const topic of ['plant/+/down', 'plant/#', 'plant\u0000down', '$SYS/down']) {
    given([]).when(external({ topic })).thenThrows(ValidationError, 'ERR - downlink.topic must be a topic without +, #, NUL or a leading $');
  }
  assert.is(given([]).when(external({ topic: 'plant/$down' })).events().length, 1, 'a $ past the start is a topic like any');
});

connectors('when a Generic connector on an external broker has an uplink topic that is no MQTT filter, then a validation error names uplink.topic', () => {
  const message = 'ERR - uplink.topic must be an MQTT topic filter: + alone in a level, # alone in the last level, no NUL';
  for (const topic of ['', 'plant/a+/up', 'plant/#/up', 'plant/up#', 'plant\u0000up', 42]) {
    given([])
      .when(create({ integration: 'Generic', mqttServer: { host: 'h' }, downlink: { topic: 'd' }, uplink: { topic } }))
      .thenThrows(ValidationError, message);
  }
});

connectors('given a connector, when a failure is reported, then ConnectorStatusChanged with the error; reported again with another error, then nothing', () => {
  given([created]).when({ type: 'ReportStatus', id: ID, status: 'failing', error: 'connect ECONNREFUSED', at }).then([failing]);
  given([created, failing]).when({ type: 'ReportStatus', id: ID, status: 'failing', error: 'timed out', at }).then([]);
});

connectors('given a failing connector, when it works again, then ConnectorStatusChanged to ok without an error; given a healthy one, then nothing', () => {
  given([created, failing]).when({ type: 'ReportStatus', id: ID, status: 'ok', at }).then([{ type: 'ConnectorStatusChanged', data: { id: ID, status: 'ok', at } }]);
  given([created]).when({ type: 'ReportStatus', id: ID, status: 'ok', at }).then([]);
  const recovered: ConnectorEvent = { type: 'ConnectorStatusChanged', data: { id: ID, status: 'ok', at } };
  given([created, failing, recovered]).when({ type: 'ReportStatus', id: ID, status: 'ok', at }).then([]);
});

connectors('given no connector or a deleted one, when a status is reported, then nothing: a deleted connector has no health', () => {
  given([]).when({ type: 'ReportStatus', id: ID, status: 'failing', error: 'x', at }).then([]);
  given([created, deleted]).when({ type: 'ReportStatus', id: ID, status: 'failing', error: 'x', at }).then([]);
});

connectors('given a connector, when it is deleted, then ConnectorDeleted; given none or a deleted one, then Connector not found', () => {
  given([created]).when({ type: 'DeleteConnector', id: ID, at }).then([deleted]);
  given([]).when({ type: 'DeleteConnector', id: ID, at }).thenThrows(NotFoundError, CONNECTOR_NOT_FOUND);
  given([created, deleted]).when({ type: 'DeleteConnector', id: ID, at }).thenThrows(NotFoundError, CONNECTOR_NOT_FOUND);
  assert.is(CONNECTOR_NOT_FOUND, 'Connector not found');
});

connectors('given a retired DownlinkQueued in the stream, when folded, then the connector is as it was', () => {
  const retired: ConnectorEvent = { type: 'DownlinkQueued', data: { id: ID, topic: 'svc/push/v1/set-1/valve', message: 'open', at } };
  assert.equal(given([created, failing, retired]).state, given([created, failing]).state);
});

connectors.run();
