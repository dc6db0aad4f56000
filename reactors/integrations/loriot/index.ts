import { ValidationError } from '../../../domain/shared/errors.js';
import { DEV_EUI, normalizeDevEui } from '../../../domain/integrations/catalog.js';
import { MAX_UPLINK_BYTES, hexBytes, isRecord } from '../formats.js';
import { callApi, messageOf, secretOf, settingsOf, type DeviceRef, type InboundEvent, type IntegrationModule, type Radio } from '../types.js';

/**
 * LORIOT. Uplinks come from an application output of the HTTP Push kind:
 * `POST /api/integrations/loriot/{connectorId}` with one application message
 * per call, told apart by `cmd`:
 * - `rx`: a frame of a device (`EUI`, `fcnt`, `port`, `data` as hexadecimal,
 *   and with the output's radio verbosity `freq`, `dr`, `rssi`, `snr`, `gws`);
 * - `txd`: a queued downlink was transmitted (`seqdn`, `port`, `data`);
 * - `gw`: the same frame as its `rx` again, later, with every gateway's view.
 * Downlinks go to its REST API with the application's token
 * (`Authorization: Bearer <token>`): `POST {url}/1/rest` with
 * `{cmd: 'tx', appid, EUI, port, confirmed, data}`, and
 * `POST {url}/1/nwk/app/{APPID}/device/{EUI}/flushqueue` to empty a device's queue.
 */
export const loriot: IntegrationModule = {
  name: 'Loriot',
  webhook: {
    path: 'loriot',
    parse(body) {
      if (!isRecord(body)) throw ValidationError.field('body', 'must be a JSON object (a LORIOT application message)');
      const cmd = body.cmd;
      if (typeof cmd !== 'string' || cmd === '') throw ValidationError.field('cmd', 'is required: rx, gw or txd');
      switch (cmd) {
        case 'rx':
          return uplink(body, deviceOf(body));
        case 'txd': {
          const device = deviceOf(body);
          const port = body.port === undefined ? undefined : portOf(body.port, 'port', 1);
          const hex = body.data === undefined ? undefined : hexBytes(body.data, 'data').toString('hex');
          // LORIOT numbers a transmission by the downlink frame counter (`seqdn`), the queue item (`seqq`) and its time (`ts`).
          const keys = [body.seqdn, body.seqq, body.ts];
          const messageId = keys.some(finite) ? `${device.devEui}:txd:${keys.map((k) => (finite(k) ? k : '')).join(':')}` : undefined;
          return [
            {
              type: 'downlinkSent',
              device,
              match: { queued: { ...(port !== undefined ? { fPort: port } : {}), ...(hex !== undefined ? { hex } : {}) } },
              ...(messageId ? { messageId } : {}),
              ...(typeof body.seqdn === 'number' ? { fCntDown: body.seqdn } : {}),
              ...(typeof body.gweui === 'string' ? { gatewayId: body.gweui.toLowerCase() } : {}),
            },
          ];
        }
        case 'gw':
          // The frame was reported from its `rx` message: a second report of it would double its history.
          deviceOf(body);
          return [{ type: 'ignored', why: 'LORIOT gw messages repeat a frame already reported by its rx message' }];
        default:
          // LORIOT adds message kinds over time (multicast, join and error reports): taken and not stored.
          return [{ type: 'ignored', why: `LORIOT ${cmd.slice(0, 40)} messages are not used` }];
      }
    },
  },
  downlink: {
    async execute(request, connector, context) {
      const settings = settingsOf(connector, 'loriot');
      const base = String(settings.url ?? '').replace(/\/+$/, '');
      const appid = String(settings.applicationId ?? '').toUpperCase();
      const eui = request.devEui!.toUpperCase();
      const headers = { authorization: `Bearer ${secretOf(connector, 'loriot.token')}`, 'content-type': 'application/json', accept: 'application/json' };
      const refused = (res: { status: number; body: unknown; text: string }) => ({ type: 'refused' as const, status: res.status, message: messageOf(res.body, res.text) });
      switch (request.kind) {
        case 'queue': {
          // LORIOT has no read of a device's queue: when an earlier attempt may have queued it, it cannot be looked for, and is sent again (docs/integrations.md).
          const downlink = request.downlink!;
          const res = await callApi(context, `${base}/1/rest`, { method: 'POST', headers, body: JSON.stringify({ cmd: 'tx', appid, EUI: eui, port: downlink.fPort, confirmed: downlink.confirmed, data: downlink.hex }) });
          if (res.status < 200 || res.status > 299) return refused(res);
          // LORIOT answers a `tx` message in kind, with `error` when it did not take it.
          if (isRecord(res.body) && typeof res.body.error === 'string') return { type: 'refused', status: res.status, message: res.body.error.slice(0, 500) };
          return { type: 'accepted' };
        }
        case 'flush': {
          const res = await callApi(context, `${base}/1/nwk/app/${appid}/device/${eui}/flushqueue`, { method: 'POST', headers, body: '{}' });
          return res.status >= 200 && res.status <= 299 ? { type: 'accepted' } : refused(res);
        }
        case 'read':
        case 'publish':
          return { type: 'refused', message: `LORIOT takes no ${request.kind} commands` };
        default: {
          const _: never = request.kind;
          return _;
        }
      }
    },
  },
};

