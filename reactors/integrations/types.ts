import type { CommandRequest } from '../../domain/commands/command.js';
import { answerText, failureOf, type Fetch } from '../outbound.js';
import type { IntegrationName } from '../../domain/integrations/catalog.js';
import type { ConnectorInfo } from '../../ingest/registry.js';

/**
 * An integration's adapters, one module per integration under
 * `reactors/integrations/<name>/`. What the network server sends is turned
 * into `InboundEvent`s (pure, `parse`); commands go out through `execute`,
 * called by the command delivery reactor from the stored `CommandRequested`.
 */
export interface IntegrationModule {
  name: IntegrationName;
  /** Its webhook, `POST /api/integrations/<path>/{connectorId}`; absent for integrations that push nothing. */
  webhook?: WebhookAdapter;
  /** How its commands reach the network server or broker; absent for integrations that take none. */
  downlink?: DownlinkAdapter;
}

/** How the network server names the device an event is about. */
export interface DeviceRef {
  devEui?: string | null;
  networkDeviceId?: string | null;
  /** The device's `secret` (GenericHttp), among the connector's devices. */
  secret?: string | null;
}

/** The radio side of an uplink, kept on the device as its `radio` field (history keeps each number). */
export interface Radio {
  fCnt?: number;
  rssi?: number;
  snr?: number;
  frequency?: number;
  dataRate?: number | string;
  spreadingFactor?: number;
  gatewayId?: string;
  gateways?: number;
  devAddr?: string;
}

export type InboundEvent =
  | {
      type: 'uplink';
      device: DeviceRef;
      /** The raw frame, decoded by the device's translator: `{hexEncoded, port}`; null for a report without one. */
      encoded: { hexEncoded: string; port: number } | null;
      radio: Radio;
      /** Fields reported as they are (the GenericHttp JSON report), besides or instead of the raw frame. */
      fields?: Record<string, unknown>;
      /** The network server's id of this message (ChirpStack's deduplicationId …): a repeated delivery is stored once. */
      messageId: string;
      /** When the network server received it. */
      receivedAt?: string;
    }
  | {
      type: 'downlinkSent' | 'downlinkAcked' | 'downlinkFailed';
      device: DeviceRef;
      /** The network server's id of the queue item, as its answer to the queueing gave it. */
      networkItemId?: string;
      /** The platform's command id, where the network server carries it back (The Things Stack's correlation ids). */
      commandId?: string;
      /** Where the network server names neither, which of the device's downlinks it means: see `DownlinkMatch`. */
      match?: DownlinkMatch;
      /**
       * The network server's id of this report, or the fields a repeated delivery of it repeats: the outcome's event
       * id is derived from it, so a report delivered again is recorded once and never moves the next matching command.
       */
      messageId?: string;
      reason?: string;
      expired?: boolean;
      fCntDown?: number;
      gatewayId?: string;
    }
  /** Something worth a line in the device's log (a join, a status report, the network server's own log entry). */
  | { type: 'note'; device: DeviceRef; level: 'info' | 'warning' | 'error'; category: 'status' | 'command' | 'system'; message: string }
  /** An event the platform has no use for (a kind the network server sends that is not handled); answered 200 and not stored. */
  | { type: 'ignored'; why: string };

/**
 * A downlink told by what it is rather than by an id: the device's oldest one
 * still queued with this port and payload, where the server tells them (a
 * queue is sent in order: LORIOT's `txd`, ThingPark's `DevEUI_downlink_Sent`);
 * or its latest confirmed one sent, which an uplink's ACK bit acknowledges.
 */
export type DownlinkMatch = { queued: { fPort?: number; hex?: string } } | { lastConfirmed: true };

export interface WebhookAdapter {
  /** The path segment of its webhook: `chirpstack`, `the-things-stack`, `http`, … */
  path: string;
  /** What the request says; a body that breaks the network server's format throws a `ValidationError` naming the field. */
  parse(body: unknown, query: Record<string, unknown>): InboundEvent[];
}

/** What the network server made of a command. A failure to reach it throws `Unreachable` instead. */
export type Outcome =
  | { type: 'accepted'; networkItemId?: string; items?: Record<string, unknown>[] }
  | { type: 'refused'; status?: number; message: string };

/** The network server (or broker) could not be reached or failed on its side: the command is tried again later. */
export class Unreachable extends Error {
  /** True when the request may have reached the server (a time-out after sending): check before queueing again. */
  constructor(
    message: string,
    readonly maybeDone = false,
  ) {
    super(message);
  }
}

export interface DownlinkContext {
  /** 1 for the first attempt. */
  attempt: number;
  /** An earlier attempt may have queued it already: look for it before queueing again. */
  maybeDone: boolean;
  /**
   * Publishes on the connector's broker: the platform's own (internal), or the external broker it names.
   * `key` (the command id) makes a retry of a publish still in flight wait for that one instead of sending again.
   */
  publish(connector: ConnectorInfo, topic: string, message: string, key?: string): Promise<void>;
  /** Bounded wait for any one HTTP call to the network server. */
  timeoutMs: number;
  /** The HTTP client for the network server's API, within `OUTBOUND_TARGETS`. */
  http: Fetch;
}

export interface DownlinkAdapter {
  execute(request: CommandRequest, connector: ConnectorInfo, context: DownlinkContext): Promise<Outcome>;
}

/** The write-only setting `name` of a connector (`chirpstack.apiToken`), or ''. */
export const secretOf = (connector: ConnectorInfo, name: string): string => connector.secrets.settings?.[name] ?? '';

/** A connector's settings object of its integration (`chirpstack: {url, …}`). */
export const settingsOf = (connector: ConnectorInfo, field: string): Record<string, unknown> => (connector.doc[field] as Record<string, unknown> | undefined) ?? {};

/** Calls a network server's HTTP API: a network failure or a 5xx/429 is `Unreachable`, any other answer is returned. */
export async function callApi(context: Pick<DownlinkContext, 'http' | 'timeoutMs'>, url: string, init: RequestInit): Promise<{ status: number; body: unknown; text: string }> {
  const { timeoutMs } = context;
  let res: Response;
  try {
    res = await context.http(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const timedOut = (err as Error).name === 'TimeoutError';
    // Only a connection that was never made proves the request did not arrive; a reset or a time-out may follow a request the server took.
    const code = ((err as { cause?: { code?: unknown } }).cause?.code ?? '') as string;
    const notSent = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EOUTBOUNDREFUSED'].includes(code);
    throw new Unreachable(timedOut ? `no answer from ${new URL(url).origin} within ${timeoutMs} ms` : `${new URL(url).origin} cannot be reached: ${failureOf(err)}${code ? ` (${code})` : ''}`, !notSent);
  }
  const text = await answerText(res);
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (res.status >= 500 || res.status === 429 || res.status === 408) throw new Unreachable(`${new URL(url).origin} answered ${res.status}: ${messageOf(body, text)}`, res.status >= 500);
  return { status: res.status, body, text };
}

/** The message of a network server's error body (`{message}`, `{error}`, or the text itself), cut short. */
export function messageOf(body: unknown, text: string): string {
  const b = body as { message?: unknown; error?: unknown; detail?: unknown } | null;
  const message = typeof b?.message === 'string' ? b.message : typeof b?.error === 'string' ? b.error : typeof b?.detail === 'string' ? b.detail : text;
  return (message || 'no message').slice(0, 500);
}
