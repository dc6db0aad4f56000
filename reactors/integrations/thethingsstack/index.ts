import { ValidationError } from '../../../domain/shared/errors.js';
import { DEV_EUI, normalizeDevEui } from '../../../domain/integrations/catalog.js';
import type { CommandRequest } from '../../../domain/commands/command.js';
import type { ConnectorInfo } from '../../../ingest/registry.js';
import { MAX_UPLINK_BYTES, base64Bytes, isRecord, numberOr } from '../formats.js';
import { callApi, messageOf, secretOf, settingsOf, type DeviceRef, type InboundEvent, type IntegrationModule, type Outcome, type Radio } from '../types.js';

/**
 * The Things Stack v3. Uplinks and downlink events come from a webhook of the
 * application (JSON format): `POST /api/integrations/the-things-stack/{connectorId}`,
 * each body one `ApplicationUp` message in its JSON form (snake_case; empty
 * fields, such as `f_port: 0`, left out; bytes base64), the kind of message
 * named by its one message field: `uplink_message`, `join_accept`,
 * `downlink_queued`, `downlink_sent`, `downlink_ack`, `downlink_nack`,
 * `downlink_failed`, … Commands go to the Application Server's HTTP API with
 * an application API key as bearer token: push and replace through the
 * webhook's downlink paths
 * (`POST {url}/api/v3/as/applications/{app}/webhooks/{webhook}/devices/{device}/down/push|replace`,
 * `{downlinks: [ApplicationDownlink]}`), and the queue list
 * (`GET {url}/api/v3/as/applications/{app}/devices/{device}/down`).
 *
 * The Things Stack has no id for a queue item; instead each downlink carries
 * the correlation ids it was given, in the queue list and in every later
 * `downlink_*` message. The platform gives each downlink
 * `platform:command:<commandId>`, which finds its command again.
 */
export const CORRELATION_PREFIX = 'platform:command:';
export const correlationOf = (commandId: string) => `${CORRELATION_PREFIX}${commandId}`;
const CORRELATION = /^platform:command:([0-9a-f]{24})$/;

/** Message fields of an `ApplicationUp` the platform has no use for: answered 200, nothing stored. */
const UNUSED = ['uplink_normalized', 'downlink_queue_invalidated', 'location_solved', 'service_data'] as const;
const USED = ['uplink_message', 'join_accept', 'downlink_queued', 'downlink_sent', 'downlink_ack', 'downlink_nack', 'downlink_failed'] as const;

