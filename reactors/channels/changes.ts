import type { Kysely } from 'kysely';
import type { EventStore } from '../../domain/eventstore/port.js';
import { comparePositions, type Position, type RecordedEvent } from '../../domain/shared/events.js';
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
/** Events read at a time when a device is folded up to a place in the log. */
const FOLD_PAGE = 500;

/**
 * Folds device events into "device after, diff" pairs. Each device's state
 * is cached; on a miss (or a gap) it is rebuilt from the read model plus the
 * stream, so the diff is exact whatever the subscriber's position. A device's
 * cached state follows every one of its events once it is wanted, and is
 * dropped at an event it is not wanted for, so a cached state is the device
 * as of the last batch handled: `asOf` answers for any place in that batch.
 */
export class ChangeTracker {
  /** Each device after the last of its events handled: its revision, and the place of that event (null when unknown). */
  private cache = new RecentMemory<string, { revision: number; doc: DeviceDoc | null; position: Position | null }>(DEVICE_CACHE);
  /** The batch handled last: what each wanted device's events in it left, in order, and the device before the first of them. */
  private steps = new Map<string, { position: Position; doc: DeviceDoc | null }[]>();
  private starts = new Map<string, DeviceDoc | null>();

  constructor(
    private readonly store: EventStore,
    private readonly db: Kysely<Database>,
  ) {}

  /** The changes of the devices `wants` names; other devices are skipped (and rebuilt when they are wanted again). */
  async changes(batch: RecordedEvent[], wants: (deviceId: string) => boolean = () => true): Promise<Change[]> {
    const out: Change[] = [];
    this.steps.clear();
    this.starts.clear();
    await this.prefetch(batch, wants);
    for (const e of batch) {
      if (!e.type.startsWith('Device') || !isDeviceStream(e.streamId)) continue;
      const event = e as RecordedEvent & DeviceEvent;
      const id = event.data.id;
      if (!wants(id)) {
        // Its events are not followed from here: a state kept would miss them.
        this.cache.delete(id);
        continue;
      }
      const first = !this.starts.has(id);
      if (event.type === 'DeviceDeleted') {
        if (first) this.starts.set(id, await this.before(id, event.revision));
        this.put(id, event, null);
        continue;
      }
      const before = await this.before(id, event.revision);
      if (first) this.starts.set(id, before);
      const after = event.type === 'DeviceRegistered' ? evolveDoc({}, event) : before ? evolveDoc(before, event) : null;
      this.put(id, event, after);
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

  private put(id: string, event: RecordedEvent, doc: DeviceDoc | null): void {
    this.cache.set(id, { revision: event.revision, doc, position: event.position });
    const steps = this.steps.get(id);
    if (steps) steps.push({ position: event.position, doc });
    else this.steps.set(id, [{ position: event.position, doc }]);
  }

  /**
   * A wanted device as of `position`, a place in the batch handled last (its events up to there folded; null: it did
   * not exist then), or undefined when the tracker cannot tell (a device with no event in the batch and no state
   * kept from before it): `readAsOf` reads it then.
   */
  asOf(id: string, position: Position): DeviceDoc | null | undefined {
    const steps = this.steps.get(id);
    if (steps) {
      let doc = this.starts.get(id) ?? null;
      for (const step of steps) {
        if (comparePositions(step.position, position) > 0) break;
        doc = step.doc;
      }
      return doc;
    }
    const kept = this.cache.get(id);
    return kept?.position && comparePositions(kept.position, position) <= 0 ? kept.doc : undefined;
  }

  /**
   * A device with no event in the batch handled last as of `position` in it, from the store: the read model's row,
   * when its last event is not past `position` (the read models hold the batch); otherwise (the device changed
   * since, or is gone) its events up to `position` folded, from the latest snapshot before them. The row's state is
   * kept, so the next batches answer from memory.
   */
  async readAsOf(id: string, position: Position): Promise<DeviceDoc | null> {
    const row = await this.db.selectFrom('devices').select(['doc', 'revision']).where('id', '=', id).executeTakeFirst();
    if (row) {
      const [last] = await this.store.readStream(deviceStream(id), { fromRevision: row.revision, limit: 1 });
      if (last && comparePositions(last.position, position) <= 0) {
        if (!this.cache.get(id)) this.cache.set(id, { revision: row.revision, doc: row.doc, position: last.position });
        return row.doc;
      }
    }
    let below = row ? row.revision : Number.MAX_SAFE_INTEGER;
    for (;;) {
      const snapshot = await this.db.selectFrom('device_snapshots').select(['revision', 'doc']).where('device_id', '=', id).where('revision', '<', below).orderBy('revision', 'desc').limit(1).executeTakeFirst();
      if (!snapshot) return this.foldTo(id, null, 0, position);
      const [at] = await this.store.readStream(deviceStream(id), { fromRevision: snapshot.revision, limit: 1 });
      if (at && comparePositions(at.position, position) <= 0) return this.foldTo(id, snapshot.doc, snapshot.revision + 1, position);
      below = snapshot.revision;
    }
  }

  /** Folds the stream's events from `from` onto `doc`, up to the last one at or before `position`. */
  private async foldTo(id: string, doc: DeviceDoc | null, from: number, position: Position): Promise<DeviceDoc | null> {
    for (let next = from; ; ) {
      const events = (await this.store.readStream(deviceStream(id), { fromRevision: next, limit: FOLD_PAGE })) as (RecordedEvent & DeviceEvent)[];
      for (const e of events) {
        if (comparePositions(e.position, position) > 0) return doc;
        if (e.type === 'DeviceRegistered') doc = evolveDoc({}, e);
        else if (e.type === 'DeviceDeleted') doc = null;
        else if (doc) doc = evolveDoc(doc, e);
      }
      if (events.length < FOLD_PAGE) return doc;
      next = events[events.length - 1]!.revision + 1;
    }
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

