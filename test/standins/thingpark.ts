import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { HttpStandIn } from './server.js';

/**
 * A stand-in for Actility ThingPark, the parts the platform uses, as
 * ThingPark documents them:
 *
 * - the DX Admin API's OAuth2 client credentials flow:
 *   `POST /admin/latest/api/oauth/token` with the form
 *   `grant_type=client_credentials&client_id=…&client_secret=…` →
 *   `{expires_in, client_id, token_type: 'bearer', access_token, scope, jti}`;
 * - the DX Core API's downlink sending:
 *   `POST /core/latest/api/devices/{device}/downlinkMessages?confirmDownlink=…&flushDownlinkQueue=…`
 *   (`{device}` the device's ref or DevEUI) with `{payloadHex, targetPorts}` and
 *   `Authorization: Bearer <access token>`; the message is queued at the LRC
 *   until the device can take it, in order;
 * - the LRC's reports to an HTTP application server, JSON content, with the
 *   `LrnDevEui`, `LrnFPort` and `LrnInfos` query parameters it adds, and the
 *   Authorization header the route is configured with: `DevEUI_uplink`,
 *   `DevEUI_downlink_Sent` (`DeliveryStatus` 1 sent, 0 not, with
 *   `DeliveryFailedCause1..3`), `DevEUI_downlink_Rejected`, `DevEUI_notification`.
 *
 * ThingPark documents its error statuses, not their bodies: this stand-in
 * answers them as `{code, message}` (OAuth2's `{error, error_description}` for
 * the token), which the platform reads as it would a plain text.
 */
export interface ThingParkItem {
  payloadHex: string;
  fPort: number;
  confirmed: boolean;
}

export class ThingParkStandIn extends HttpStandIn<'failing'> {
  readonly requests: { method: string; path: string; query: URLSearchParams; headers: IncomingMessage['headers']; body: unknown; raw: string }[] = [];
  readonly queues = new Map<string, ThingParkItem[]>();
  private readonly tokens = new Set<string>();
  /** `up`: answering; `down`: every connection is dropped; `failing`: 503. */
  private fCntUp = 0;
  private fCntDn = 0;
  /** The application server route: where the LRC posts, and the Authorization header it adds. */
  route: { url: string; authorization: string } | null = null;

  constructor(
    readonly clientId: string,
    readonly clientSecret: string,
    /** The devices of the subscriber, by DevEUI (upper case, as ThingPark writes them). */
    euis: string[],
    /** The lifetime of the tokens it issues, in seconds. */
    readonly expiresIn = 92762,
  ) {
    super();
    for (const eui of euis) this.queues.set(eui.toUpperCase(), []);
  }

  queueOf(eui: string): ThingParkItem[] {
    return this.queues.get(eui.toUpperCase()) ?? [];
  }

  /** Every token issued so far stops being valid (revoked, or expired early). */
  revokeTokens(): void {
    this.tokens.clear();
  }

