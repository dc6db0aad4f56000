import type { MqttClient } from 'mqtt';
import { api, describe } from './api';
import { createStore } from './store';
import { session } from './session';
import { applyLive, load, reloadAll, type Device } from './devices';

/**
 * Live data: the panel adds the devices it shows to the user's live channel
 * (`POST /api/live-channel/devices`), whose recipient is the user, and logs in
 * to the platform's MQTT broker over WebSocket (`/mqtt`) with the user id and
 * access token, subscribed to `svc/output/v2/<userId>/iotnode/+`. Each message
 * `{iotnode, diff, event}` replaces the device in the cache.
 */
export type LiveStatus = { state: 'off' | 'connecting' | 'online' } | { state: 'down'; message: string };
export const liveStatus = createStore<LiveStatus>({ state: 'off' });
// On the page too (`<html data-live="online">`), for tools that wait for live data.
liveStatus.subscribe(() => {
  document.documentElement.dataset.live = liveStatus.get().state;
});

const wanted = new Set<string>();
const pending = new Set<string>();
let flushTimer: ReturnType<typeof setTimeout> | null = null;
let client: MqttClient | null = null;
let connecting: Promise<void> | null = null;
const seen: string[] = [];
const seenSet = new Set<string>();

/** Adds devices to the live channel (batched), and connects if not yet connected. */
export function want(ids: string[]): void {
  for (const id of ids) {
    if (!id || wanted.has(id)) continue;
    wanted.add(id);
    pending.add(id);
  }
  if (pending.size && !flushTimer) flushTimer = setTimeout(flush, 50);
  // The broker connection (and MQTT.js itself) waits for the page to finish its first render; reading the devices
  // again once subscribed catches any change in between.
  if (!client && !connecting && !idleQueued) {
    idleQueued = true;
    const go = () => {
      idleQueued = false;
      void connect();
    };
    if ('requestIdleCallback' in window) requestIdleCallback(go, { timeout: 1000 });
    else setTimeout(go, 200);
  }
}
let idleQueued = false;

async function flush(): Promise<void> {
  flushTimer = null;
  const devices = [...pending].filter((id) => /^[0-9a-f]{24}$/.test(id));
  pending.clear();
  if (!devices.length || !session.get()) return;
  try {
    await api('POST', '/api/live-channel/devices', { body: { devices } });
    // A report between the first read and the channel taking the device is caught by reading it again.
    await Promise.all(devices.map((id) => load(id, true)));
  } catch (error) {
    for (const id of devices) wanted.delete(id);
    liveStatus.set({ state: 'down', message: describe(error, 'Starting live updates') });
  }
}

function remember(eventId: string): boolean {
  if (seenSet.has(eventId)) return false;
  seenSet.add(eventId);
  seen.push(eventId);
  if (seen.length > 2000) seenSet.delete(seen.shift()!);
  return true;
}

function connect(): Promise<void> {
  if (client || connecting) return connecting ?? Promise.resolve();
  const s = session.get();
  if (!s) return Promise.resolve();
  liveStatus.set({ state: 'connecting' });
  connecting = import('mqtt')
    .then(({ default: mqtt }) => {
      const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/mqtt`;
      const topic = `svc/output/v2/${s.user.id}/iotnode/+`;
      const c = mqtt.connect(url, {
        username: s.user.id,
        password: s.token,
        clientId: `panel-${s.user.id.slice(0, 8)}-${Math.random().toString(16).slice(2, 10)}`,
        protocolVersion: 4,
        clean: true,
        reconnectPeriod: 2000,
        connectTimeout: 10_000,
        // The token may have been renewed since the last attempt.
        transformWsUrl: (u, options) => {
          options.password = session.get()?.token ?? options.password;
          return u;
        },
      });
      client = c;
      c.on('connect', () => {
        c.subscribe(topic, { qos: 1 }, (err) => {
          if (err) liveStatus.set({ state: 'down', message: `The live subscription was refused: ${err.message}` });
          else {
            liveStatus.set({ state: 'online' });
            void reloadAll();
          }
        });
      });
      c.on('message', (_topic, payload) => {
        try {
          const msg = JSON.parse(new TextDecoder().decode(payload)) as { iotnode: Device; diff: Record<string, unknown>; event?: { id?: string; time?: string } };
          if (!msg?.iotnode?._id) return;
          if (msg.event?.id && !remember(msg.event.id)) return;
          const time = Date.parse((msg.iotnode.reportedAt as string) ?? msg.event?.time ?? '') || Date.now();
          applyLive(msg.iotnode, msg.diff ?? {}, time);
        } catch {
          // Not a device change; nothing to show.
        }
      });
      c.on('error', (err) => liveStatus.set({ state: 'down', message: `Live updates failed: ${err.message}. Retrying…` }));
      c.on('offline', () => liveStatus.set({ state: 'down', message: 'Live updates are interrupted: the connection to the platform dropped. Reconnecting…' }));
      c.on('reconnect', () => {
        if (liveStatus.get().state !== 'down') liveStatus.set({ state: 'connecting' });
      });
    })
    .catch((error: unknown) => {
      liveStatus.set({ state: 'down', message: `Live updates could not start: ${(error as Error).message}` });
    })
    .finally(() => {
      connecting = null;
    });
  return connecting;
}

/** Ends the live connection and forgets what it held (log out): the next user starts from nothing. */
export function stopLive(): void {
  client?.end(true);
  client = null;
  wanted.clear();
  pending.clear();
  seen.length = 0;
  seenSet.clear();
  liveStatus.set({ state: 'off' });
}

session.subscribe(() => {
  if (!session.get()) stopLive();
});
