import { createHash } from 'node:crypto';
import { ValidationError } from '../../../domain/shared/errors.js';
import { DEV_EUI, normalizeDevEui } from '../../../domain/integrations/catalog.js';
import type { ConnectorInfo } from '../../../ingest/registry.js';
import { MAX_UPLINK_BYTES, hexBytes, isRecord } from '../formats.js';
import { callApi, messageOf, secretOf, settingsOf, Unreachable, type DeviceRef, type DownlinkContext, type InboundEvent, type IntegrationModule, type Outcome, type Radio } from '../types.js';

/**
 * Actility ThingPark. Uplinks come from an HTTP application server route
 * (ThingPark Wireless AS routing, or a ThingPark X IoT Flow HTTP connection),
 * JSON content: `POST /api/integrations/thingpark/{connectorId}` with one
 * report per call, named by its single key: `DevEUI_uplink`,
 * `DevEUI_downlink_Sent`, `DevEUI_downlink_Rejected`, `DevEUI_notification`.
 * Its numbers come as JSON numbers or, from older LRC versions, as strings
 * (`"LrrRSSI": "-80.000000"`); both are read.
 * Downlinks go to its DX Core API with a bearer token from the DX Admin API's
 * OAuth2 client credentials flow:
 * `POST {url}/admin/latest/api/oauth/token` (form `grant_type=client_credentials,
 * client_id, client_secret`), then
 * `POST {url}/core/latest/api/devices/{DevEUI}/downlinkMessages?confirmDownlink=…`
 * with `{payloadHex, targetPorts}`.
 */
export function createThingPark(): IntegrationModule {
  const tokens = new TokenCache();
  return {
    name: 'ThingPark',
    webhook: {
      path: 'thingpark',
      parse(body) {
        if (!isRecord(body)) throw ValidationError.field('body', 'must be a JSON object (a ThingPark report)');
        const kinds = Object.keys(body);
        if (kinds.length !== 1) throw ValidationError.field('body', `must hold one report, such as DevEUI_uplink; got ${kinds.length ? kinds.slice(0, 5).join(', ') : 'none'}`);
        const kind = kinds[0]!;
        const report = body[kind];
        if (!isRecord(report)) throw ValidationError.field(kind, 'must be an object');
        switch (kind) {
          case 'DevEUI_uplink':
            return [uplink(report, deviceOf(report, kind), kind)];
          case 'DevEUI_downlink_Sent': {
            const device = deviceOf(report, kind);
            const fPort = optionalPort(report.FPort, `${kind}.FPort`);
            const match = { queued: fPort !== undefined ? { fPort } : {} };
            const sent = deliveryOf(report.DeliveryStatus, `${kind}.DeliveryStatus`);
            const gatewayId = typeof report.Lrrid === 'string' && report.Lrrid !== '' ? { gatewayId: report.Lrrid.toLowerCase() } : {};
            const id = reportId(report, device, kind, [report.FCntDn, report.DeliveryStatus]);
            if (sent) return [{ type: 'downlinkSent', device, match, ...gatewayId, ...id }];
            return [{ type: 'downlinkFailed', device, match, reason: `not sent over the air: ${failureOf(report)}`, ...id }];
          }
          case 'DevEUI_downlink_Rejected': {
            const device = deviceOf(report, kind);
            const fPort = optionalPort(report.FPort, `${kind}.FPort`);
            const cause = typeof report.DownlinkRejectionCause === 'string' && report.DownlinkRejectionCause !== '' ? report.DownlinkRejectionCause.slice(0, 300) : 'no cause given';
            return [{ type: 'downlinkFailed', device, match: { queued: fPort !== undefined ? { fPort } : {} }, reason: `rejected by ThingPark: ${cause}`, ...reportId(report, device, kind, [report.FPort]) }];
          }
          case 'DevEUI_notification': {
            const device = deviceOf(report, kind);
            const type = typeof report.Type === 'string' ? report.Type : 'unknown';
            const message =
              type === 'join'
                ? `Joined the network${typeof report.DevAddr === 'string' ? ` as ${report.DevAddr}` : ''}`
                : type === 'reset'
                  ? `Reset by ThingPark${typeof report.Var1 === 'string' && report.Var1 ? ` (${report.Var1.slice(0, 60)})` : ''}`
                  : type === 'devstatusans'
                    ? `Status: battery ${String(report.Var1 ?? 'unknown').slice(0, 10)}, link margin ${String(report.Var2 ?? 'unknown').slice(0, 10)} dB`
                    : `ThingPark notification ${type.slice(0, 40)}`;
            return [{ type: 'note', device, level: 'info', category: 'status', message }];
          }
          default:
            // Location, multicast and alarm reports: taken and not stored.
            return [{ type: 'ignored', why: `ThingPark ${kind.slice(0, 60)} reports are not used` }];
        }
      },
    },
    downlink: {
      async execute(request, connector, context) {
        if (request.kind !== 'queue') return { type: 'refused', message: `ThingPark takes no ${request.kind} commands` };
        const settings = settingsOf(connector, 'thingPark');
        const base = String(settings.url ?? '').replace(/\/+$/, '');
        const downlink = request.downlink!;
        const url = `${base}/core/latest/api/devices/${request.devEui!.toUpperCase()}/downlinkMessages?confirmDownlink=${downlink.confirmed}`;
        const body = JSON.stringify({ payloadHex: downlink.hex, targetPorts: String(downlink.fPort) });
        // ThingPark's DX API has no read of a device's queue: when an earlier attempt may have queued it, it cannot be looked for, and is sent again (docs/integrations.md).
        for (let fresh = false; ; fresh = true) {
          const token = await tokens.get(connector, base, context, fresh);
          if (token.type === 'refused') return token;
          const res = await callApi(context, url, { method: 'POST', headers: { authorization: `Bearer ${token.accessToken}`, 'content-type': 'application/json', accept: 'application/json' }, body });
          if (res.status >= 200 && res.status <= 299) return { type: 'accepted' };
          // A token revoked or expired early: one more try with a new one.
          if (res.status === 401 && !fresh) {
            tokens.drop(connector);
            continue;
          }
          return { type: 'refused', status: res.status, message: messageOf(res.body, res.text) };
        }
      },
    },
  };
}

