import { Router } from 'express';
import { hash, timingSafeEqual } from 'node:crypto';
import type { Deps } from '../deps.js';
import { NotFoundError, UnauthorizedError } from '../../domain/shared/errors.js';
import { handle } from '../../domain/shared/decider.js';
import { commandDecider, commandStream, type CommandEvent } from '../../domain/commands/command.js';
import type { ConnectorInfo } from '../../ingest/registry.js';
import type { Ingest } from '../../ingest/index.js';
import { moduleOfWebhook } from '../../reactors/integrations/index.js';
import type { DownlinkMatch, InboundEvent } from '../../reactors/integrations/types.js';
import type { DirectCall, DirectRoute } from '../direct.js';
import { storable } from '../../domain/shared/time.js';
import { derivedId } from '../../domain/shared/ids.js';

const sha256 = (text: string) => hash('sha256', text, 'buffer');

/**
 * The network servers' webhooks: `POST /api/integrations/<integration>/{connectorId}`.
 * Each call is authenticated by the connector's webhook secret, sent as
 * `Authorization: Bearer <secret>` (a missing or wrong one is 401, logged on
 * the connector). What the network server says goes the platform's one way:
 * an uplink through the ingest pipeline (decoded by the device's translators,
 * stored as the device's report, answered once stored), a downlink's fate as
 * an event on its command. An uplink for a device the connector does not
 * know is logged on the connector and stores nothing.
 *
 * What a call does is decided in one place, `webhook`, whichever way the
 * call comes in: directly (`direct`: taken in ahead of the generic pipeline,
 * when it is valid by the OpenAPI document) or through `router` (every other
 * call, which the validator refuses).
 */
export function integrationRoutes(deps: Deps, ingest: Ingest): { router: Router; direct: DirectRoute } {
  const router = Router();
  const take = webhook(deps, ingest);
  router.post('/api/integrations/:integration/:connectorId', async (req, res) => {
    const call: DirectCall = { params: req.params as Record<string, string>, query: req.query as Record<string, unknown>, body: req.body, headers: req.headers, remoteAddress: req.socket.remoteAddress, id: req.id, log: req.log };
    res.status(200).json(await take(call));
  });
  return { router, direct: { method: 'POST', template: '/api/integrations/{integration}/{connectorId}', handle: take } };
}

