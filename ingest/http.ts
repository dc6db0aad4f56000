import type { Logger } from 'pino';
import type { Registry } from './registry.js';
import type { LogWriter } from './logWriter.js';
import type { Change } from './output.js';

/**
 * Retry policy of `http` channels: up to 5 attempts per message, waiting
 * 250 ms, 500 ms, 1 s and 2 s between them; each request times out after
 * 5 s. A 2xx answer is a delivery; 4xx answers other than 408 and 429 are
 * final at once. A message that finally fails is logged on the device, and
 * the device's next message is sent after it, so per-device order holds.
 */
export const HTTP_RETRY = { attempts: 5, firstDelayMs: 250, timeoutMs: 5000 };
/** Devices delivered at the same time. */
const PARALLEL_DEVICES = 16;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Target {
  channelId: string;
  url: string;
  headers: Record<string, string>;
}

export function httpDelivery(registry: Registry, logs: LogWriter, log: Logger, retry = HTTP_RETRY) {
  async function post(target: Target, body: string): Promise<{ ok: boolean; final: boolean; why: string }> {
    try {
      const res = await fetch(target.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...target.headers },
        body,
        signal: AbortSignal.timeout(retry.timeoutMs),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.ok) return { ok: true, final: true, why: '' };
      const final = res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429;
      return { ok: false, final, why: `HTTP ${res.status}` };
    } catch (err) {
      return { ok: false, final: false, why: (err as Error).message };
    }
  }

  async function deliver(deviceId: string, target: Target, body: string): Promise<void> {
    let why = '';
    for (let attempt = 1; attempt <= retry.attempts; attempt++) {
      const result = await post(target, body);
      if (result.ok) return;
      why = result.why;
      if (result.final || attempt === retry.attempts) break;
      await sleep(retry.firstDelayMs * 2 ** (attempt - 1));
    }
    log.warn({ deviceId, channelId: target.channelId, why }, 'http channel delivery failed');
    logs.write(
      {
        resourceId: deviceId,
        resourceType: 'device',
        type: 'error',
        priority: 'high',
        category: 'system',
        message: `Channel ${target.channelId}: delivery to ${new URL(target.url).origin} failed (${why})`,
        data: { channelId: target.channelId },
      },
      `http channel ${target.channelId}`,
    );
  }

  return async (changes: Change[]): Promise<void> => {
    // Per device, in order; devices side by side.
    const perDevice = new Map<string, { target: Target; body: string }[]>();
    for (const change of changes) {
      for (const channel of registry.channelsOf(change.deviceId)) {
        if (channel.protocol !== 'http') continue;
        const http = channel.doc.http as { url: string; headers?: Record<string, string> };
        const headers: Record<string, string> = { ...(http.headers ?? {}) };
        if (channel.secrets.authorization) headers.Authorization = channel.secrets.authorization;
        const list = perDevice.get(change.deviceId) ?? [];
        list.push({ target: { channelId: channel.id, url: http.url, headers }, body: JSON.stringify(change.message) });
        perDevice.set(change.deviceId, list);
      }
    }
    const queue = [...perDevice.entries()];
    const workers = Array.from({ length: Math.min(PARALLEL_DEVICES, queue.length) }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        const [deviceId, items] = next;
        for (const item of items) await deliver(deviceId, item.target, item.body);
      }
    });
    await Promise.all(workers);
  };
}