export const theThingsStack: IntegrationModule = {
  name: 'TheThingsStack',
  webhook: {
    path: 'the-things-stack',
    parse(body) {
      if (!isRecord(body)) throw ValidationError.field('body', 'must be a JSON object (a message of a The Things Stack webhook, JSON format)');
      const kind = USED.find((k) => body[k] !== undefined);
      if (!kind) {
        const unused = UNUSED.find((k) => body[k] !== undefined);
        if (unused) return [{ type: 'ignored', why: `The Things Stack ${unused} messages are not used` }];
        throw ValidationError.field('body', `must carry one of ${USED.join(', ')}; keep end_device_ids and the message in the webhook's filter`);
      }
      const device = deviceOf(body);
      const message = body[kind];
      if (!isRecord(message)) throw ValidationError.field(kind, 'must be an object');
      switch (kind) {
        case 'uplink_message':
          return [uplink(body, message, device)];
        case 'join_accept':
          return [{ type: 'note', device, level: 'info', category: 'status', message: `Joined the network${typeof ids(body).dev_addr === 'string' ? ` as ${String(ids(body).dev_addr)}` : ''}` }];
        case 'downlink_queued':
          // Sent once the network server took the push, which the platform recorded from the push's own answer.
          return [{ type: 'ignored', why: 'a downlink_queued message confirms what the push answered' }];
        case 'downlink_sent':
        case 'downlink_ack':
        case 'downlink_nack':
        case 'downlink_failed': {
          const downlink = kind === 'downlink_failed' ? message.downlink : message;
          if (!isRecord(downlink)) throw ValidationError.field(`${kind}.downlink`, 'must be an object');
          const commandId = commandOf([...correlationIds(downlink.correlation_ids, `${kind === 'downlink_failed' ? 'downlink_failed.downlink' : kind}.correlation_ids`), ...correlationIds(body.correlation_ids, 'correlation_ids')]);
          if (!commandId) return [{ type: 'ignored', why: `a ${kind} message for a downlink the platform did not queue` }];
          const fCnt = numberOr(downlink.f_cnt, 0);
          switch (kind) {
            case 'downlink_sent':
              return [{ type: 'downlinkSent', device, commandId, ...(fCnt ? { fCntDown: fCnt } : {}) }];
            case 'downlink_ack':
              return [{ type: 'downlinkAcked', device, commandId }];
            case 'downlink_nack':
              // The Application Server queues a confirmed downlink the device did not acknowledge again by itself, until it gives up with downlink_failed.
              return [{ type: 'note', device, level: 'warning', category: 'command', message: `The device did not acknowledge the confirmed downlink of command ${commandId}; The Things Stack queues it again` }];
            case 'downlink_failed':
              return [{ type: 'downlinkFailed', device, commandId, reason: reasonOf(message.error) }];
          }
        }
      }
      const _: never = kind;
      return _;
    },
  },
  downlink: {
    async execute(request, connector, context) {
      const api = apiOf(connector, request);
      switch (request.kind) {
        case 'queue': {
          const downlink = request.downlink!;
          const correlation = correlationOf(request.id);
          if (context.maybeDone) {
            // An earlier attempt may have reached The Things Stack before its answer was lost: the item carrying this command's correlation id is that one.
            const listed = await callApi(context, api.list, { method: 'GET', headers: api.headers });
            if (listed.status !== 200) return refused(listed, 'could not check the queue before queueing again: ');
            if (queueOf(listed.body).some((i) => Array.isArray(i.correlation_ids) && i.correlation_ids.includes(correlation))) return { type: 'accepted' };
          }
          const item = { f_port: downlink.fPort, frm_payload: Buffer.from(downlink.hex, 'hex').toString('base64'), confirmed: downlink.confirmed, priority: 'NORMAL', correlation_ids: [correlation] };
          const res = await callApi(context, api.push, { method: 'POST', headers: api.headers, body: JSON.stringify({ downlinks: [item] }) });
          return res.status === 200 ? { type: 'accepted' } : refused(res);
        }
        case 'read': {
          const res = await callApi(context, api.list, { method: 'GET', headers: api.headers });
          if (res.status !== 200) return refused(res);
          return {
            type: 'accepted',
            items: queueOf(res.body).map((i) => {
              const correlation = Array.isArray(i.correlation_ids) ? i.correlation_ids.filter((c): c is string => typeof c === 'string') : [];
              const commandId = commandOf(correlation);
              return {
                fPort: numberOr(i.f_port, 0),
                data: Buffer.from(typeof i.frm_payload === 'string' ? i.frm_payload : '', 'base64').toString('hex'),
                confirmed: i.confirmed === true,
                priority: typeof i.priority === 'string' ? i.priority : 'NORMAL',
                fCntDown: numberOr(i.f_cnt, 0),
                ...(commandId ? { commandId } : {}),
                correlationIds: correlation,
              };
            }),
          };
        }
        case 'flush': {
          // Replacing the queue with no downlinks empties it.
          const res = await callApi(context, api.replace, { method: 'POST', headers: api.headers, body: JSON.stringify({ downlinks: [] }) });
          return res.status === 200 ? { type: 'accepted' } : refused(res);
        }
        case 'publish':
          return { type: 'refused', message: 'The Things Stack takes no broker messages' };
        default: {
          const _: never = request.kind;
          return _;
        }
      }
    },
  },
};

/** The device's id in The Things Stack: its `networkDeviceId`, else the console's default `eui-<devEui>`. */
export const ttsDeviceId = (request: Pick<CommandRequest, 'devEui' | 'networkDeviceId'>): string => request.networkDeviceId ?? `eui-${request.devEui}`;

function apiOf(connector: ConnectorInfo, request: CommandRequest) {
  const settings = settingsOf(connector, 'theThingsStack');
  // The cluster's address, with or without the API's `/api/v3`.
  const base = String(settings.url ?? '').replace(/\/+$/, '').replace(/\/api\/v3$/, '');
  const app = encodeURIComponent(String(settings.applicationId ?? ''));
  const webhook = encodeURIComponent(String(settings.webhookId ?? ''));
  const device = encodeURIComponent(ttsDeviceId(request));
  const down = `${base}/api/v3/as/applications/${app}/webhooks/${webhook}/devices/${device}/down`;
  return {
    push: `${down}/push`,
    replace: `${down}/replace`,
    list: `${base}/api/v3/as/applications/${app}/devices/${device}/down`,
    headers: { authorization: `Bearer ${secretOf(connector, 'theThingsStack.apiKey')}`, 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'device-platform' },
  };
}

/** A refusal with The Things Stack's message (`error:<namespace>:<name> (<text>)`); a paused webhook answers 406 without one. */
function refused(res: { status: number; body: unknown; text: string }, prefix = ''): Outcome {
  const message = res.status === 406 && !res.text ? 'the webhook is paused in The Things Stack (406)' : messageOf(res.body, res.text || `answered ${res.status}`);
  return { type: 'refused', status: res.status, message: `${prefix}${message}` };
}

function queueOf(body: unknown): Record<string, unknown>[] {
  return isRecord(body) && Array.isArray(body.downlinks) ? body.downlinks.filter(isRecord) : [];
}

function commandOf(correlationIds: string[]): string | undefined {
  for (const c of correlationIds) {
    const match = CORRELATION.exec(c);
    if (match) return match[1];
  }
  return undefined;
}

function correlationIds(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((c) => typeof c === 'string')) throw ValidationError.field(field, 'must be a list of strings');
  return value;
}

