import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { HttpStandIn } from './server.js';

/**
 * A stand-in for The Things Stack v3, the parts the platform uses, as The
 * Things Stack documents them ("Scheduling Downlinks" and "Data Formats" of
 * its integration docs; `AppAs` in `api/ttn/lorawan/v3/applicationserver.proto`;
 * its errors as `pkg/errors` renders them):
 *
 * - the webhook's downlink queue operations,
 *   `POST /api/v3/as/applications/{application_id}/webhooks/{webhook_id}/devices/{device_id}/down/push|replace`
 *   with `{downlinks: [ApplicationDownlink]}` → 200 and an empty body; a
 *   paused webhook answers 406 without a body;
 * - the queue list, `GET /api/v3/as/applications/{application_id}/devices/{device_id}/down`
 *   → `{downlinks: [ApplicationDownlink]}`;
 * - authorised by an API key, `Authorization: Bearer <key>`, with rights
 *   (`RIGHT_APPLICATION_TRAFFIC_DOWN_WRITE` to push and replace,
 *   `RIGHT_APPLICATION_TRAFFIC_READ` to list);
 * - errors as a gRPC status in JSON, `{code, message: "error:<namespace>:<name> (<text>)", details: [ErrorDetails]}`,
 *   with the HTTP status of the code (3 → 400, 5 → 404, 7 → 403, 14 → 503, 16 → 401);
 * - the Application Server gives each downlink the correlation id
 *   `as:downlink:<ULID>` besides the ones it was given (kept sorted), sets
 *   its `f_cnt` and `session_key_id`, and posts `downlink_queued` to the
 *   webhook once the network server took it;
 * - the webhook: messages POSTed to its base URL with its configured headers,
 *   `Content-Type: application/json`, one `ApplicationUp` each, empty fields
 *   left out.
 *
 * The test drives the radio side: what a device sends (`uplink`), when a
 * device's receive window takes the head of its queue (`transmit`), and what
 * came of a confirmed downlink (`ack`, `nack`, `fail`).
 */
export interface Downlink {
  session_key_id: string;
  f_port: number;
  f_cnt: number;
  frm_payload: string;
  confirmed?: boolean;
  priority: string;
  correlation_ids: string[];
}

export interface DeviceEntry {
  devEui: string;
  devAddr: string;
}

const DOWN_WRITE = 'RIGHT_APPLICATION_TRAFFIC_DOWN_WRITE';
const TRAFFIC_READ = 'RIGHT_APPLICATION_TRAFFIC_READ';
const PRIORITIES = ['LOWEST', 'LOW', 'BELOW_NORMAL', 'NORMAL', 'ABOVE_NORMAL', 'HIGH', 'HIGHEST'];
const GRPC_HTTP: Record<number, number> = { 3: 400, 5: 404, 7: 403, 8: 429, 14: 503, 16: 401 };
const ID = /^[a-z0-9](?:[-]?[a-z0-9]){2,}$/;

/** A ULID's shape: 26 Crockford base32 characters, time first. */
const ulid = () => {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let time = Date.now();
  let out = '';
  for (let i = 0; i < 10; i++, time = Math.floor(time / 32)) out = alphabet[time % 32] + out;
  for (const b of randomBytes(16)) out += alphabet[b % 32];
  return out;
};

export class TheThingsStackStandIn extends HttpStandIn<'failing' | 'lost'> {
  readonly requests: { method: string; path: string; headers: IncomingMessage['headers']; body: unknown; raw: string }[] = [];
  /** Each device's queue, by device id. */
  readonly queues = new Map<string, Downlink[]>();
  /** API keys and their rights on the application. */
  readonly keys = new Map<string, Set<string>>();
  /**
   * `up`: answering; `down`: every connection is cut before a request is
   * read; `failing`: 503 from the cluster; `lost`: a push is taken and queued,
   * then the connection is cut before the answer (a proxy's time-out).
   */
  paused = false;
  /** What the platform answered to each webhook message. */
  readonly deliveries: { message: string; status: number; text: string }[] = [];
  /** The webhook: its base URL and the headers it is configured to add. */
  webhook: { url: string; headers: Record<string, string> } | null = null;
  private fCntUp = new Map<string, number>();
  private fCntDown = new Map<string, number>();
  private readonly sessionKeyId = randomBytes(16).toString('base64');