  protected async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const url = new URL(req.url!, 'http://x');
    let body: unknown = raw;
    if ((req.headers['content-type'] ?? '').startsWith('application/json')) {
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = raw;
      }
    }
    this.requests.push({ method: req.method!, path: url.pathname, query: url.searchParams, headers: req.headers, body, raw });
    const reply = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const error = (status: number, message: string) => reply(status, { code: status, message });
    if (this.mode === 'failing') return error(503, 'Service Unavailable');
    if (req.method === 'POST' && url.pathname === '/admin/latest/api/oauth/token') {
      if (!(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return reply(400, { error: 'invalid_request', error_description: 'a form is expected' });
      const form = new URLSearchParams(raw);
      if (form.get('grant_type') !== 'client_credentials') return reply(400, { error: 'unsupported_grant_type', error_description: 'Unsupported grant type' });
      if (form.get('client_id') !== this.clientId || form.get('client_secret') !== this.clientSecret) return reply(401, { error: 'invalid_client', error_description: 'Bad client credentials' });
      const token = randomBytes(24).toString('base64url');
      this.tokens.add(token);
      return reply(200, { expires_in: this.expiresIn, client_id: this.clientId, token_type: 'bearer', access_token: token, scope: '[SUBSCRIBER:983]', jti: randomUUID() });
    }
    const downlink = /^\/core\/latest\/api\/devices\/([^/]+)\/downlinkMessages$/.exec(url.pathname);
    if (req.method === 'POST' && downlink) {
      const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '');
      if (!bearer || !this.tokens.has(bearer[1]!)) return error(401, 'Invalid or expired access token');
      const queue = this.queues.get(downlink[1]!.toUpperCase());
      if (!queue) return error(404, `Device ${downlink[1]} not found`);
      const m = body as Record<string, unknown> | null;
      if (!m || typeof m.payloadHex !== 'string' || !/^([0-9A-Fa-f]{2})+$/.test(m.payloadHex)) return error(400, 'payloadHex must be hexadecimal');
      if (typeof m.targetPorts !== 'string' || !/^\d{1,3}$/.test(m.targetPorts) || Number(m.targetPorts) < 1 || Number(m.targetPorts) > 223) return error(400, 'targetPorts must be a port, 1 to 223');
      if (url.searchParams.get('flushDownlinkQueue') === 'true') queue.length = 0;
      queue.push({ payloadHex: m.payloadHex, fPort: Number(m.targetPorts), confirmed: url.searchParams.get('confirmDownlink') === 'true' });
      return reply(200, { payloadHex: m.payloadHex, targetPorts: m.targetPorts });
    }
    return error(404, 'Not Found');
  }

  /** Every report posted so far, in order, with its query's device and port: a test delivers one again, as the LRC does after a time-out. */
  readonly posted: [report: unknown, eui: string, fPort: number | string][] = [];

  /** Posts one report to the application server route, as the LRC does; resolves with the platform's answer. */
  async post(report: unknown, eui = '', fPort: number | string = ''): Promise<{ status: number; text: string }> {
    if (!this.route) throw new Error('no application server route');
    this.posted.push([report, eui, fPort]);
    const query = new URLSearchParams({ LrnDevEui: eui.toUpperCase(), LrnFPort: String(fPort), LrnInfos: 'TWA_100000001.999.AS-1-716634' });
    const res = await fetch(`${this.route.url}?${query}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: this.route.authorization }, body: JSON.stringify(report) });
    return { status: res.status, text: await res.text() };
  }

  /** A device's frame, as the `DevEUI_uplink` report; `strings` gives its numbers as earlier LRC versions do. */
  uplink(eui: string, fPort: number, payload: Buffer, extra: Record<string, unknown> = {}, strings = false) {
    const fCnt = ++this.fCntUp;
    const n = (v: number) => (strings ? v.toFixed(6).replace(/\.?0+$/, '') : v);
    return this.post(
      {
        DevEUI_uplink: {
          Time: new Date().toISOString().replace('Z', '+00:00'),
          DevEUI: eui.toUpperCase(),
          FPort: strings ? String(fPort) : fPort,
          FCntUp: strings ? String(fCnt) : fCnt,
          ADRbit: 1,
          MType: 2,
          FCntDn: this.fCntDn,
          payload_hex: payload.toString('hex'),
          mic_hex: 'cfffc70f',
          Lrcid: '00000206',
          LrrRSSI: strings ? '-80.000000' : -80,
          LrrSNR: strings ? '7.000000' : 7,
          LrrESP: -80.7901,
          SpFact: n(7),
          SubBand: 'G2',
          Channel: 'LC6',
          DevLrrCnt: n(2),
          Lrrid: '004A18E3',
          Late: 0,
          LrrLAT: 45.851032,
          LrrLON: 1.26623,
          Lrrs: {
            Lrr: [
              { Lrrid: '004A18E3', Chain: 0, LrrRSSI: -80, LrrSNR: 7, LrrESP: -80.7901 },
              { Lrrid: '004A1777', Chain: 0, LrrRSSI: -101, LrrSNR: -2.5, LrrESP: -104.6 },
            ],
          },
          CustomerID: '1100000077',
          CustomerData: { alr: { pro: 'LORA/Generic', ver: '1' } },
          ModelCfg: '0',
          InstantPER: 0,
          MeanPER: 0,
          DevAddr: '04D2848E',
          AckRequested: 0,
          rawMacCommands: '',
          TxPower: 2,
          NbTrans: 1,
          Frequency: 868.1,
          DynamicClass: 'A',
          ...extra,
        },
      },
      eui,
      fPort,
    );
  }

  /** The device's receive window: the head of its queue goes (or fails to go) over the air, and `DevEUI_downlink_Sent` is posted. */
  async transmit(eui: string, deliveryStatus: 0 | 1 = 1, failedCause1 = '00', failedCause2 = '00'): Promise<ThingParkItem | undefined> {
    const item = this.queueOf(eui).shift();
    if (!item) return undefined;
    if (deliveryStatus === 1) this.fCntDn++;
    const res = await this.post(
      {
        DevEUI_downlink_Sent: {
          Time: new Date().toISOString().replace('Z', '+00:00'),
          DevEUI: eui.toUpperCase(),
          FPort: item.fPort,
          FCntDn: this.fCntDn,
          FCntUp: this.fCntUp,
          Lrcid: '0000000F',
          SpFact: 7,
          SubBand: 'G1',
          Channel: 'LC2',
          Lrrid: 'FF0106DE',
          DeliveryStatus: deliveryStatus,
          DeliveryFailedCause1: failedCause1,
          DeliveryFailedCause2: failedCause2,
          DeliveryFailedCause3: '00',
          CustomerID: '1100000077',
          CustomerData: { alr: { pro: 'LORA/Generic', ver: '1' } },
          TransmissionSlot: deliveryStatus === 1 ? 1 : 0,
          Frequency: 868.3,
        },
      },
      eui,
      item.fPort,
    );
    if (res.status !== 200) throw new Error(`the platform answered DevEUI_downlink_Sent with ${res.status}: ${res.text}`);
    return item;
  }

  /** The LRC refuses the head of the device's queue, and posts `DevEUI_downlink_Rejected`. */
  async reject(eui: string, cause: string): Promise<ThingParkItem | undefined> {
    const item = this.queueOf(eui).shift();
    if (!item) return undefined;
    await this.post({ DevEUI_downlink_Rejected: { Time: new Date().toISOString(), DevEUI: eui.toUpperCase(), FPort: item.fPort, DeliveryStatus: 350, DownlinkRejectionCause: cause, CustomerID: '1100000077' } }, eui, item.fPort);
    return item;
  }

  notification(eui: string, type: 'join' | 'reset' | 'devstatusans', var1 = '', var2 = '') {
    return this.post(
      { DevEUI_notification: { Time: new Date().toISOString(), DevEUI: eui.toUpperCase(), Lrcid: '00000065', DevAddr: '0405F519', CustomerID: '100000507', CustomerData: { alr: { pro: 'STL', ver: '1' } }, FCntDn: this.fCntDn, Type: type, Var1: var1, Var2: var2 } },
      eui,
    );
  }
}
