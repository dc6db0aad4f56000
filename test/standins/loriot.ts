import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpStandIn } from './server.js';

/**
 * A stand-in for a LORIOT network server, the parts the platform uses, as
 * LORIOT documents them:
 *
 * - downlinks: `POST /1/rest` with `{cmd: 'tx', appid, EUI, port, confirmed, data}`
 *   (`appid` 8 hexadecimal digits, `EUI` 16, `port` 1 to 223, `data` hexadecimal,
 *   at least one byte) and `Authorization: Bearer <application token>`
 *   ("HTTP PUSH" and "Downlink Data Message" pages); the item is enqueued and
 *   sent in order at the device's receive windows;
 * - `POST /1/nwk/app/{APPID}/device/{DEVEUI}/flushqueue` → 204, which clears
 *   every queued downlink of the device (Public NWK REST API 5.0);
 * - the HTTP Push application output: each application message POSTed to the
 *   configured URL with the configured Authorization header: `rx` for a frame
 *   (extended radio verbosity: `seqno`, `ts`, `fcnt`, `port`, `freq`, `rssi`,
 *   `snr`, `toa`, `dr`, `ack`, `bat`, `offline`, `data`), `gw` for the frame
 *   with its gateways, `txd` when a queued downlink is transmitted (`seqdn`,
 *   `seqq`, `port`, `data`, `gweui`, …), shaped as LORIOT sends them.
 *
 * LORIOT does not document its error bodies: this stand-in answers them as
 * JSON `{error}` with a 4xx status (401 for a wrong token), which the platform
 * reads as it would a plain text.
 *
 * The test drives the radio side: what a device sends (`uplink`), and when a
 * class A device's receive window takes the head of its queue (`transmit`).
 */
export interface LoriotItem {
  seqq: number;
  port: number;
  confirmed: boolean;
  /** Hexadecimal, as given. */
  data: string;
}

interface LoriotDevice {
  seqno: number;
  fcnt: number;
  seqdn: number;
  seqq: number;
  queue: LoriotItem[];
}

export class LoriotStandIn extends HttpStandIn<'failing'> {
  readonly requests: { method: string; path: string; headers: IncomingMessage['headers']; body: unknown }[] = [];
  readonly devices = new Map<string, LoriotDevice>();
  /** `up`: answering; `down`: every connection is dropped; `failing`: 503. */
  /** The HTTP Push output: where it posts, and its custom Authorization header. */
  output: { url: string; authorization: string } | null = null;

  constructor(
    readonly appid: string,
    readonly token: string,
    /** The application's devices, by EUI (upper case, as LORIOT writes them). */
    euis: string[],
  ) {
    super();
    for (const eui of euis) this.devices.set(eui.toUpperCase(), { seqno: 100, fcnt: 0, seqdn: 0, seqq: 0, queue: [] });
  }

  queueOf(eui: string): LoriotItem[] {
    return this.devices.get(eui.toUpperCase())?.queue ?? [];
  }