  constructor(
    readonly applicationId: string,
    readonly webhookId: string,
    apiKey: string,
    /** The devices The Things Stack knows, by device id; a queue operation for any other is 404. */
    readonly devices: Map<string, DeviceEntry>,
  ) {
    super();
    this.keys.set(apiKey, new Set([DOWN_WRITE, TRAFFIC_READ]));
  }

  private error(res: ServerResponse, code: number, namespace: string, name: string, messageFormat: string, attributes: Record<string, unknown> = {}) {
    const text = messageFormat.replace(/\{(\w+)\}/g, (_, a: string) => String(attributes[a] ?? ''));
    const details = { '@type': 'type.googleapis.com/ttn.lorawan.v3.ErrorDetails', namespace, name, message_format: messageFormat, ...(Object.keys(attributes).length ? { attributes } : {}), correlation_id: randomBytes(16).toString('hex'), code };
    res.writeHead(GRPC_HTTP[code] ?? 500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ code, message: `error:${namespace}:${name} (${text})`, details: [details] }, null, '\t'));
  }

  protected async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let body: unknown = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = undefined;
    }
    const path = new URL(req.url!, 'http://x').pathname;
    this.requests.push({ method: req.method!, path, headers: req.headers, body, raw });
    if (this.mode === 'failing') return this.error(res, 14, 'pkg/cluster', 'peer_unavailable', '{cluster_role} cluster peer unavailable', { cluster_role: 'NETWORK_SERVER' });

    const push = /^\/api\/v3\/as\/applications\/([^/]+)\/webhooks\/([^/]+)\/devices\/([^/]+)\/down\/(push|replace)$/.exec(path);
    const list = /^\/api\/v3\/as\/applications\/([^/]+)\/devices\/([^/]+)\/down$/.exec(path);
    const match = push ?? list;
    if (!match || (push && req.method !== 'POST') || (list && req.method !== 'GET')) return this.error(res, 5, 'pkg/webhandlers', 'route_not_found', 'route `{route}` not found', { route: path });
    const [appId, deviceId] = [decodeURIComponent(match[1]!), decodeURIComponent(push ? match[3]! : match[2]!)];
    if (!ID.test(appId) || !ID.test(deviceId) || deviceId.length > 36) return this.error(res, 3, 'pkg/ttnpb', 'identifiers', 'invalid identifiers');

    // Authentication, then the key's rights on the application.
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (!auth) return this.error(res, 16, 'pkg/auth/rights', 'unauthenticated', 'unauthenticated');
    const rights = this.keys.get(auth[1]!);
    if (!rights) return this.error(res, 16, 'pkg/identityserver', 'api_key_not_found', 'API key not found');
    const needed = push ? DOWN_WRITE : TRAFFIC_READ;
    if (appId !== this.applicationId) return this.error(res, 7, 'pkg/auth/rights', 'no_application_rights', 'no rights for application `{uid}`', { uid: appId });
    if (!rights.has(needed)) return this.error(res, 7, 'pkg/auth/rights', 'insufficient_application_rights', 'insufficient rights for application `{uid}`', { uid: appId, missing: [needed] });

    if (push && decodeURIComponent(push[2]!) !== this.webhookId) return this.error(res, 5, 'pkg/applicationserver/io/web', 'webhook_not_found', 'webhook not found');
    if (push && this.paused) {
      res.writeHead(406);
      return void res.end();
    }
    const device = this.devices.get(deviceId);
    if (push) {
      if (body === undefined || (body !== null && typeof body !== 'object')) return this.error(res, 3, 'pkg/applicationserver/io/web', 'decode_body', 'decode body');
      const items = (body as { downlinks?: unknown } | null)?.downlinks ?? [];
      if (!Array.isArray(items)) return this.error(res, 3, 'pkg/applicationserver/io/web', 'decode_body', 'decode body');
      const invalid = items.map(invalidity).find(Boolean);
      if (invalid) return this.error(res, 3, 'pkg/applicationserver/io/web', 'validate_body', 'validate body', { cause: invalid });
      if (!device) return this.error(res, 5, 'pkg/applicationserver', 'device_not_found', 'device `{device_uid}` not found', { device_uid: `${appId}.${deviceId}` });
      const queued = (items as Record<string, unknown>[]).map((i) => this.queue(deviceId, i));
      const queue = push[4] === 'push' ? [...(this.queues.get(deviceId) ?? []), ...queued] : queued;
      this.queues.set(deviceId, queue);
      if (this.mode === 'lost') return void req.socket.destroy();
      res.writeHead(200);
      res.end();
      // Once the network server has the downlinks, the Application Server tells the webhook.
      for (const item of queued) void this.post(deviceId, 'downlink_queued', { ...item }).catch(() => undefined);
      return;
    }
    if (!device) return this.error(res, 5, 'pkg/applicationserver', 'device_not_found', 'device `{device_uid}` not found', { device_uid: `${appId}.${deviceId}` });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ downlinks: this.queues.get(deviceId) ?? [] }));
  }

  /** A downlink as the Application Server keeps it: its frame counter, session, and its own correlation id besides the given ones. */
  private queue(deviceId: string, item: Record<string, unknown>): Downlink {
    const fCnt = (this.fCntDown.get(deviceId) ?? 0) + 1;
    this.fCntDown.set(deviceId, fCnt);
    const correlation = [...new Set([...((item.correlation_ids as string[] | undefined) ?? []), `as:downlink:${ulid()}`])].sort();
    return {
      session_key_id: this.sessionKeyId,
      f_port: item.f_port as number,
      f_cnt: fCnt,
      frm_payload: (item.frm_payload as string | undefined) ?? '',
      ...(item.confirmed === true ? { confirmed: true } : {}),
      priority: (item.priority as string | undefined) ?? 'NORMAL',
      correlation_ids: correlation,
    };
  }

  private ids(deviceId: string) {
    const device = this.devices.get(deviceId)!;
    return { device_id: deviceId, application_ids: { application_id: this.applicationId }, dev_eui: device.devEui.toUpperCase(), join_eui: '800000000000000C', dev_addr: device.devAddr };
  }

  /** Posts one webhook message, as the Application Server does; resolves with the platform's answer. */
  async post(deviceId: string, message: string, content: unknown, extra: Record<string, unknown> = {}): Promise<{ status: number; text: string }> {
    const body = { end_device_ids: this.ids(deviceId), correlation_ids: [`as:up:${ulid()}`], received_at: new Date().toISOString(), [message]: content, ...extra };
    return this.send(message, body);
  }

  /** Posts a body as it is (a message some other way broken). */
  async send(message: string, body: unknown, raw?: string): Promise<{ status: number; text: string }> {
    if (!this.webhook) throw new Error('the webhook has no base URL');
    const res = await fetch(this.webhook.url, { method: 'POST', headers: { 'content-type': 'application/json', ...this.webhook.headers }, body: raw ?? JSON.stringify(body) });
    const answer = { status: res.status, text: await res.text() };
    this.deliveries.push({ message, ...answer });
    return answer;
  }

  /** A device's uplink, as the `uplink_message` the webhook posts. */
  uplink(deviceId: string, fPort: number, payload: Buffer, extra: Record<string, unknown> = {}) {
    const fCnt = (this.fCntUp.get(deviceId) ?? 0) + 1;
    this.fCntUp.set(deviceId, fCnt);
    const now = new Date().toISOString();
    return this.post(deviceId, 'uplink_message', {
      session_key_id: this.sessionKeyId,
      f_port: fPort,
      f_cnt: fCnt,
      frm_payload: payload.toString('base64'),
      rx_metadata: [
        { gateway_ids: { gateway_id: 'roof-gateway', eui: 'B827EBFFFE61A9C2' }, time: now, timestamp: 2463457000, rssi: -61, channel_rssi: -61, snr: 9.25, uplink_token: 'ChIKEAoEZ3R3MRIInFyOAAAaBcQQ6L3Vlgk=', channel_index: 2, received_at: now },
        { gateway_ids: { gateway_id: 'cellar-gateway', eui: '0016C001FF10B7F1' }, time: now, timestamp: 1187000200, rssi: -104, channel_rssi: -104, snr: -7.5, channel_index: 2, received_at: now },
      ],
      settings: { data_rate: { lora: { bandwidth: 125000, spreading_factor: 9, coding_rate: '4/5' } }, frequency: '867100000', timestamp: 2463457000, time: now },
      received_at: now,
      consumed_airtime: '0.185344s',
      network_ids: { net_id: '000013', ns_id: 'EC656E0000000181', tenant_id: 'ttn', cluster_id: 'eu1', cluster_address: 'eu1.cloud.thethings.network' },
      ...extra,
    });
  }

  /** The device's receive window: the head of its queue is transmitted and `downlink_sent` posted. */
  async transmit(deviceId: string): Promise<Downlink | undefined> {
    const item = this.queues.get(deviceId)?.shift();
    if (item) await this.post(deviceId, 'downlink_sent', { ...item });
    return item;
  }

  /** The device acknowledged a confirmed downlink. */
  ack(deviceId: string, item: Downlink) {
    return this.post(deviceId, 'downlink_ack', { ...item });
  }

  /** The device did not acknowledge it: the Application Server queues it again, then says so. */
  async nack(deviceId: string, item: Downlink) {
    this.queues.set(deviceId, [...(this.queues.get(deviceId) ?? []), item]);
    return this.post(deviceId, 'downlink_nack', { ...item });
  }

  /** The network server gave up on a downlink. */
  fail(deviceId: string, item: Downlink, error = { namespace: 'pkg/applicationserver', name: 'max_retries_reached', message_format: 'confirmed downlink reached max retries of {max_retries}', attributes: { max_retries: 8 }, code: 9 }) {
    return this.post(deviceId, 'downlink_failed', { downlink: { ...item }, error: { ...error, correlation_id: randomBytes(16).toString('hex') } });
  }
}

/** What the Application Server's validation finds wrong with one `ApplicationDownlink`, or ''. */
function invalidity(item: unknown): string {
  if (typeof item !== 'object' || item === null) return 'downlinks: not a message';
  const i = item as Record<string, unknown>;
  const fPort = i.f_port ?? 0;
  if (typeof fPort !== 'number' || !Number.isInteger(fPort) || fPort < 0 || fPort > 255 || fPort === 224) return 'f_port: value must be less than or equal to 255 and not 224';
  if (i.frm_payload !== undefined) {
    if (typeof i.frm_payload !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(i.frm_payload)) return 'frm_payload: invalid base64';
    if (Buffer.from(i.frm_payload, 'base64').length > 255) return 'frm_payload: value length must be at most 255 bytes';
  }
  if (i.priority !== undefined && !PRIORITIES.includes(i.priority as string)) return 'priority: value must be one of the defined enum values';
  if (i.correlation_ids !== undefined && (!Array.isArray(i.correlation_ids) || i.correlation_ids.some((c) => typeof c !== 'string' || c.length > 100))) return 'correlation_ids: each at most 100 characters';
  return '';
}
