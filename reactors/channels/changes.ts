import type { Kysely } from 'kysely';
import type { EventStore } from '../../domain/eventstore/port.js';
import type { Position, RecordedEvent } from '../../domain/shared/events.js';
import { deviceStream, diffDocs, evolveDoc, isDeviceStream, presentDevice, type DeviceDoc, type DeviceEvent } from '../../domain/devices/device.js';
import { RecentMemory } from '../../domain/shared/recentMemory.js';
import type { Database } from '../../projections/database.js';

/** What a channel receives for each change of a device. */
export interface ChangeMessage {
  /** The device after the change. */
  iotnode: DeviceDoc;
  /** Only the changed top-level attributes (a removed one is `null`). */
  diff: DeviceDoc;
  /** What happened. */
  event: { id: string; type: string; time: string; actor: string };
}

export interface Change {
  deviceId: string;
  message: ChangeMessage;
  /** The global position of the event that made the change. */
  position: Position;
}

const CHANGE_EVENTS = new Set(['DeviceRegistered', 'DeviceUpdated', 'DeviceReported']);
const DEVICE_CACHE = 20_000;

/**
 * Folds device events into "device after, diff" pairs. Each device's state
 * is cached; on a miss (or a gap) it is rebuilt from the read model plus the
 * stream, so the diff is exact whatever the subscriber's position.
 */
export class ChangeTracker {
  private cache = new RecentMemory<string, { revision: number; doc: DeviceDoc | null }>(DEVICE_CACHE);

  constructor(
    private readonly store: EventStore,
    private readonly db: Kysely<Database>,
  ) {}

  /** The changes of the devices `wants` names; other devices are skipped (and rebuilt when they are wanted again). */
  async changes(batch: RecordedEvent[], wants: (deviceId: string) => boolean = () => true): Promise<Change[]> {
    const out: Change[] = [];
    await this.prefetch(batch, wants);
    for (const e of batch) {
      if (!e.type.startsWith('Device') || !isDeviceStream(e.streamId)) continue;
      const event = e as RecordedEvent & DeviceEvent;
      const id = event.data.id;
      if (!wants(id)) continue;
      if (event.type === 'DeviceDeleted') {
        this.put(id, event.revision, null);
        continue;
      }
      const before = await this.before(id, event.revision);
      const after = event.type === 'DeviceRegistered' ? evolveDoc({}, event) : before ? evolveDoc(before, event) : null;
      this.put(id, event.revision, after);
      if (!after || !CHANGE_EVENTS.has(event.type)) continue;
      const diff = diffDocs(before ?? {}, after);
      if (Object.keys(diff).length === 0) continue;
      out.push({
        deviceId: id,
        position: event.position,
        message: { iotnode: presentDevice(id, after), diff, event: { id: event.id, type: event.type, time: event.metadata.time, actor: event.metadata.actor } },
      });
    }
    return out;
  }

  /**
   * Loads, in one query, the read-model rows of the devices whose first event
   * in this batch does not follow the cache; `before` then rarely needs the store.
   */
  private async prefetch(batch: RecordedEvent[], wants: (deviceId: string) => boolean): Promise<void> {
    this.rows.clear();
    const first = new Map<string, number>();
    for (const e of batch) {
      if (!isDeviceStream(e.streamId)) continue;
      const id = (e.data as { id: string }).id;
      if (first.has(id) || !wants(id)) continue;
      const cached = this.cache.get(id);
      first.set(id, e.revision === 0 || (cached && cached.revision === e.revision - 1) ? -1 : e.revision);
    }
    const ids = [...first].filter(([, r]) => r > 0).map(([id]) => id);
    if (ids.length === 0) return;
    const rows = new Map((await this.db.selectFrom('devices').select(['id', 'doc', 'revision']).where('id', 'in', ids).execute()).map((r) => [r.id, r]));
    // Devices whose read-model row is not exactly the state before: fold the missing part of their stream, several at a time.
    const queue = ids.slice();
    const work = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        const revision = first.get(id)!;
        const row = rows.get(id);
        const base = row && row.revision <= revision - 1 ? { doc: row.doc as DeviceDoc | null, from: row.revision + 1 } : { doc: null, from: 0 };
        this.rows.set(id, { doc: await this.fold(id, base.doc, base.from, revision), revision: revision - 1 });
      }
    };
    await Promise.all(Array.from({ length: 16 }, work));
  }

  /** Folds the stream's events from `from` up to (not including) `to` onto `doc`. */
  private async fold(id: string, doc: DeviceDoc | null, from: number, to: number): Promise<DeviceDoc | null> {
    if (from >= to) return doc;
    const events = await this.store.readStream(deviceStream(id), { fromRevision: from, limit: to - from });
    for (const e of events as (RecordedEvent & DeviceEvent)[]) {
      if (e.type === 'DeviceRegistered') doc = evolveDoc({}, e);
      else if (e.type === 'DeviceDeleted') doc = null;
      else if (doc) doc = evolveDoc(doc, e);
    }
    return doc;
  }

  /** Read-model rows fetched for the current batch. */
  private rows = new Map<string, { doc: DeviceDoc | null; revision: number }>();

  private put(id: string, revision: number, doc: DeviceDoc | null): void {
    this.cache.set(id, { revision, doc });
  }

  /** The device just before `revision`; null when it did not exist. */
  private async before(id: string, revision: number): Promise<DeviceDoc | null> {
    const cached = this.cache.get(id);
    if (cached && cached.revision === revision - 1) return cached.doc;
    if (revision === 0) return null;
    const row = this.rows.get(id);
    if (row && row.revision === revision - 1) return row.doc;
    return this.fold(id, null, 0, revision);
  }
}