/**
 * The DX API's bearer tokens, one per connector, kept until shortly before
 * they expire: they live for hours or days, and asking for one per downlink
 * would double the calls to ThingPark. A change of the connector's URL, client
 * id or secret asks for a new one.
 */
class TokenCache {
  private readonly tokens = new Map<string, { key: string; accessToken: string; expiresAt: number }>();

  drop(connector: ConnectorInfo): void {
    this.tokens.delete(connector.id);
  }

  async get(connector: ConnectorInfo, base: string, context: Pick<DownlinkContext, 'http' | 'timeoutMs'>, fresh: boolean): Promise<{ type: 'token'; accessToken: string } | Extract<Outcome, { type: 'refused' }>> {
    const clientId = String(settingsOf(connector, 'thingPark').clientId ?? '');
    const secret = secretOf(connector, 'thingPark.clientSecret');
    const key = createHash('sha256').update(`${base}\u0000${clientId}\u0000${secret}`).digest('hex');
    const cached = this.tokens.get(connector.id);
    if (!fresh && cached && cached.key === key && cached.expiresAt > Date.now()) return { type: 'token', accessToken: cached.accessToken };
    const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret });
    const res = await callApi(context, `${base}/admin/latest/api/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: form.toString() });
    if (res.status < 200 || res.status > 299) {
      const b = res.body as { error_description?: unknown } | null;
      const why = typeof b?.error_description === 'string' ? b.error_description.slice(0, 300) : messageOf(res.body, res.text);
      return { type: 'refused', status: res.status === 400 ? 401 : res.status, message: `ThingPark refused the connector's client credentials: ${why}` };
    }
    const answer = isRecord(res.body) ? res.body : {};
    if (typeof answer.access_token !== 'string' || answer.access_token === '') throw new Unreachable(`ThingPark answered ${res.status} without an access token: ${res.text.slice(0, 200)}`);
    const lifetime = typeof answer.expires_in === 'number' && answer.expires_in > 0 ? answer.expires_in : 300;
    // A minute's margin, so that a token does not expire on its way.
    const expiresAt = Date.now() + Math.max(0, lifetime - 60) * 1000;
    this.tokens.set(connector.id, { key, accessToken: answer.access_token, expiresAt });
    return { type: 'token', accessToken: answer.access_token };
  }
}