function deviceOf(body: Record<string, unknown>): DeviceRef {
  const eui = body.EUI;
  if (typeof eui !== 'string' || !DEV_EUI.test(eui)) throw ValidationError.field('EUI', 'must be 16 hexadecimal digits');
  return { devEui: normalizeDevEui(eui) };
}

function portOf(value: unknown, field: string, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > 255) throw ValidationError.field(field, `must be a frame port, ${min} to 255`);
  return value;
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function uplink(body: Record<string, unknown>, device: DeviceRef): InboundEvent[] {
  const port = portOf(body.port ?? 0, 'port', 0);
  if (body.fcnt !== undefined && (!finite(body.fcnt) || body.fcnt < 0)) throw ValidationError.field('fcnt', 'must be a frame counter, a number from 0');
  const events: InboundEvent[] = [];
  let encoded: { hexEncoded: string; port: number } | null = null;
  if (body.data !== undefined) {
    const bytes = hexBytes(body.data, 'data');
    if (bytes.length > MAX_UPLINK_BYTES) throw ValidationError.field('data', `is ${bytes.length} bytes; a LoRaWAN frame carries at most ${MAX_UPLINK_BYTES}`);
    if (port > 0) encoded = { hexEncoded: bytes.toString('hex'), port };
  } else if (body.encdata !== undefined) {
    hexBytes(body.encdata, 'encdata');
    events.push({ type: 'note', device, level: 'warning', category: 'system', message: 'LORIOT sent this frame encrypted (encdata): give LORIOT the device\'s AppSKey so that it sends the payload decrypted' });
  }
  const radio: Radio = {};
  if (finite(body.fcnt)) radio.fCnt = body.fcnt;
  if (finite(body.rssi)) radio.rssi = body.rssi;
  if (finite(body.snr)) radio.snr = body.snr;
  if (finite(body.freq)) radio.frequency = body.freq;
  if (typeof body.dr === 'string' && body.dr !== '') {
    radio.dataRate = body.dr.slice(0, 40);
    const sf = /^SF(\d{1,2})\b/.exec(body.dr);
    if (sf) radio.spreadingFactor = Number(sf[1]);
  }
  // The full radio verbosity adds each gateway's view: the best one's values are kept.
  const gws = Array.isArray(body.gws) ? body.gws.filter(isRecord) : [];
  if (gws.length) {
    const best = gws.reduce((a, b) => ((finite(b.rssi) ? b.rssi : -999) > (finite(a.rssi) ? a.rssi : -999) ? b : a));
    radio.gateways = gws.length;
    if (typeof best.gweui === 'string') radio.gatewayId = best.gweui.toLowerCase();
    if (radio.rssi === undefined && finite(best.rssi)) radio.rssi = best.rssi;
    if (radio.snr === undefined && finite(best.snr)) radio.snr = best.snr;
  }
  // `seqno` numbers the frames LORIOT received from the device, across re-joins (where `fcnt` starts again).
  const messageId = finite(body.seqno) ? `${device.devEui}:${body.seqno}` : `${device.devEui}:${String(body.fcnt ?? '')}:${String(body.ts ?? '')}`;
  events.unshift({
    type: 'uplink',
    device,
    encoded,
    radio,
    messageId,
    ...(finite(body.ts) && body.ts > 0 && body.ts < 8.64e15 ? { receivedAt: new Date(body.ts).toISOString() } : {}),
  });
  // The device's ACK bit acknowledges its latest confirmed downlink; the frame's id keys it, as it keys the report.
  if (body.ack === true) events.push({ type: 'downlinkAcked', device, match: { lastConfirmed: true }, messageId: `${messageId}:ack` });
  return events;
}
