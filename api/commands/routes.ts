import { Router } from 'express';
import type { Deps } from '../deps.js';
import { readModelsInclude, requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess } from '../access.js';
import { BadGatewayError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { COMMAND_NOT_FOUND, commandDecider, commandStream, requestOf, type CommandStatus } from '../../domain/commands/command.js';
import { COMMANDS, INTEGRATIONS, type IntegrationName } from '../../domain/integrations/catalog.js';
import { CONNECTOR_NOT_FOUND, SETTINGS, publishTopicOf } from '../../domain/connectors/connector.js';
import { DEVICE_NOT_FOUND } from '../../domain/devices/device.js';
import type { Registry } from '../../ingest/registry.js';
import { INTEGRATION_MODULES } from '../../reactors/integrations/index.js';
import type { CommandsTable } from '../../projections/commands.js';
import { schemaChecks, type OpenApiDocument } from '../openapi.js';
import { deviceCommands, type DownlinkEncoder } from './send.js';
import type { DeviceCommandInput } from '../../domain/commands/command.js';

/** How long a command request waits for the network server's answer before it answers 202 `pending`. */
export const COMMAND_WAIT_MS = 8_000;

/** A command as clients see it. */
export function presentCommand(r: CommandsTable) {
  return {
    commandId: r.id,
    command: r.command,
    integration: r.integration,
    status: r.status,
    ...(r.device_id ? { iotnodeId: r.device_id } : {}),
    connectorId: r.connector_id,
    ...(r.f_port !== null ? { fPort: r.f_port } : {}),
    ...(r.hex !== null ? { data: r.hex } : {}),
    ...(r.confirmed !== null ? { confirmed: r.confirmed } : {}),
    ...(r.reference !== null ? { reference: r.reference } : {}),
    ...(r.network_item_id !== null ? { networkItemId: r.network_item_id } : {}),
    ...(r.error !== null ? { error: r.error } : {}),
    attempts: r.attempts,
    ...(r.retry_at ? { retryAt: r.retry_at.toISOString() } : {}),
    requestedBy: r.requested_by,
    requestedAt: r.requested_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

/** Statuses that end the wait of a request: the network server answered. */
const ANSWERED = new Set<CommandStatus>(['queued', 'done', 'published', 'sent', 'acked', 'failed', 'expired', 'flushed', 'refused']);

/**
 * Commands: `PUT /api/iotnodes/command` (a device's), `PUT /api/connectors/command`
 * (a connector's), the downlink queue of a device, one command's status, and
 * the integrations with the commands each takes. A command is stored as an
 * event, then delivered by the command reactor; the request waits (at most
 * `waitMs`, `COMMAND_WAIT_MS` by default) for the network server's answer: 202 queued or done,
 * 200 with the items for a read, 502 with the server's message for a
 * refusal, 202 `pending` when it could not answer yet (the reactor keeps
 * trying).
 */
export function commandRoutes(deps: Deps, registry: Registry, openapi: OpenApiDocument, encoder: DownlinkEncoder, waitMs = COMMAND_WAIT_MS): Router {
  const router = Router();
  const check = schemaChecks(openapi);
  const send = deviceCommands(deps, registry, openapi, encoder);

  /** Waits for the command's answer in the read model. */
  const outcomeOf = async (id: string, waitMs: number): Promise<CommandsTable> => {
    const until = Date.now() + waitMs;
    for (let pause = 10; ; pause = Math.min(pause * 2, 100)) {
      const row = await deps.db.selectFrom('commands').selectAll().where('id', '=', id).executeTakeFirst();
      if (row && (ANSWERED.has(row.status) || Date.now() >= until)) return row;
      if (!row && Date.now() >= until) throw new NotFoundError(COMMAND_NOT_FOUND);
      await new Promise((r) => setTimeout(r, pause));
    }
  };

  const answer = async (res: import('express').Response, id: string, integration: string) => {
    const row = await outcomeOf(id, waitMs);
    if (row.status === 'refused' || row.status === 'failed') throw new BadGatewayError(`ERR - ${integration} did not take the command: ${row.error ?? 'no reason given'} (command ${id})`);
    if (row.kind === 'read' && row.status === 'done') return res.status(200).json({ commandId: id, status: row.status, items: row.items ?? [] });
    if (row.kind === 'read') throw new BadGatewayError(`ERR - ${integration} did not answer in time: ${row.error ?? 'no answer yet'} (command ${id})`);
    res.status(202).json({ commandId: id, status: ANSWERED.has(row.status) ? row.status : 'pending' });
  };

  router.put('/api/iotnodes/command', async (req, res) => {
    const context = requestContext(deps, req);
    const sent = await send(principalOf(req), req.body as DeviceCommandInput, context, newResourceId());
    if (sent.handled.result) await readModelsInclude(deps, sent.handled.result.position);
    await answer(res, sent.id, sent.integration);
  });

  router.put('/api/connectors/command', async (req, res) => {
    const { command, integrationName, connectorId, data } = req.body as { command: string; integrationName: string; connectorId: string; data: Record<string, unknown> };
    await requireAccess(deps, principalOf(req), connectorId, 'write', CONNECTOR_NOT_FOUND);
    const connector = registry.connector(connectorId);
    if (!connector) throw new NotFoundError(CONNECTOR_NOT_FOUND);
    if (connector.integration !== integrationName) throw ValidationError.field('integrationName', `${integrationName} does not match the connector's integration (${connector.integration})`);
    const integration = connector.integration as IntegrationName;
    const spec = COMMANDS[integration][command];
    if (spec && spec.target !== 'connector') throw ValidationError.field('command', `${command} is a device command: send it with PUT /api/iotnodes/command`);
    if (spec) check(spec.dataSchema, data, 'data');
    const id = newResourceId();
    const context = requestContext(deps, req);
    const request = requestOf(
      { id, deviceId: null, connectorId, integration, command, devEui: null, networkDeviceId: null, data, at: context.now },
      { publishTopic: spec?.kind === 'publish' ? publishTopicOf(connector.doc, String(data.mqttTopic)) : undefined },
    );
    await write(deps, context, commandStream(id), commandDecider, { type: 'RequestCommand', request });
    const row = await outcomeOf(id, waitMs);
    if (row.status === 'refused' || row.status === 'failed') throw new BadGatewayError(`ERR - ${integration} did not take the command: ${row.error ?? 'no reason given'} (command ${id})`);
    res.status(202).json({ commandId: id, status: ANSWERED.has(row.status) ? (row.status === 'published' ? 'queued' : row.status) : 'pending', ...(request.publish ? { topic: request.publish.topic } : {}) });
  });

  router.get('/api/iotnodes/:id/downlinks', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', DEVICE_NOT_FOUND);
    const limit = Number(req.query.limit ?? 100);
    const offset = Number(req.query.offset ?? 0);
    let query = deps.db.selectFrom('commands').selectAll().where('device_id', '=', id).where('kind', '=', 'queue');
    const status = typeof req.query.status === 'string' ? req.query.status.split(',').filter(Boolean) : [];
    if (status.length) query = query.where('status', 'in', status as CommandStatus[]);
    const rows = await query.orderBy('requested_at', 'desc').orderBy('id', 'desc').limit(limit).offset(offset).execute();
    res.json(rows.map(presentCommand));
  });

  router.get('/api/commands/:id', async (req, res) => {
    const id = req.params.id as string;
    const principal = principalOf(req);
    const row = await deps.db
      .selectFrom('commands')
      .selectAll()
      .where('id', '=', id)
      .where((eb) => eb.or([readableBy(principal, 'commands.device_id'), readableBy(principal, 'commands.connector_id')]))
      .executeTakeFirst();
    if (!row) throw new NotFoundError(COMMAND_NOT_FOUND);
    res.json({ ...presentCommand(row), ...(row.items ? { items: row.items } : {}) });
  });

  router.get('/api/integrations', (_req, res) => {
    res.json(
      INTEGRATIONS.map((name) => ({
        name,
        settings: SETTINGS[name].field,
        ...(SETTINGS[name].secrets.length ? { writeOnlySettings: SETTINGS[name].secrets.map((s) => `${SETTINGS[name].field}.${s}`) } : {}),
        ...(INTEGRATION_MODULES[name]?.webhook ? { webhook: `/api/integrations/${INTEGRATION_MODULES[name]!.webhook!.path}/{connectorId}` } : {}),
        commands: Object.entries(COMMANDS[name]).map(([command, spec]) => ({ name: command, kind: spec.kind, target: spec.target, data: `#/components/schemas/${spec.dataSchema}` })),
        available: INTEGRATION_MODULES[name] !== undefined,
      })),
    );
  });

  return router;
}
