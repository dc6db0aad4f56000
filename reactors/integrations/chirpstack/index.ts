import { ValidationError } from '../../../domain/shared/errors.js';
import { DEV_EUI, normalizeDevEui } from '../../../domain/integrations/catalog.js';
import { MAX_UPLINK_BYTES, base64Bytes, isRecord, numberOr } from '../formats.js';
import { callApi, messageOf, secretOf, settingsOf, Unreachable, type DeviceRef, type InboundEvent, type IntegrationModule, type Radio } from '../types.js';

/**
 * ChirpStack v4. Uplinks come from its HTTP integration with the JSON
 * marshaler: `POST /api/integrations/chirpstack/{connectorId}?event=up|join|ack|txack|status|log|…`,
 * each body one of the events of its `integration.proto` in protobuf JSON
 * (lowerCamelCase; fields at their default value, such as `fPort: 0`, left
 * out; `data` base64). Commands go to its REST API (the gRPC gateway):
 * `POST|GET|DELETE {url}/api/devices/{devEui}/queue` with
 * `Grpc-Metadata-Authorization: Bearer <apiToken>`.
 */
export const chirpstack: IntegrationModule = {
  name: 'ChirpStack',
  webhook: {
    path: 'chirpstack',
    parse(body, query) {
      const event = query.event;
      if (typeof event !== 'string' || event === '') throw ValidationError.field('event', 'is required: up, join, ack, txack, status, log, location or integration');
      if (!isRecord(body)) throw ValidationError.field('body', 'must be a JSON object (the ChirpStack JSON marshaler)');
      const device = deviceOf(body);
      switch (event) {
        case 'up':
          return [uplink(body, device)];
        case 'txack':
          return [{ type: 'downlinkSent', device, networkItemId: textOf(body.queueItemId), fCntDown: numberOr(body.fCntDown, 0), ...(typeof body.gatewayId === 'string' ? { gatewayId: body.gatewayId } : {}) }];
        case 'ack':
          return [
            body.acknowledged === true
              ? { type: 'downlinkAcked', device, networkItemId: textOf(body.queueItemId) }
              : { type: 'downlinkFailed', device, networkItemId: textOf(body.queueItemId), reason: 'the device did not acknowledge the confirmed downlink' },
          ];
        case 'join':
          return [{ type: 'note', device, level: 'info', category: 'status', message: `Joined the network${typeof body.devAddr === 'string' ? ` as ${body.devAddr}` : ''}` }];
        case 'status': {
          const battery = body.batteryLevelUnavailable === true ? 'unknown' : body.externalPowerSource === true ? 'external power' : `${numberOr(body.batteryLevel, 0)} %`;
          return [{ type: 'note', device, level: 'info', category: 'status', message: `Status: battery ${battery}, link margin ${numberOr(body.margin, 0)} dB` }];
        }
        case 'log': {
          const context = isRecord(body.context) ? body.context : {};
          const item = textOf(context.queue_item_id ?? context.queueItemId);
          if (body.code === 'EXPIRED' && item) return [{ type: 'downlinkFailed', device, networkItemId: item, reason: 'expired before the device could receive it', expired: true }];
          const level = body.level === 'ERROR' ? 'error' : body.level === 'WARNING' ? 'warning' : 'info';
          return [{ type: 'note', device, level, category: 'system', message: `ChirpStack ${String(body.code ?? 'UNKNOWN')}: ${String(body.description ?? '').slice(0, 500)}` }];
        }
        case 'location':
        case 'integration':
          return [{ type: 'ignored', why: `ChirpStack ${event} events are not used` }];
        default:
          throw ValidationError.field('event', `must be one of up, join, ack, txack, status, log, location, integration; got ${event.slice(0, 40)}`);
      }
    },
  },
  downlink: {
    async execute(request, connector, context) {
      const settings = settingsOf(connector, 'chirpstack');
      const base = String(settings.url ?? '').replace(/\/+$/, '');
      const devEui = request.devEui!;
      const url = `${base}/api/devices/${devEui}/queue`;
      const headers = { 'Grpc-Metadata-Authorization': `Bearer ${secretOf(connector, 'chirpstack.apiToken')}`, 'content-type': 'application/json', accept: 'application/json' };
      const refused = (res: { status: number; body: unknown; text: string }) => ({ type: 'refused' as const, status: res.status, message: messageOf(res.body, res.text) });
      switch (request.kind) {
        case 'queue': {
          const downlink = request.downlink!;
          const data = Buffer.from(downlink.hex, 'hex').toString('base64');
          if (context.maybeDone) {
            // An earlier attempt may have reached ChirpStack before its answer was lost: an item with the same port and payload is that one.
            const listed = await callApi(context, url, { method: 'GET', headers });
            if (listed.status === 200 && isRecord(listed.body) && Array.isArray(listed.body.result)) {
              const same = listed.body.result.find((i) => isRecord(i) && numberOr(i.fPort, 0) === downlink.fPort && (i.data ?? '') === data);
              if (isRecord(same) && typeof same.id === 'string') return { type: 'accepted', networkItemId: same.id };
            }
          }
          const res = await callApi(context, url, { method: 'POST', headers, body: JSON.stringify({ queueItem: { devEui, confirmed: downlink.confirmed, fPort: downlink.fPort, data } }) });
          if (res.status !== 200) return refused(res);
          const id = isRecord(res.body) ? textOf(res.body.id) : undefined;
          if (!id) throw new Unreachable(`ChirpStack answered 200 without a queue item id: ${res.text.slice(0, 200)}`);
          return { type: 'accepted', networkItemId: id };
        }
        case 'read': {
          const res = await callApi(context, url, { method: 'GET', headers });
          if (res.status !== 200) return refused(res);
          const result = isRecord(res.body) && Array.isArray(res.body.result) ? res.body.result.filter(isRecord) : [];
          return {
            type: 'accepted',
            items: result.map((i) => ({
              id: textOf(i.id) ?? null,
              fPort: numberOr(i.fPort, 0),
              data: Buffer.from(typeof i.data === 'string' ? i.data : '', 'base64').toString('hex'),
              confirmed: i.confirmed === true,
              isPending: i.isPending === true,
              fCntDown: numberOr(i.fCntDown, 0),
              ...(typeof i.expiresAt === 'string' ? { expiresAt: i.expiresAt } : {}),
            })),
          };
        }
        case 'flush': {
          const res = await callApi(context, url, { method: 'DELETE', headers });
          return res.status === 200 ? { type: 'accepted' } : refused(res);
        }
        case 'publish':
          return { type: 'refused', message: 'ChirpStack takes no broker messages' };
        default: {
          const _: never = request.kind;
          return _;
        }
      }
    },
  },
};

