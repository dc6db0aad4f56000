import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';

/**
 * A connector: how devices of one integration reach the platform. Only the
 * Generic integration has rules of its own here; other integrations keep
 * their fields as given. Passwords go to `secrets` and are never returned.
 */
export type ConnectorDoc = Record<string, unknown>;
export interface ConnectorSecrets {
  mqttPassword?: string;
}

export type ConnectorEvent =
  | { type: 'ConnectorCreated'; data: { id: string; createdBy: string; doc: ConnectorDoc; secrets: ConnectorSecrets; at: string } }
  | { type: 'ConnectorDeleted'; data: { id: string; at: string } }
  | { type: 'DownlinkQueued'; data: { id: string; topic: string; message: string; at: string } };

export type ConnectorCommand =
  | { type: 'CreateConnector'; id: string; createdBy: string; body: ConnectorDoc; at: string }
  | { type: 'DeleteConnector'; id: string; at: string }
  | { type: 'QueueDownlink'; id: string; mqttTopic: string; message: string; at: string };

export type ConnectorState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; doc: ConnectorDoc };

/** Where a generic connector's downlink goes with the internal broker: the credentials set's push topic. */
export const pushTopic = (basicCredentialsSetId: string, mqttTopic: string) => `svc/push/v1/${basicCredentialsSetId}/${mqttTopic}`;

export const connectorStream = (id: string) => `connector-${id}`;
export const CONNECTOR_NOT_FOUND = 'Connector not found';

/** Splits the body into what is stored and returned, and the secrets. */
export function checkConnector(body: ConnectorDoc): { doc: ConnectorDoc; secrets: ConnectorSecrets } {
  const doc: ConnectorDoc = structuredClone(body);
  delete doc._id;
  const secrets: ConnectorSecrets = {};
  if (doc.integration === 'Generic') {
    const internal = doc.basicCredentialsSetId !== undefined;
    const external = doc.mqttServer !== undefined;
    if (internal === external) {
      throw ValidationError.field('basicCredentialsSetId', 'or mqttServer must be given, exactly one: basicCredentialsSetId for the internal broker, mqttServer with downlink.topic for an external broker');
    }
    if (external) {
      const downlink = doc.downlink as { topic?: unknown } | undefined;
      if (typeof downlink?.topic !== 'string' || downlink.topic === '') throw ValidationError.field('downlink.topic', 'is required with an external broker');
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
        return [{ type: 'ConnectorCreated', data: { id: command.id, createdBy: command.createdBy, doc, secrets, at: command.at } }];
      }
      case 'DeleteConnector':
        if (state.status !== 'active') throw new NotFoundError(CONNECTOR_NOT_FOUND);
        return [{ type: 'ConnectorDeleted', data: { id: command.id, at: command.at } }];
      case 'QueueDownlink': {
        if (state.status !== 'active') throw new NotFoundError(CONNECTOR_NOT_FOUND);
        if (state.doc.integration !== 'Generic') throw ValidationError.field('integrationName', 'Generic does not match the connector\'s integration');
        const setId = state.doc.basicCredentialsSetId;
        if (typeof setId !== 'string') throw ValidationError.field('connectorId', 'uses an external broker; this build sends downlinks through the internal broker only');
        const levels = command.mqttTopic.split('/');
        if (levels.some((l) => l === '') || /[+#$\u0000]/.test(command.mqttTopic)) throw ValidationError.field('data.mqttTopic', 'must be a topic without empty levels, +, #, $ or NUL');
        return [{ type: 'DownlinkQueued', data: { id: command.id, topic: pushTopic(setId, command.mqttTopic), message: command.message, at: command.at } }];
      }
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'ConnectorCreated':
        return { status: 'active', id: event.data.id, doc: event.data.doc };
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
