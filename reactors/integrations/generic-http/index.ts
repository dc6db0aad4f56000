import { randomUUID } from 'node:crypto';
import { ValidationError } from '../../../domain/shared/errors.js';
import { DEV_EUI, normalizeDevEui } from '../../../domain/integrations/catalog.js';
import { hexBytes, isRecord } from '../formats.js';
import type { DeviceRef, IntegrationModule } from '../types.js';

/** The largest raw frame a GenericHttp report carries: 64 KiB, as `POST /api/iotnodes/{id}/uplinks` takes. */
export const MAX_HTTP_FRAME_BYTES = 65_536;
/** The longest `secret` a report may name (a reserved topic is at most 1,024 characters). */
const MAX_SECRET = 1024;

/**
 * GenericHttp: any system that can POST JSON reports its devices through
 * `POST /api/integrations/http/{connectorId}` with the connector's webhook
 * secret. The body is `{devEui | secret, encodedData?: {hexEncoded, port}, ...fields}`:
 * the device is named by its DevEUI or its `secret`, among the devices bound
 * to this connector only; `encodedData` is a raw frame for its translators,
 * the other fields a JSON report; either or both. It takes no commands.
 */
export const genericHttp: IntegrationModule = {
  name: 'GenericHttp',
  webhook: {
    path: 'http',
    parse(body) {
      if (!isRecord(body)) throw ValidationError.field('body', 'must be a JSON object: {devEui or secret, encodedData?: {hexEncoded, port}, ...fields}');
      const { devEui, secret, encodedData, ...fields } = body;
      if ((devEui === undefined) === (secret === undefined)) throw ValidationError.field('devEui', 'or secret must name the iotnode, exactly one of the two');
      let device: DeviceRef;
      if (devEui !== undefined) {
        if (typeof devEui !== 'string' || !DEV_EUI.test(devEui)) throw ValidationError.field('devEui', 'must be 16 hexadecimal digits');
        device = { devEui: normalizeDevEui(devEui) };
      } else {
        if (typeof secret !== 'string' || secret === '' || secret.length > MAX_SECRET) throw ValidationError.field('secret', `must be a string of 1 to ${MAX_SECRET} characters`);
        device = { secret };
      }
      let encoded: { hexEncoded: string; port: number } | null = null;
      if (encodedData !== undefined) {
        if (!isRecord(encodedData)) throw ValidationError.field('encodedData', 'must be an object {hexEncoded, port}');
        const extra = Object.keys(encodedData).find((k) => k !== 'hexEncoded' && k !== 'port');
        if (extra) throw ValidationError.field(`encodedData.${extra}`, 'is not a field of encodedData: it takes hexEncoded and port');
        const bytes = hexBytes(encodedData.hexEncoded, 'encodedData.hexEncoded');
        if (bytes.length > MAX_HTTP_FRAME_BYTES) throw ValidationError.field('encodedData.hexEncoded', `is ${bytes.length} bytes; a frame is at most ${MAX_HTTP_FRAME_BYTES}`);
        const port = encodedData.port;
        if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) throw ValidationError.field('encodedData.port', 'must be an integer from 0 to 65535');
        encoded = { hexEncoded: bytes.toString('hex'), port };
      }
      // Each call is one report: the sender names no message id, so a call sent twice is two reports.
      return [{ type: 'uplink', device, encoded, radio: {}, fields, messageId: randomUUID() }];
    },
  },
};