/** The error of a `downlink_failed`: its `message_format` with its attributes filled in, and its name. */
function reasonOf(error: unknown): string {
  if (!isRecord(error)) return 'The Things Stack gave up on the downlink';
  const attributes = isRecord(error.attributes) ? error.attributes : {};
  const format = typeof error.message_format === 'string' ? error.message_format : 'failed';
  const text = format.replace(/`?\{(\w+)\}`?/g, (whole, name: string) => (attributes[name] !== undefined ? String(attributes[name]) : whole));
  return `${text}${typeof error.name === 'string' ? ` (${error.name})` : ''}`.slice(0, 500);
}

const ids = (body: Record<string, unknown>): Record<string, unknown> => (isRecord(body.end_device_ids) ? body.end_device_ids : {});

/**
 * The device a message names: its DevEUI (`end_device_ids.dev_eui`; a device
 * named `eui-<devEui>` without it is taken to have that DevEUI) and its
 * device id as the network server's own id.
 */
function deviceOf(body: Record<string, unknown>): DeviceRef {
  if (!isRecord(body.end_device_ids)) throw ValidationError.field('end_device_ids', "is required; keep it in the webhook's filter");
  const { device_id: deviceId, dev_eui: devEui } = body.end_device_ids;
  if (typeof deviceId !== 'string' || deviceId === '' || deviceId.length > 128) throw ValidationError.field('end_device_ids.device_id', 'must be the device id, 1 to 128 characters');
  if (devEui !== undefined && (typeof devEui !== 'string' || !DEV_EUI.test(devEui))) throw ValidationError.field('end_device_ids.dev_eui', 'must be 16 hexadecimal digits');
  const fromId = /^eui-([0-9a-f]{16})$/.exec(deviceId)?.[1];
  const eui = typeof devEui === 'string' ? devEui : fromId;
  return { devEui: eui ? normalizeDevEui(eui) : null, networkDeviceId: deviceId };
}

function uplink(body: Record<string, unknown>, up: Record<string, unknown>, device: DeviceRef): InboundEvent {
  const fPort = numberOr(up.f_port, 0);
  if (!Number.isInteger(fPort) || fPort < 0 || fPort > 255) throw ValidationError.field('uplink_message.f_port', 'must be a frame port, 0 to 255');
  const bytes = base64Bytes(up.frm_payload ?? '', 'uplink_message.frm_payload');
  if (bytes.length > MAX_UPLINK_BYTES) throw ValidationError.field('uplink_message.frm_payload', `is ${bytes.length} bytes; a LoRaWAN frame carries at most ${MAX_UPLINK_BYTES}`);
  const rx = Array.isArray(up.rx_metadata) ? up.rx_metadata.filter(isRecord) : [];
  const best = rx.reduce<Record<string, unknown> | null>((a, b) => (a === null || numberOr(b.rssi, -999) > numberOr(a.rssi, -999) ? b : a), null);
  const gatewayOf = (m: Record<string, unknown>) => (isRecord(m.gateway_ids) && typeof m.gateway_ids.gateway_id === 'string' ? m.gateway_ids.gateway_id : undefined);
  const settings = isRecord(up.settings) ? up.settings : {};
  const lora = isRecord(settings.data_rate) && isRecord(settings.data_rate.lora) ? settings.data_rate.lora : {};
  const radio: Radio = { fCnt: numberOr(up.f_cnt, 0), gateways: new Set(rx.map(gatewayOf).filter(Boolean)).size };
  if (best) {
    if (typeof best.rssi === 'number') radio.rssi = best.rssi;
    // Protobuf JSON leaves zero values out: an SNR of 0 dB is common and comes without the field.
    radio.snr = numberOr(best.snr, 0);
    const gateway = gatewayOf(best);
    if (gateway) radio.gatewayId = gateway;
  }
  // A uint64 (the frequency) is a string in protobuf JSON.
  const frequency = typeof settings.frequency === 'string' && /^\d{1,12}$/.test(settings.frequency) ? Number(settings.frequency) : settings.frequency;
  if (typeof frequency === 'number' && Number.isFinite(frequency)) radio.frequency = frequency;
  if (typeof lora.spreading_factor === 'number') radio.spreadingFactor = lora.spreading_factor;
  const devAddr = ids(body).dev_addr;
  if (typeof devAddr === 'string') radio.devAddr = devAddr.toLowerCase();
  // The Application Server gives each uplink its own `as:up:<ULID>` correlation id, the same in every retry of the webhook.
  const asUp = correlationIds(body.correlation_ids, 'correlation_ids').find((c) => c.startsWith('as:up:'));
  const receivedAt = [up.received_at, body.received_at].find((t): t is string => typeof t === 'string' && !isNaN(Date.parse(t)));
  return {
    type: 'uplink',
    device,
    encoded: fPort > 0 ? { hexEncoded: bytes.toString('hex'), port: fPort } : null,
    radio,
    messageId: asUp ?? `${device.networkDeviceId}:${radio.fCnt}:${receivedAt ?? ''}`,
    ...(receivedAt ? { receivedAt: new Date(receivedAt).toISOString() } : {}),
  };
}
