import { useEffect, useRef, useSyncExternalStore } from 'react';
import { ApiError, describe, get } from './api';
import { want } from './live';
import { session } from './session';

export type Device = Record<string, unknown> & { _id: string; name: string; reportedAt?: string; updatedAt?: string };

export type DeviceState =
  | { status: 'loading' }
  | { status: 'ok'; device: Device }
  /** 404: the device does not exist or the user may not read it; the API does not tell which. */
  | { status: 'noaccess' }
  | { status: 'error'; message: string };

/** A change of one device, as it arrived live: the changed fields and when. */
export interface Change {
  deviceId: string;
  diff: Record<string, unknown>;
  time: number;
}

const states = new Map<string, DeviceState>();
const listeners = new Map<string, Set<() => void>>();
const changeListeners = new Set<(c: Change) => void>();
const inflight = new Map<string, Promise<void>>();
/** Moves on at each log out: a read sent for the user who left is not kept. */
let generation = 0;

const notify = (id: string) => {
  for (const l of listeners.get(id) ?? []) l();
};

function put(id: string, state: DeviceState): void {
  states.set(id, state);
  notify(id);
}

const stamp = (d: Device) => Date.parse(String(d.updatedAt ?? '')) || 0;

/** Fetches a device (once at a time) into the cache; `fresh` waits out a read in flight and reads again. */
export function load(id: string, fresh = false): Promise<void> {
  let p = inflight.get(id);
  if (p) return fresh ? p.then(() => load(id)) : p;
  const sentIn = generation;
  p = get<Device>(`/api/iotnodes/${encodeURIComponent(id)}`)
    .then(
      (device) => {
        if (sentIn !== generation) return;
        // A read that was sent before a live change arrived must not undo it.
        const current = states.get(id);
        if (current?.status === 'ok' && stamp(current.device) > stamp(device)) return;
        put(id, { status: 'ok', device });
      },
      (error) => {
        if (sentIn === generation) put(id, error instanceof ApiError && error.status === 404 ? { status: 'noaccess' } : { status: 'error', message: describe(error, 'Reading the device') });
      },
    )
    .finally(() => {
      if (inflight.get(id) === p) inflight.delete(id);
    });
  inflight.set(id, p);
  return p;
}

/**
 * What the cache holds was read with the token of the user who logged out: it
 * is dropped, so a next user in this tab reads every device again with their
 * own (and sees "no access" where they have none).
 */
export function forgetDevices(): void {
  generation++;
  states.clear();
  inflight.clear();
}
session.subscribe(() => {
  if (!session.get()) forgetDevices();
});

/** Reloads every device in the cache (after the live connection was down). */
export const reloadAll = () => Promise.all([...states.keys()].map((id) => load(id, true)));

export function deviceState(id: string): DeviceState {
  return states.get(id) ?? { status: 'loading' };
}

function subscribe(id: string, listener: () => void): () => void {
  let set = listeners.get(id);
  if (!set) listeners.set(id, (set = new Set()));
  set.add(listener);
  return () => set!.delete(listener);
}

/** The device with this id, kept up to date by the live channel. */
export function useDevice(id: string | undefined): DeviceState {
  const key = id ?? '';
  useEffect(() => {
    if (!key) return;
    if (!states.has(key)) {
      states.set(key, { status: 'loading' });
      void load(key);
    }
    want([key]);
  }, [key]);
  return useSyncExternalStore(
    (l) => subscribe(key, l),
    () => (key ? deviceState(key) : NO_DEVICE),
  );
}
const NO_DEVICE: DeviceState = { status: 'error', message: 'No device is chosen.' };

/** Applies a change that arrived on the live channel. */
export function applyLive(device: Device, diff: Record<string, unknown>, time: number): void {
  put(device._id, { status: 'ok', device });
  const change = { deviceId: device._id, diff, time };
  for (const l of changeListeners) l(change);
}

/** Calls `listener` for each live change of any device until the returned function is called. */
export function onChange(listener: (c: Change) => void): () => void {
  changeListeners.add(listener);
  return () => changeListeners.delete(listener);
}

/** The value at a field path (`temperature`, `stats.cpu`, `devices.3.temperature`). */
export function valueAt(doc: unknown, path: string): unknown {
  let v: unknown = doc;
  for (const part of path.split('.')) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

/** Whether a change touches a field path (its top-level name is in the diff). */
export const touches = (change: Change, path: string) => Object.hasOwn(change.diff, path.split('.')[0]!);

/** Several devices at once, in the order of `ids`. */
export function useDevices(ids: string[]): DeviceState[] {
  const key = ids.join(',');
  useEffect(() => {
    for (const id of ids) {
      if (id && !states.has(id)) {
        states.set(id, { status: 'loading' });
        void load(id);
      }
    }
    want(ids);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);
  const cache = useRef<{ key: string; parts: DeviceState[]; value: DeviceState[] } | null>(null);
  const snapshot = () => {
    const parts = ids.map((id) => (id ? deviceState(id) : NO_DEVICE));
    const c = cache.current;
    if (c && c.key === key && c.parts.length === parts.length && c.parts.every((p, i) => p === parts[i])) return c.value;
    cache.current = { key, parts, value: parts };
    return parts;
  };
  return useSyncExternalStore((l) => {
    const offs = ids.map((id) => subscribe(id, l));
    return () => offs.forEach((o) => o());
  }, snapshot);
}

/** Every `deviceId` in a widget's settings, at any depth. */
export function deviceIdsIn(settings: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(settings)) for (const v of settings) deviceIdsIn(v, out);
  else if (settings && typeof settings === 'object')
    for (const [k, v] of Object.entries(settings)) {
      if (k === 'deviceId' && typeof v === 'string') out.add(v);
      else if (typeof v === 'object') deviceIdsIn(v, out);
    }
  return out;
}

/** Starts reading devices before the widgets that show them are drawn. */
export function prefetch(ids: Iterable<string>): void {
  for (const id of ids) {
    if (!id || states.has(id)) continue;
    states.set(id, { status: 'loading' });
    void load(id);
  }
}