const textOf = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function deviceOf(body: Record<string, unknown>): DeviceRef {
  const info = isRecord(body.deviceInfo) ? body.deviceInfo : null;
  const devEui = info?.devEui;
  if (typeof devEui !== 'string' || !DEV_EUI.test(devEui)) throw ValidationError.field('deviceInfo.devEui', 'must be 16 hexadecimal digits');
  return { devEui: normalizeDevEui(devEui) };
}

function uplink(body: Record<string, unknown>, device: DeviceRef): InboundEvent {
  const fPort = numberOr(body.fPort, 0);
  if (!Number.isInteger(fPort) || fPort < 0 || fPort > 255) throw ValidationError.field('fPort', 'must be a frame port, 0 to 255');
  const bytes = base64Bytes(body.data ?? '', 'data');
  if (bytes.length > MAX_UPLINK_BYTES) throw ValidationError.field('data', `is ${bytes.length} bytes; a LoRaWAN frame carries at most ${MAX_UPLINK_BYTES}`);
  const rx = Array.isArray(body.rxInfo) ? body.rxInfo.filter(isRecord) : [];
  const best = rx.reduce<Record<string, unknown> | null>((a, b) => (a === null || numberOr(b.rssi, -999) > numberOr(a.rssi, -999) ? b : a), null);
  const tx = isRecord(body.txInfo) ? body.txInfo : {};
  const lora = isRecord(tx.modulation) && isRecord(tx.modulation.lora) ? tx.modulation.lora : {};
  const radio: Radio = { fCnt: numberOr(body.fCnt, 0), gateways: rx.length };
  if (best) {
    if (typeof best.rssi === 'number') radio.rssi = best.rssi;
    if (typeof best.snr === 'number') radio.snr = best.snr;
    if (typeof best.gatewayId === 'string') radio.gatewayId = best.gatewayId;
  }
  if (typeof tx.frequency === 'number') radio.frequency = tx.frequency;
  if (typeof lora.spreadingFactor === 'number') radio.spreadingFactor = lora.spreadingFactor;
  if (typeof body.dr === 'number') radio.dataRate = body.dr;
  if (typeof body.devAddr === 'string') radio.devAddr = body.devAddr;
  const messageId = textOf(body.deduplicationId) ?? `${device.devEui}:${radio.fCnt}:${String(body.time ?? '')}`;
  return {
    type: 'uplink',
    device,
    encoded: fPort > 0 ? { hexEncoded: bytes.toString('hex'), port: fPort } : null,
    radio,
    messageId,
    ...(typeof body.time === 'string' && !isNaN(Date.parse(body.time)) ? { receivedAt: new Date(body.time).toISOString() } : {}),
  };
}
