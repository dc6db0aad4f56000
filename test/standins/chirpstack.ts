import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { HttpStandIn } from './server.js';

/**
 * A stand-in for ChirpStack v4, the parts the platform uses, as ChirpStack
 * documents them (its `api/device.proto` through the gRPC gateway, and its
 * HTTP integration with the JSON marshaler, `integration.proto`):
 *
 * - the device queue: `POST /api/devices/{devEui}/queue` with
 *   `{queueItem: {devEui, confirmed, fPort, data (base64)}}` → `{id}`;
 *   `GET` → `{totalCount, result: [DeviceQueueItem]}`; `DELETE` → `{}`;
 *   authorised by `Grpc-Metadata-Authorization: Bearer <api token>`; errors
 *   as the gateway sends them, `{code, message, details}` (16 unauthenticated →
 *   401, 5 not found → 404, 3 invalid argument → 400);
 * - the HTTP integration: events POSTed to the configured endpoint with
 *   `?event=up|txack|ack|…` and the configured headers.
 *
 * The test drives the radio side: what a device sends (`uplink`), and when a
 * class A device's receive window takes the head of its queue (`transmit`).
 */
export interface QueueItem {
  id: string;
  devEui: string;
  confirmed: boolean;
  fPort: number;
  data: string;
  isPending: boolean;
  fCntDown: number;
}

export class ChirpStackStandIn extends HttpStandIn<'failing' | 'busy'> {
  readonly requests: { method: string; path: string; headers: IncomingMessage['headers']; body: unknown }[] = [];
  readonly queues = new Map<string, QueueItem[]>();
  /** `up`: answering; `down`: every request is refused at the socket; `failing`: 503; `busy`: 429 (gRPC `RESOURCE_EXHAUSTED`, a request not taken). */
  /**
   * Holding requests without an answer, as a stalled server does: `before`
   * doing anything, or `after` doing what the request asked (the answer lost
   * on its way back). Held requests are counted in `held`.
   */
  hold: 'none' | 'before' | 'after' = 'none';
  held = 0;
  private fCntDown = 0;
  private fCntUp = new Map<string, number>();
  /** Where the HTTP integration posts events, and the headers it adds. */
  integration: { url: string; headers: Record<string, string> } | null = null;

  constructor(
    readonly apiToken: string,
    /** The devices ChirpStack knows; a queue call for any other DevEUI is 404. */
    readonly devices: Set<string>,
  ) {
    super();
  }

  protected async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = raw ? JSON.parse(raw) : null;
    const path = new URL(req.url!, 'http://x').pathname;
    this.requests.push({ method: req.method!, path, headers: req.headers, body });
    if (this.hold === 'before') return void this.held++;
    const reply = (status: number, value: unknown) => {
      if (this.hold === 'after') return void this.held++;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const error = (status: number, code: number, message: string) => reply(status, { code, message, details: [] });
    if (this.mode === 'failing') return error(503, 14, 'unavailable');
    if (this.mode === 'busy') return error(429, 8, 'resource exhausted');
    if (req.headers['grpc-metadata-authorization'] !== `Bearer ${this.apiToken}`) return error(401, 16, 'authentication failed: invalid token');
    const match = /^\/api\/devices\/([0-9a-f]{16})\/queue$/.exec(path);
    if (!match) return error(404, 5, 'Not Found');
    const devEui = match[1]!;
    if (!this.devices.has(devEui)) return error(404, 5, `Object does not exist (id: ${devEui})`);
    const queue = this.queues.get(devEui) ?? [];
    this.queues.set(devEui, queue);
    switch (req.method) {
      case 'POST': {
        const item = (body as { queueItem?: Record<string, unknown> } | null)?.queueItem;
        if (!item || typeof item.fPort !== 'number' || item.fPort < 1 || item.fPort > 223) return error(400, 3, 'FPort must be > 0');
        if (typeof item.data !== 'string') return error(400, 3, 'data is required');
        const queued: QueueItem = { id: randomUUID(), devEui, confirmed: item.confirmed === true, fPort: item.fPort, data: item.data, isPending: false, fCntDown: 0 };
        queue.push(queued);
        return reply(200, { id: queued.id });
      }
      case 'GET':
        // Protobuf JSON: zero values left out.
        return reply(200, { totalCount: queue.length, result: queue.map((i) => ({ id: i.id, devEui: i.devEui, ...(i.confirmed ? { confirmed: true } : {}), fPort: i.fPort, data: i.data, ...(i.isPending ? { isPending: true } : {}), ...(i.fCntDown ? { fCntDown: i.fCntDown } : {}) })) });
      case 'DELETE':
        queue.length = 0;
        return reply(200, {});
      default:
        return error(405, 12, 'Method Not Allowed');
    }
  }