/** One webhook call, its answer's body (`{stored}`: reports and downlink events stored), or an error for the one error handler. */
function webhook(deps: Deps, ingest: Ingest): (call: DirectCall) => Promise<{ stored: number }> {
  /** The connector the call names, if the call proves it knows its webhook secret. */
  // In a cluster, a connector or a binding another node has just written may not be in this node's registry yet: looked up again once it is.
  const sync = () => deps.projections.sync(deps.config.projectionWaitMs);
  const authenticate = async (call: DirectCall, path: string): Promise<ConnectorInfo> => {
    const id = call.params.connectorId as string;
    let connector = ingest.registry.connector(id);
    if (!connector) {
      await sync();
      connector = ingest.registry.connector(id);
    }
    const module = moduleOfWebhook(path);
    // An unknown connector answers as a wrong secret does: the webhook reveals nothing to a caller without one.
    if (!connector || !module || connector.integration !== module.name || !connector.secrets.webhookSecretHash) {
      call.log.warn({ connectorId: call.params.connectorId, path }, 'webhook call for an unknown connector');
      throw new UnauthorizedError();
    }
    const header = call.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const expected = Buffer.from(connector.secrets.webhookSecretHash, 'hex');
    if (!match || !timingSafeEqual(sha256(match[1]!), expected)) {
      ingest.logs.write(
        { resourceId: connector.id, resourceType: 'connector', type: 'warning', priority: 'high', category: 'access', message: `Webhook call refused: ${match ? 'wrong' : 'no'} bearer secret (from ${call.remoteAddress ?? 'unknown'})` },
        'webhook refused',
      );
      throw new UnauthorizedError();
    }
    return connector;
  };

  return async (call) => {
    const path = call.params.integration!;
    const connector = await authenticate(call, path);
    const module = moduleOfWebhook(path)!;
    let events: InboundEvent[];
    try {
      events = module.webhook!.parse(call.body, call.query);
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
    let synced = false;
    for (const event of events) {
      if (event.type === 'ignored') continue;
      let deviceId = ingest.registry.deviceOfNetwork(connector.id, event.device);
      if (!deviceId && !synced) {
        synced = true;
        await sync();
        deviceId = ingest.registry.deviceOfNetwork(connector.id, event.device);
      }
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
            // The network server's time, when it is one the platform stores (a year 0 would never reach the read models).
            receivedAt: event.receivedAt && storable(Date.parse(event.receivedAt)) ? event.receivedAt : now,
            correlationId: `integration:${connector.id}:${messageKey(event.messageId)}`,
            dedupKey: `${connector.id}\u0000${messageKey(event.messageId)}`,
          });
          stored++;
          break;
        }
        case 'downlinkSent':
        case 'downlinkAcked':
        case 'downlinkFailed': {
          const context = { actor: `connector:${connector.id}`, correlationId: call.id, now };
          // Derived from the network server's report, so a report delivered again is the same event, found recorded
          // (in the read model, or on a candidate's stream while the read model has yet to show it) instead of moving
          // the next command that matches: recorded once, answered as the first delivery was.
          const outcomeId = event.messageId ? derivedId('downlink outcome', connector.id, event.type, event.messageId) : undefined;
          // A command id the network server carries back must still name a command of this connector.
          const mine = deps.db.selectFrom('commands').select('id').where('connector_id', '=', connector.id);
          const candidates = event.commandId
            ? (await mine.where('id', '=', event.commandId).execute()).map((r) => r.id)
            : event.networkItemId
              ? (await mine.where('network_item_id', '=', event.networkItemId).execute()).map((r) => r.id)
              : event.match
                ? await downlinksMatching(deps, connector.id, deviceId, event.match)
                : [];
          // Looked up after the candidates, never before: the read model records an outcome and moves its command in one
          // transaction, so a repeat either finds the outcome here or still has its command among the candidates (whose
          // stream shows the outcome below). Looked up before, a repeat could miss both and record it on the next command.
          if (outcomeId && (await deps.db.selectFrom('command_outcomes').select('id').where('id', '=', outcomeId).executeTakeFirst())) {
            stored++;
            break;
          }
          let recorded = false;
          // The first candidate whose stream takes the event: one another event already moved changes nothing, so the next is tried.
          for (const commandId of candidates) {
            const outcome: Exclude<CommandEvent, { type: 'CommandRequested' }> =
              event.type === 'downlinkSent'
                ? { type: 'DownlinkSent', data: { id: commandId, at: now, ...(event.fCntDown !== undefined ? { fCntDown: event.fCntDown } : {}), ...(event.gatewayId ? { gatewayId: event.gatewayId } : {}) } }
                : event.type === 'downlinkAcked'
                  ? { type: 'DownlinkAcked', data: { id: commandId, at: now } }
                  : { type: 'DownlinkFailed', data: { id: commandId, at: now, reason: event.reason ?? 'failed at the network server', ...(event.expired ? { expired: true } : {}) } };
            try {
              const handled = await handle(deps.store, commandStream(commandId), commandDecider, { type: 'RecordOutcome', event: outcome }, context, { retries: 5, ...(outcomeId ? { eventIds: [outcomeId] } : {}) });
              if (handled.result) {
                stored++;
                recorded = true;
                break;
              }
            } catch (error) {
              if (!(error instanceof NotFoundError)) throw error;
            }
            if (outcomeId && (await deps.store.readStream(commandStream(commandId))).some((e) => e.id === outcomeId)) {
              stored++;
              recorded = true;
              break;
            }
            if (!event.match) break;
          }
          if (!candidates.length) {
            const which = event.commandId ? `id ${event.commandId}` : event.networkItemId ? `queue item ${event.networkItemId}` : event.match ? describeMatch(event.match) : 'queue item (none given)';
            log(`Downlink event for ${named} ignored: no command of this connector has ${which}`, 'info', 'command');
          } else if (!recorded && event.match) {
            log(`Downlink event for ${named} changed nothing: ${describeMatch(event.match)} had already moved past it`, 'info', 'command');
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
    return { stored };
  };
}

/**
 * The device's downlinks a network server's event without an item id may
 * mean, likeliest first: for a sent or failed report, its queued ones with the
 * port and payload the report gives, oldest first (a queue is sent in order);
 * for an uplink's ACK bit, its confirmed ones sent, latest first, then those
 * still queued (the report of their sending may be late or lost).
 */
async function downlinksMatching(deps: Deps, connectorId: string, deviceId: string, match: DownlinkMatch): Promise<string[]> {
  const base = deps.db.selectFrom('commands').select('id').where('connector_id', '=', connectorId).where('device_id', '=', deviceId).where('kind', '=', 'queue');
  if ('lastConfirmed' in match) {
    const sent = await base.where('status', '=', 'sent').where('confirmed', '=', true).orderBy('requested_at', 'desc').orderBy('id', 'desc').limit(10).execute();
    const queued = await base.where('status', '=', 'queued').where('confirmed', '=', true).orderBy('requested_at', 'asc').orderBy('id', 'asc').limit(10).execute();
    return [...sent, ...queued].map((r) => r.id);
  }
  let query = base.where('status', '=', 'queued');
  if (match.queued.fPort !== undefined) query = query.where('f_port', '=', match.queued.fPort);
  if (match.queued.hex !== undefined) query = query.where('hex', '=', match.queued.hex);
  return (await query.orderBy('requested_at', 'asc').orderBy('id', 'asc').limit(20).execute()).map((r) => r.id);
}

const describeMatch = (match: DownlinkMatch): string =>
  'lastConfirmed' in match
    ? 'a confirmed downlink sent or queued'
    : `a queued downlink${match.queued.fPort !== undefined ? ` on port ${match.queued.fPort}` : ''}${match.queued.hex !== undefined ? ` with payload ${match.queued.hex.slice(0, 64)}` : ''}`;

/**
 * A network server's message id as the platform keys it: as sent up to 256 bytes, otherwise its SHA-256. It goes
 * into the report's correlation id, an indexed key of the event log (an index entry holds about 2,700 bytes).
 */
const messageKey = (id: string): string => (Buffer.byteLength(id) <= 256 ? id : `sha256:${hash('sha256', id)}`);
