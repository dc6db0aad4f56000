import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore, Subscription } from '../domain/eventstore/port.js';
import type { Position, RecordedEvent } from '../domain/shared/events.js';
import { diffDocs, evolveDoc, presentDevice, type DeviceDoc, type DeviceEvent } from '../domain/devices/device.js';
import { RecentMemory } from '../domain/shared/recentMemory.js';
import type { Database } from '../projections/database.js';
import type { ChannelInfo, Registry } from './registry.js';
import type { LogWriter } from './logWriter.js';

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
      if (!e.type.startsWith('Device') || !e.streamId.startsWith('device-')) continue;
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
      if (!e.streamId.startsWith('device-')) continue;
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
    const events = await this.store.readStream(`device-${id}`, { fromRevision: from, limit: to - from });
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

/**
 * A side-effect subscriber: follows the store from its own checkpoint in
 * `es.checkpoints` and hands each batch's device changes to `deliver`, with
 * the position of the batch's last event (also for a batch without changes).
 * The checkpoint moves only after `deliver` returns, so delivery is at least
 * once for what `deliver` completes before returning.
 */
export class ChangeSubscriber {
  private subscription: Subscription | null = null;
  private readonly tracker: ChangeTracker;

  constructor(
    readonly name: string,
    private readonly store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly log: Logger,
    private readonly deliver: (changes: Change[], upTo: Position) => Promise<void>,
    /** Whether a device has a channel this subscriber delivers to; the others are not folded at all. */
    private readonly wants: (deviceId: string) => boolean = () => true,
  ) {
    this.tracker = new ChangeTracker(store, db);
  }

  async start(): Promise<void> {
    const { rows } = await sql<{ c: string; p: string }>`SELECT commit_position AS c, prepare_position AS p FROM es.checkpoints WHERE name = ${this.name}`.execute(this.db);
    const after: Position | null = rows[0] ? { commit: BigInt(rows[0].c), prepare: BigInt(rows[0].p) } : null;
    this.subscription = this.store.subscribe(
      { after, batchSize: 5000, onError: (err) => this.log.error({ err, subscriber: this.name }, 'delivering device changes failed; retrying') },
      async (batch) => {
        const changes = await this.tracker.changes(batch, this.wants);
        const last = batch[batch.length - 1]!.position;
        await this.deliver(changes, last);
        await sql`INSERT INTO es.checkpoints (name, commit_position, prepare_position, updated_at)
          VALUES (${this.name}, ${String(last.commit)}, ${String(last.prepare)}, now())
          ON CONFLICT (name) DO UPDATE SET commit_position = EXCLUDED.commit_position, prepare_position = EXCLUDED.prepare_position, updated_at = now()`.execute(this.db);
      },
    );
  }

  async stop(): Promise<void> {
    await this.subscription?.stop();
    this.subscription = null;
  }
}

/** The output topic of a device for a recipient (a user id or a credentials set id). */
export const outputTopic = (recipient: string, deviceId: string) => `svc/output/v2/${recipient}/iotnode/${deviceId}`;

/**
 * Delivery over `mqtt` channels, plus the log entries of channels whose
 * protocol this build does not deliver (`cloudIotHub`, `bacnet`, `knx`, `modbus`).
 */
export function mqttDelivery(registry: Registry, publish: (topic: string, payload: Buffer) => Promise<void>, logs: LogWriter, hold: () => () => void = () => () => {}) {
  return async (changes: Change[]): Promise<void> => {
    if (changes.length === 0) return;
    const sends: Promise<void>[] = [];
    // Consumers' connections are corked while the batch is handed to the broker, so it leaves in few writes.
    const release = hold();
    setTimeout(release, 0);
    for (const change of changes) {
      let payload: Buffer | null = null;
      const recipients = new Set<string>();
      for (const channel of registry.channelsOf(change.deviceId)) {
        if (channel.protocol === 'mqtt') {
          const recipient = (channel.doc.mqtt as { recipient?: string } | undefined)?.recipient;
          if (recipient) recipients.add(recipient);
        } else if (channel.protocol !== 'http') {
          unsupported(logs, channel, change.deviceId);
        }
      }
      for (const recipient of recipients) {
        payload ??= Buffer.from(JSON.stringify(change.message));
        sends.push(publish(outputTopic(recipient, change.deviceId), payload));
      }
    }
    await Promise.all(sends);
  };
}

function unsupported(logs: LogWriter, channel: ChannelInfo, deviceId: string): void {
  logs.write(
    {
      resourceId: channel.id,
      resourceType: 'channel',
      type: 'warning',
      priority: 'low',
      category: 'system',
      message: `Channel ${channel.id}: delivery over ${channel.protocol} is not supported in this build; the change of iotnode ${deviceId} was not sent`,
    },
    `unsupported ${channel.protocol}`,
  );
}