  protected async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let body: unknown = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = raw;
    }
    const path = new URL(req.url!, 'http://x').pathname;
    this.requests.push({ method: req.method!, path, headers: req.headers, body });
    const error = (status: number, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: message }));
    };
    if (this.mode === 'failing') return error(503, 'Service temporarily unavailable');
    if (req.headers.authorization !== `Bearer ${this.token}`) return error(401, 'Unauthorized');
    if (req.method === 'POST' && path === '/1/rest') {
      const m = body as Record<string, unknown> | null;
      if (!m || m.cmd !== 'tx') return error(400, 'cmd must be tx');
      if (typeof m.appid !== 'string' || !/^[0-9A-Fa-f]{8}$/.test(m.appid)) return error(400, 'appid must be 8 hex digits');
      if (m.appid.toUpperCase() !== this.appid) return error(403, 'Forbidden');
      if (typeof m.EUI !== 'string' || !/^[0-9A-Fa-f]{16}$/.test(m.EUI)) return error(400, 'EUI must be 16 hex digits');
      if (typeof m.port !== 'number' || !Number.isInteger(m.port) || m.port < 1 || m.port > 223) return error(400, 'port must be 1..223');
      if (typeof m.data !== 'string' || !/^([0-9A-Fa-f]{2})+$/.test(m.data)) return error(400, 'data must be a hexadecimal string of at least one byte');
      if (m.confirmed !== undefined && typeof m.confirmed !== 'boolean') return error(400, 'confirmed must be a boolean');
      const device = this.devices.get(m.EUI.toUpperCase());
      if (!device) return error(404, `Device ${m.EUI.toUpperCase()} not found`);
      device.seqq++;
      device.queue.push({ seqq: device.seqq, port: m.port, confirmed: m.confirmed === true, data: m.data });
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end('{}');
    }
    const flush = /^\/1\/nwk\/app\/([0-9A-F]{8})\/device\/([0-9A-F]{16})\/flushqueue$/.exec(path);
    if (req.method === 'POST' && flush) {
      if (flush[1] !== this.appid) return error(403, 'Forbidden');
      const device = this.devices.get(flush[2]!);
      if (!device) return error(404, `Device ${flush[2]} not found`);
      device.queue.length = 0;
      res.writeHead(204);
      return void res.end();
    }
    return error(404, 'Not found');
  }

  /** Every application message posted so far, in order: a test delivers one again, as LORIOT does after a time-out. */
  readonly pushed: unknown[] = [];

  /** Posts one application message to the HTTP Push output; resolves with the platform's answer. */
  async push(message: unknown): Promise<{ status: number; text: string }> {
    if (!this.output) throw new Error('the application has no HTTP Push output');
    this.pushed.push(message);
    const res = await fetch(this.output.url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: this.output.authorization }, body: JSON.stringify(message) });
    return { status: res.status, text: await res.text() };
  }

  /** A device's frame, as the `rx` message of the extended radio verbosity. */
  uplink(eui: string, port: number, payload: Buffer, extra: Record<string, unknown> = {}) {
    const device = this.devices.get(eui.toUpperCase());
    const seqno = device ? ++device.seqno : 1;
    const fcnt = device ? ++device.fcnt : 1;
    return this.push({
      cmd: 'rx',
      seqno,
      EUI: eui.toUpperCase(),
      ts: Date.now(),
      fcnt,
      port,
      freq: 867900000,
      rssi: -108,
      snr: 1.2,
      toa: 1155,
      dr: 'SF12 BW125 4/5',
      ack: false,
      bat: 255,
      offline: false,
      data: payload.toString('hex').toUpperCase(),
      ...extra,
    });
  }

  /** The same frame as `uplink` sent last, as the `gw` message with every gateway's view. */
  gateways(eui: string, port: number, payload: Buffer) {
    const device = this.devices.get(eui.toUpperCase())!;
    return this.push({
      cmd: 'gw',
      seqno: device.seqno,
      EUI: eui.toUpperCase(),
      ts: Date.now(),
      fcnt: device.fcnt,
      port,
      freq: 867900000,
      toa: 1155,
      dr: 'SF12 BW125 4/5',
      ack: false,
      gws: [
        { rssi: -106, snr: -4.5, ts: Date.now(), time: new Date().toISOString(), gweui: '7076FFFFFF053A13', ant: 0, lat: 57.013938, lon: 9.9874619 },
        { rssi: -115, snr: -9, ts: Date.now(), time: new Date().toISOString(), gweui: '7076FFFFFF053B07', ant: 0, lat: 57.02, lon: 9.99 },
      ],
      bat: 255,
      data: payload.toString('hex').toUpperCase(),
    });
  }

  /** The device's receive window: the head of its queue is transmitted, and a `txd` message posted. */
  async transmit(eui: string): Promise<LoriotItem | undefined> {
    const device = this.devices.get(eui.toUpperCase());
    const item = device?.queue.shift();
    if (!device || !item) return undefined;
    const seqdn = device.seqdn++;
    const res = await this.push({
      cmd: 'txd',
      EUI: eui.toUpperCase(),
      seqdn,
      seqq: item.seqq,
      ts: Date.now(),
      gweui: '7076FFFFFF053A13',
      freq: 869525000,
      sf: 12,
      codr: '4/5',
      toa: 1155,
      msgType: 'User DL',
      time: Date.now(),
      ackRequested: item.confirmed,
      port: item.port,
      data: item.data.toUpperCase(),
    });
    if (res.status !== 200) throw new Error(`the platform answered txd with ${res.status}: ${res.text}`);
    return item;
  }
}
