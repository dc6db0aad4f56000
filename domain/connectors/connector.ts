import type { Decider } from '../shared/decider.js';
import type { EventSchemas } from '../eventstore/schemas.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { INTEGRATIONS, isIntegration, type IntegrationName } from '../integrations/catalog.js';

/**
 * A connector: how devices of one integration reach the platform, and how
 * commands reach them. `integration` is one of the closed set in
 * `domain/integrations/catalog.ts`; each has its settings object (its shape
 * is a schema in the OpenAPI document). Write-only settings (API tokens and
 * keys, broker passwords) go to `secrets` and are never returned. Connectors
 * whose network server calls the platform get a webhook secret, returned
 * once at creation; only its SHA-256 is kept.
 */
export type ConnectorDoc = Record<string, unknown>;
export interface ConnectorSecrets {
  mqttPassword?: string;
  /** Write-only settings by their path (`chirpstack.apiToken`). */
  settings?: Record<string, string>;
  /** SHA-256 (hex) of the secret the network server sends as `Authorization: Bearer <secret>`. */
  webhookSecretHash?: string;
}

/** Each integration's settings object, and the settings in it that are write-only. */
export const SETTINGS: Record<IntegrationName, { field: string | null; secrets: string[]; webhook: boolean }> = {
  ChirpStack: { field: 'chirpstack', secrets: ['apiToken'], webhook: true },
  TheThingsStack: { field: 'theThingsStack', secrets: ['apiKey'], webhook: true },
  Loriot: { field: 'loriot', secrets: ['token'], webhook: true },
  ThingPark: { field: 'thingPark', secrets: ['clientSecret'], webhook: true },
  Generic: { field: null, secrets: [], webhook: false },
  GenericHttp: { field: null, secrets: [], webhook: true },
};

export type ConnectorEvent =
  | { type: 'ConnectorCreated'; data: { id: string; createdBy: string; doc: ConnectorDoc; secrets: ConnectorSecrets; at: string } }
  /** An outbound connection of the connector (an external broker, a network server's API) started failing, or works again. */
  | { type: 'ConnectorStatusChanged'; data: { id: string; status: 'ok' | 'failing'; error?: string; at: string } }
  | { type: 'ConnectorDeleted'; data: { id: string; at: string } }
  | { type: 'DownlinkQueued'; data: { id: string; topic: string; message: string; at: string } };

/**
 * Schema versions of connector events (see `domain/eventstore/schemas.ts`).
 * `DownlinkQueued` is retired: a Generic connector's downlink of earlier
 * releases, published by a reactor those releases had. Commands have their
 * own streams now (`domain/commands`); these events stay readable in the
 * audit log, and no read model applies them.
 */
export const connectorSchemas: EventSchemas = {
  DownlinkQueued: { version: 1, upcast: {}, retired: 'a Generic downlink of earlier releases; commands are on their own streams now, and no read model applies it' },
};

export type ConnectorCommand =
  | { type: 'CreateConnector'; id: string; createdBy: string; body: ConnectorDoc; webhookSecretHash?: string; at: string }
  | { type: 'ReportStatus'; id: string; status: 'ok' | 'failing'; error?: string; at: string }
  | { type: 'DeleteConnector'; id: string; at: string };

export type ConnectorState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; doc: ConnectorDoc; health: 'ok' | 'failing' };

/** Where a generic connector's downlink goes with the internal broker: the credentials set's push topic. */
export const pushTopic = (basicCredentialsSetId: string, mqttTopic: string) => `svc/push/v1/${basicCredentialsSetId}/${mqttTopic}`;

export const connectorStream = (id: string) => `connector-${id}`;

/**
 * Where a Generic connector's downlink goes: with the internal broker, the
 * credentials set's push topic `svc/push/v1/<setId>/<mqttTopic>`; with an
 * external broker, `<downlink.topic>/<mqttTopic>` on that broker.
 */
