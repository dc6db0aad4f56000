import { Router, type Request } from 'express';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Deps } from '../deps.js';
import { NotFoundError, UnauthorizedError } from '../../domain/shared/errors.js';
import { handle } from '../../domain/shared/decider.js';
import { commandDecider, commandStream, type CommandEvent } from '../../domain/commands/command.js';
import type { ConnectorInfo } from '../../ingest/registry.js';
import type { Ingest } from '../../ingest/index.js';
import { moduleOfWebhook } from '../../reactors/integrations/index.js';
import type { InboundEvent } from '../../reactors/integrations/types.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest();

/**
 * The network servers' webhooks: `POST /api/integrations/<integration>/{connectorId}`.
 * Each call is authenticated by the connector's webhook secret, sent as
 * `Authorization: Bearer <secret>` (a missing or wrong one is 401, logged on
 * the connector). What the network server says goes the platform's one way:
 * an uplink through the ingest pipeline (decoded by the device's translators,
 * stored as the device's report, answered once stored), a downlink's fate as
 * an event on its command. An uplink for a device the connector does not
 * know is logged on the connector and stores nothing.
 */
export function integrationRoutes(deps: Deps, ingest: Ingest): Router {
  const router = Router();

  /** The connector the call names, if the call proves it knows its webhook secret. */
  const authenticate = (req: Request, path: string): ConnectorInfo => {
    const connector = ingest.registry.connector(req.params.connectorId as string);
    const module = moduleOfWebhook(path);
    // An unknown connector answers as a wrong secret does: the webhook reveals nothing to a caller without one.
    if (!connector || !module || connector.integration !== module.name || !connector.secrets.webhookSecretHash) {
      req.log.warn({ connectorId: req.params.connectorId, path }, 'webhook call for an unknown connector');
      throw new UnauthorizedError();
    }
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const expected = Buffer.from(connector.secrets.webhookSecretHash, 'hex');
    if (!match || !timingSafeEqual(sha256(match[1]!), expected)) {
      ingest.logs.write(
        { resourceId: connector.id, resourceType: 'connector', type: 'warning', priority: 'high', category: 'access', message: `Webhook call refused: ${match ? 'wrong' : 'no'} bearer secret (from ${req.socket.remoteAddress ?? 'unknown'})` },
        'webhook refused',
      );
      throw new UnauthorizedError();
    }
    return connector;
  };

  router.post('/api/integrations/:integration/:connectorId', async (req, res) => {
    const path = req.params.integration as string;
    const connector = authenticate(req, path);
    const module = moduleOfWebhook(path)!;
    let events: InboundEvent[];
    try {
      events = module.webhook!.parse(req.body, req.query as Record<string, unknown>);
    } catch (error) {
      ingest.logs.write(
        { resourceId: connector.id, resourceType: 'connector', type: 'warning', priority: 'medium', category: 'update', message: `Webhook call refused: ${(error as Error).message}` },
        'webhook malformed',
      );
      throw error;
    }
    const log = (message: string, type: 'info' | 'warning' | 'error' = 'warning', category: 'update' | 'command' | 'status' | 'system' = 'update') =>
      ingest.logs.write({ resourceId: connector.id, resourceType: 'connector', type, priority: type === 'info' ? 'low' : 'medium', category, message }, message.slice(0, 60));
    let stored = 0;
    for (const event of events) {
      if (event.type === 'ignored') continue;
      const deviceId = ingest.registry.deviceOfNetwork(connector.id, event.device);
      const named = event.device.devEui ? `devEui ${event.device.devEui}` : event.device.secret ? `secret ${event.device.secret.slice(0, 200)}` : `device id ${event.device.networkDeviceId}`;
      if (!deviceId) {
        log(`${event.type === 'uplink' ? 'Uplink' : 'Event'} for ${named} ignored: no iotnode of this connector has it; set the iotnode's connector and ${event.device.secret ? 'secret' : 'devEui'}`);
        continue;
      }
      const now = deps.clock().toISOString();
      switch (event.type) {
        case 'uplink': {
          const payload: Record<string, unknown> = { ...(event.fields ?? {}) };
          if (event.encoded) payload.encodedData = event.encoded;
          if (Object.keys(event.radio).length) payload.radio = event.radio;
          await ingest.report({
            deviceId,
            connectorId: connector.id,
            topic: `integration:${connector.integration}/${connector.id}`,
            payload,
            receivedAt: event.receivedAt ?? now,
            correlationId: `integration:${connector.id}:${event.messageId}`,
            dedupKey: `${connector.id}\u0000${event.messageId}`,
          });
          stored++;
          break;
        }
        case 'downlinkSent':
        case 'downlinkAcked':
        case 'downlinkFailed': {
          const commandId = event.commandId ?? (event.networkItemId ? (await deps.db.selectFrom('commands').select('id').where('connector_id', '=', connector.id).where('network_item_id', '=', event.networkItemId).executeTakeFirst())?.id : undefined);
          if (!commandId) {
            log(`Downlink event for ${named} ignored: no command of this connector has queue item ${event.networkItemId ?? '(none given)'}`, 'info', 'command');
            break;
          }
          const outcome: Exclude<CommandEvent, { type: 'CommandRequested' }> =
            event.type === 'downlinkSent'
              ? { type: 'DownlinkSent', data: { id: commandId, at: now, ...(event.fCntDown !== undefined ? { fCntDown: event.fCntDown } : {}), ...(event.gatewayId ? { gatewayId: event.gatewayId } : {}) } }
              : event.type === 'downlinkAcked'
                ? { type: 'DownlinkAcked', data: { id: commandId, at: now } }
                : { type: 'DownlinkFailed', data: { id: commandId, at: now, reason: event.reason ?? 'failed at the network server', ...(event.expired ? { expired: true } : {}) } };
          const context = { actor: `connector:${connector.id}`, correlationId: req.id, now };
          try {
            const handled = await handle(deps.store, commandStream(commandId), commandDecider, { type: 'RecordOutcome', event: outcome }, context, { retries: 5 });
            if (handled.result) stored++;
          } catch (error) {
            if (!(error instanceof NotFoundError)) throw error;
          }
          break;
        }
        case 'note':
          ingest.logs.write({ resourceId: deviceId, resourceType: 'device', type: event.level, priority: 'low', category: event.category, message: event.message.slice(0, 2000) }, `note ${event.category}`);
          break;
        default: {
          const _: never = event;
          return _;
        }
      }
    }
    res.status(200).json({ stored });
  });

  return router;
}
