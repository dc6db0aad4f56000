import type { Deps } from '../deps.js';
import { sql } from 'kysely';
import { requireAccess, requireReference, writableBy } from '../access.js';
import type { Principal } from '../../domain/access/principal.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { handle, type CommandContext, type Handled } from '../../domain/shared/decider.js';
import { checkFPort, commandDecider, commandStream, requestOf, type CommandEvent, type CommandState, type DeviceCommandInput, type SentCommand } from '../../domain/commands/command.js';
import { COMMANDS, INTEGRATIONS, isIntegration, type IntegrationName } from '../../domain/integrations/catalog.js';
import { DEVICE_NOT_FOUND } from '../../domain/devices/device.js';
import type { ConnectorInfo, Registry } from '../../ingest/registry.js';
import { schemaChecks, type OpenApiDocument } from '../openapi.js';

/** Encodes a downlink's object with the device's translator (its `encodeDownlink`). */
export interface DownlinkEncoder {
  encodeDownlink(deviceId: string, data: Record<string, unknown>, fPort: number | undefined, field: string): Promise<{ hexEncoded: string; fPort: number }>;
}

/** How many connectors a refusal names when the caller may use several. */
const MAX_NAMED = 10;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The object a queue command asks the device's translator to encode, and where it and its port sit in `data`. */
function objectToEncode(command: string, data: Record<string, unknown>): { object: Record<string, unknown>; fPort: unknown; field: string; portField: string } | null {
  if (isRecord(data.object)) return { object: data.object, fPort: data.fPort, field: 'data.object', portField: 'data.fPort' };
  const payload = isRecord(data.callData) && isRecord(data.callData.payload) ? data.callData.payload : null;
  if (command === 'apiCall' && payload && isRecord(payload.object)) {
    return { object: payload.object, fPort: payload.fPort, field: 'data.callData.payload.object', portField: 'data.callData.payload.fPort' };
  }
  return null;
}

/**
 * The one path of a device command, whoever sends it (a request to
 * `PUT /api/iotnodes/command`, a rule's action): the principal's write access
 * to the iotnode, the integration (the given one, or the iotnode's
 * connector's), the command and its `data` against the integration's catalog
 * and schemas, an `object` encoded by the device's translator, then
 * `CommandRequested` on the command's stream, which the command reactor
 * delivers. The caller gives the command's id: a fresh one per request, or
 * one derived from a rule's run, so a run handled again finds its command
 * already requested (a `ConflictError`) instead of sending it twice.
 */
export function deviceCommands(deps: Deps, registry: Registry, openapi: OpenApiDocument, encoder: DownlinkEncoder) {
  const check = schemaChecks(openapi);

  /**
   * The connector a device command goes through. `connectorId` when given
   * (a connector the caller may write to, of `integrationName` when that is
   * given too); else the iotnode's own connector when `integrationName` is
   * absent or names its integration; else, `integrationName` winning over
   * the iotnode's connector, the one connector of that integration the caller
   * may write to. None, or several without `connectorId`, is 422 naming why.
   */
  async function connectorFor(principal: Principal, input: DeviceCommandInput, own: ConnectorInfo | undefined): Promise<ConnectorInfo> {
    const { integrationName, connectorId } = input;
    if (integrationName !== undefined && !isIntegration(integrationName)) throw ValidationError.field('integrationName', `must be one of ${INTEGRATIONS.join(', ')}`);
    if (connectorId !== undefined) {
      const unusable = ValidationError.field('connectorId', 'does not reference a connector you may use');
      await requireReference(deps, principal, connectorId, 'write', unusable);
      const named = registry.connector(connectorId);
      if (!named) throw unusable;
      if (integrationName !== undefined && named.integration !== integrationName) {
        throw ValidationError.field('connectorId', `names a ${named.integration} connector, not a ${integrationName} one`);
      }
      return named;
    }
    if (integrationName === undefined) {
      if (own) return own;
      throw ValidationError.field('integrationName', "is required when the iotnode has no connector: give integrationName, or set the iotnode's connector");
    }
    if (own?.integration === integrationName) return own;
    const usable = await deps.db
      .selectFrom('connectors')
      .select('id')
      .where(sql<string>`connectors.doc->>'integration'`, '=', integrationName)
      .where(writableBy(principal, 'connectors.id'))
      .orderBy('id')
      .limit(MAX_NAMED + 1)
      .execute();
    const found = usable.map((r) => registry.connector(r.id)).filter((c): c is ConnectorInfo => c !== undefined);
    const ownNote = own ? `the iotnode's connector is a ${own.integration} connector and ` : "the iotnode has no connector and ";
    if (found.length === 0) {
      throw ValidationError.field('integrationName', `${integrationName}: ${ownNote}you may use no ${integrationName} connector; create one, or set the iotnode's connector to one`);
    }
    if (found.length > 1) {
      const ids = found.slice(0, MAX_NAMED).map((c) => c.id).join(', ') + (found.length > MAX_NAMED ? ', …' : '');
      throw ValidationError.field('integrationName', `${integrationName}: ${ownNote}you may use several ${integrationName} connectors (${ids}); name one with connectorId, or set the iotnode's connector to one`);
    }
    return found[0]!;
  }

  return async function send(principal: Principal, input: DeviceCommandInput, context: CommandContext, id: string): Promise<SentCommand> {
    const { command, iotnodeId, data = {} } = input;
    await requireAccess(deps, principal, iotnodeId, 'write', DEVICE_NOT_FOUND);
    const binding = registry.bindingOf(iotnodeId);
    const own = typeof binding.connector === 'string' ? registry.connector(binding.connector) : undefined;
    const connector = await connectorFor(principal, input, own);
    const integration = connector.integration as IntegrationName;
    const spec = COMMANDS[integration][command];
    if (spec && spec.target !== 'device') throw ValidationError.field('command', `${command} is a connector command: send it with PUT /api/connectors/command`);
    if (spec) check(spec.dataSchema, data, 'data');
    // An object instead of hex bytes: the device's translator encodes it now, and the command carries the bytes
    // and the port it decided (the codec's fPort; the one asked for when it gives none). The port asked for is
    // checked first, as the hex form's is.
    const toEncode = spec ? objectToEncode(command, data) : null;
    const asked = toEncode && toEncode.fPort !== undefined ? checkFPort(toEncode.fPort, toEncode.portField) : undefined;
    const encoded = toEncode ? await encoder.encodeDownlink(iotnodeId, toEncode.object, asked, toEncode.field) : null;
    const request = requestOf(
      {
        id,
        deviceId: iotnodeId,
        connectorId: connector.id,
        integration,
        command,
        devEui: typeof binding.devEui === 'string' ? binding.devEui : null,
        networkDeviceId: typeof binding.networkDeviceId === 'string' ? binding.networkDeviceId : null,
        data,
        at: context.now,
      },
      encoded ? { encoded: { hex: encoded.hexEncoded, fPort: encoded.fPort } } : {},
    );
    const handled = await handle(deps.store, commandStream(id), commandDecider, { type: 'RequestCommand', request }, context);
    return { id, integration, request, handled };
  };
}