export function publishTopicOf(doc: ConnectorDoc, mqttTopic: string): string {
  if (doc.integration !== 'Generic') throw ValidationError.field('integrationName', "Generic does not match the connector's integration");
  const levels = mqttTopic.split('/');
  if (levels.some((l) => l === '') || /[+#$\u0000]/.test(mqttTopic)) throw ValidationError.field('data.mqttTopic', 'must be a topic without empty levels, +, #, $ or NUL');
  if (typeof doc.basicCredentialsSetId === 'string') return pushTopic(doc.basicCredentialsSetId, mqttTopic);
  const root = (doc.downlink as { topic?: unknown } | undefined)?.topic;
  if (typeof root !== 'string' || root === '') throw ValidationError.field('connectorId', 'names a connector without a downlink topic');
  return `${root.replace(/\/+$/, '')}/${mqttTopic}`;
}
export const CONNECTOR_NOT_FOUND = 'Connector not found';

/** An MQTT topic filter: `+` fills one whole level, `#` the whole last level. */
export function isTopicFilter(filter: unknown): filter is string {
  if (typeof filter !== 'string' || filter === '' || filter.includes('\u0000')) return false;
  const levels = filter.split('/');
  return levels.every((level, i) => (level.includes('+') ? level === '+' : level.includes('#') ? level === '#' && i === levels.length - 1 : true));
}

/** Splits the body into what is stored and returned, and the secrets. */
export function checkConnector(body: ConnectorDoc): { doc: ConnectorDoc; secrets: ConnectorSecrets } {
  const doc: ConnectorDoc = structuredClone(body);
  delete doc._id;
  delete doc.webhookSecret;
  delete doc.status;
  const secrets: ConnectorSecrets = {};
  if (!isIntegration(doc.integration)) throw ValidationError.field('integration', `must be one of ${INTEGRATIONS.join(', ')}`);
  const integration = doc.integration;
  for (const [other, { field }] of Object.entries(SETTINGS)) {
    if (field && other !== integration && doc[field] !== undefined) throw ValidationError.field(field, `is a setting of the ${other} integration, not of ${integration}`);
  }
  const { field, secrets: secretNames } = SETTINGS[integration];
  if (field) {
    const settings = doc[field] as Record<string, unknown> | undefined;
    if (typeof settings !== 'object' || settings === null) throw ValidationError.field(field, `is required for the ${integration} integration`);
    for (const name of secretNames) {
      if (typeof settings[name] === 'string') {
        (secrets.settings ??= {})[`${field}.${name}`] = settings[name] as string;
        delete settings[name];
      }
    }
  }
  if (doc.integration === 'Generic') {
    const internal = doc.basicCredentialsSetId !== undefined;
    const external = doc.mqttServer !== undefined;
    if (internal === external) {
      throw ValidationError.field('basicCredentialsSetId', 'or mqttServer must be given, exactly one: basicCredentialsSetId for the internal broker, mqttServer with downlink.topic for an external broker');
    }
    if (external) {
      const downlink = doc.downlink as { topic?: unknown } | undefined;
      if (typeof downlink?.topic !== 'string' || downlink.topic === '') throw ValidationError.field('downlink.topic', 'is required with an external broker');
      if (/[+#\u0000]/.test(downlink.topic) || downlink.topic.startsWith('$')) throw ValidationError.field('downlink.topic', 'must be a topic without +, #, NUL or a leading $');
      const uplink = (doc.uplink as { topic?: unknown } | undefined)?.topic;
      if (uplink !== undefined && !isTopicFilter(uplink)) {
        throw ValidationError.field('uplink.topic', 'must be an MQTT topic filter: + alone in a level, # alone in the last level, no NUL');
      }
    }
  }
  const server = doc.mqttServer as { password?: unknown } | undefined;
  if (server && typeof server === 'object' && typeof server.password === 'string') {
    secrets.mqttPassword = server.password;
    delete server.password;
  }
  return { doc, secrets };
}

export const connectorDecider: Decider<ConnectorCommand, ConnectorState, ConnectorEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'CreateConnector': {
        if (state.status !== 'none') throw new ConflictError(`Connector ${command.id} already exists`);
        const { doc, secrets } = checkConnector(command.body);
        if (command.webhookSecretHash && SETTINGS[doc.integration as IntegrationName].webhook) secrets.webhookSecretHash = command.webhookSecretHash;
        return [{ type: 'ConnectorCreated', data: { id: command.id, createdBy: command.createdBy, doc, secrets, at: command.at } }];
      }
      case 'ReportStatus':
        // Only a change is a fact worth keeping: a connection failing a thousand times is one event.
        if (state.status !== 'active' || state.health === command.status) return [];
        return [{ type: 'ConnectorStatusChanged', data: { id: command.id, status: command.status, ...(command.error ? { error: command.error } : {}), at: command.at } }];
      case 'DeleteConnector':
        if (state.status !== 'active') throw new NotFoundError(CONNECTOR_NOT_FOUND);
        return [{ type: 'ConnectorDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'ConnectorCreated':
        return { status: 'active', id: event.data.id, doc: event.data.doc, health: 'ok' };
      case 'ConnectorStatusChanged':
        return state.status === 'active' ? { ...state, health: event.data.status } : state;
      case 'ConnectorDeleted':
        return { status: 'deleted' };
      case 'DownlinkQueued':
        return state;
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