  private deviceInfo(devEui: string) {
    return { tenantId: '52f14cd4-c6f1-4fbd-8f87-4025e1d49242', tenantName: 'ChirpStack', applicationId: '5e5c5a5b-1c10-4b2e-a1a7-5d5a2f8f1c11', applicationName: 'plant', deviceProfileId: 'a1c2e3f4-1111-2222-3333-444455556666', deviceProfileName: 'class A', deviceName: `node-${devEui.slice(-4)}`, devEui, deviceClassEnabled: 'CLASS_A', tags: {} };
  }

  /** Posts one event of the HTTP integration, as ChirpStack does; resolves with the platform's answer. */
  async post(event: string, body: unknown): Promise<{ status: number; text: string }> {
    if (!this.integration) throw new Error('the HTTP integration has no endpoint');
    const res = await fetch(`${this.integration.url}?event=${event}`, { method: 'POST', headers: { 'content-type': 'application/json', ...this.integration.headers }, body: JSON.stringify(body) });
    return { status: res.status, text: await res.text() };
  }

  /** A device's uplink, as the `up` event ChirpStack posts. */
  uplink(devEui: string, fPort: number, payload: Buffer, extra: Record<string, unknown> = {}) {
    const fCnt = (this.fCntUp.get(devEui) ?? 0) + 1;
    this.fCntUp.set(devEui, fCnt);
    return this.post('up', {
      deduplicationId: randomUUID(),
      time: new Date().toISOString(),
      deviceInfo: this.deviceInfo(devEui),
      devAddr: '01e6e3f2',
      adr: true,
      dr: 5,
      fCnt,
      fPort,
      confirmed: false,
      data: payload.toString('base64'),
      rxInfo: [
        { gatewayId: '0016c001ff10a235', uplinkId: 4151, rssi: -57, snr: 9.5, channel: 2, location: {}, context: 'Ab+Gmg==', metadata: { region_config_id: 'eu868' }, crcStatus: 'CRC_OK' },
        { gatewayId: '0016c001ff10b7f1', uplinkId: 2213, rssi: -93, snr: 2.25, channel: 2, location: {}, context: 'Zf2Lqw==', metadata: {}, crcStatus: 'CRC_OK' },
      ],
      txInfo: { frequency: 868300000, modulation: { lora: { bandwidth: 125000, spreadingFactor: 7, codeRate: 'CR_4_5' } } },
      ...extra,
    });
  }

  /** The device's receive window: the head of its queue is transmitted and a `txack` posted. */
  async transmit(devEui: string): Promise<QueueItem | undefined> {
    const queue = this.queues.get(devEui) ?? [];
    const item = queue.shift();
    if (!item) return undefined;
    item.fCntDown = ++this.fCntDown;
    await this.post('txack', { downlinkId: 3315921024, time: new Date().toISOString(), deviceInfo: this.deviceInfo(devEui), queueItemId: item.id, fCntDown: item.fCntDown, gatewayId: '0016c001ff10a235', txInfo: { frequency: 869525000, power: 14 } });
    return item;
  }

  /** A confirmed downlink's acknowledgement by the device (or its absence), as the `ack` event. */
  ack(devEui: string, item: QueueItem, acknowledged: boolean) {
    return this.post('ack', { deduplicationId: randomUUID(), time: new Date().toISOString(), deviceInfo: this.deviceInfo(devEui), queueItemId: item.id, ...(acknowledged ? { acknowledged: true } : {}), fCntDown: item.fCntDown });
  }
}