/** A ThingPark number: a JSON number, or (older LRC versions) a string holding one; undefined when absent or empty. */
function numberOf(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string' && value.trim() !== '') {
    const n = Number(value);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

function integer(value: unknown, field: string): number {
  const n = numberOf(value);
  if (n === undefined || !Number.isInteger(n)) throw ValidationError.field(field, 'must be a whole number');
  return n;
}

/** `DeliveryStatus`: 1 (or `Sent`, as earlier LRC versions say) when the frame went over the air, 0 (`Failed`) when it did not. */
function deliveryOf(value: unknown, field: string): boolean {
  if (value === 'Sent') return true;
  if (value === 'Failed') return false;
  const n = numberOf(value);
  if (n !== 0 && n !== 1) throw ValidationError.field(field, 'must be 1 (sent) or 0 (not sent)');
  return n === 1;
}

function optionalPort(value: unknown, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = numberOf(value);
  if (n === undefined || !Number.isInteger(n) || n < 0 || n > 255) throw ValidationError.field(field, 'must be a frame port, 0 to 255');
  return n;
}

function deviceOf(report: Record<string, unknown>, kind: string): DeviceRef {
  const eui = report.DevEUI;
  if (typeof eui !== 'string' || !DEV_EUI.test(eui)) throw ValidationError.field(`${kind}.DevEUI`, 'must be 16 hexadecimal digits');
  return { devEui: normalizeDevEui(eui) };
}

function uplink(report: Record<string, unknown>, device: DeviceRef, kind: string): InboundEvent {
  const fPort = optionalPort(report.FPort, `${kind}.FPort`);
  const fCnt = report.FCntUp === undefined ? undefined : integer(report.FCntUp, `${kind}.FCntUp`);
  if (fCnt !== undefined && fCnt < 0) throw ValidationError.field(`${kind}.FCntUp`, 'must be a frame counter, a number from 0');
  let encoded: { hexEncoded: string; port: number } | null = null;
  if (report.payload_hex !== undefined) {
    const bytes = hexBytes(report.payload_hex, `${kind}.payload_hex`);
    if (bytes.length > MAX_UPLINK_BYTES) throw ValidationError.field(`${kind}.payload_hex`, `is ${bytes.length} bytes; a LoRaWAN frame carries at most ${MAX_UPLINK_BYTES}`);
    // A frame without FPort carries MAC commands only.
    if (fPort !== undefined && fPort > 0) encoded = { hexEncoded: bytes.toString('hex'), port: fPort };
  }
  const radio: Radio = {};
  if (fCnt !== undefined) radio.fCnt = fCnt;
  const rssi = numberOf(report.LrrRSSI);
  const snr = numberOf(report.LrrSNR);
  const sf = numberOf(report.SpFact);
  const mhz = numberOf(report.Frequency);
  const gateways = numberOf(report.DevLrrCnt);
  if (rssi !== undefined) radio.rssi = rssi;
  if (snr !== undefined) radio.snr = snr;
  if (sf !== undefined) radio.spreadingFactor = sf;
  // ThingPark gives MHz; the platform keeps Hz, as every other integration gives them.
  if (mhz !== undefined) radio.frequency = Math.round(mhz * 1e6);
  if (gateways !== undefined) radio.gateways = gateways;
  else if (isRecord(report.Lrrs) && Array.isArray(report.Lrrs.Lrr)) radio.gateways = report.Lrrs.Lrr.length;
  if (typeof report.Lrrid === 'string' && report.Lrrid !== '') radio.gatewayId = report.Lrrid.toLowerCase();
  if (typeof report.DevAddr === 'string' && report.DevAddr !== '') radio.devAddr = report.DevAddr.toLowerCase();
  const time = typeof report.Time === 'string' && !isNaN(Date.parse(report.Time)) ? new Date(report.Time).toISOString() : undefined;
  // ThingPark gives a report no id of its own; a repeated delivery of it carries the same counter and LRR time.
  const messageId = `${device.devEui}:${fCnt ?? ''}:${time ?? ''}`;
  return { type: 'uplink', device, encoded, radio, messageId, ...(time ? { receivedAt: time } : {}) };
}

/**
 * A downlink report's key: ThingPark gives a report no id of its own, and a
 * repeated delivery carries the same `Time` and counters. None without `Time`.
 */
function reportId(report: Record<string, unknown>, device: DeviceRef, kind: string, fields: unknown[]): { messageId?: string } {
  if (typeof report.Time !== 'string' || report.Time === '') return {};
  return { messageId: [device.devEui, kind, report.Time.slice(0, 64), ...fields.map((f) => (typeof f === 'number' || typeof f === 'string' ? String(f).slice(0, 20) : ''))].join(':') };
}

/** What ThingPark says of a downlink it could not send, per receive slot (its `DeliveryFailedCause1..3` codes). */
function failureOf(report: Record<string, unknown>): string {
  const causes: string[] = [];
  for (const [field, slot] of [
    ['DeliveryFailedCause1', 'RX1'],
    ['DeliveryFailedCause2', 'RX2'],
    ['DeliveryFailedCause3', 'ping slot'],
  ] as const) {
    const code = typeof report[field] === 'string' ? (report[field] as string).toUpperCase().slice(0, 4) : '';
    if (code && code !== '00') causes.push(`${slot} ${code}${CAUSES[code] ? ` (${CAUSES[code]})` : ''}`);
  }
  return causes.length ? causes.join(', ') : 'no cause given';
}

const CAUSES: Record<string, string> = {
  A0: 'radio stopped',
  A1: 'downlink radio stopped',
  A2: 'slot not available',
  A3: 'radio busy',
  A4: 'listen before talk: channel busy',
  A5: 'radio board error',
  B0: 'received too late for the slot',
  C0: 'the network server chose RX2',
  D0: 'duty cycle constraint at the gateway',
  DA: 'duty cycle constraint at the network server',
  DB: 'maximum dwell time constraint',
  DC: 'no GPS-synchronised gateway',
  DD: 'no gateway connected',
  DE: 'duty cycle not allowed by the peering operator',
  DF: 'wrong NetID',
  E0: 'class C frame expired before transmission',
};
