import { sql, type Kysely } from 'kysely';
import { OutboundRefused, failureOf, outboundFetch, type Fetch } from '../outbound.js';
import type { Logger } from 'pino';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber, type SubscriberCluster } from '../../domain/eventstore/subscriber.js';
import { LeaseLostError, type Fence } from '../../domain/eventstore/leases.js';
import { comparePositions, type Position } from '../../domain/shared/events.js';
import type { LogWriter } from '../../domain/logs/writer.js';
import type { Database } from '../../projections/database.js';
import type { Registry } from '../../ingest/registry.js';
import { ChangeTracker, type Change } from './changes.js';
import type { ChannelAccess } from './access.js';
import { deadline } from '../../domain/shared/deadline.js';
import type { ChannelDoc, ChannelSecrets } from '../../domain/channels/channel.js';

/**
 * Retry policy of `http` channels: up to 5 attempts per message, waiting
 * 250 ms, 500 ms, 1 s and 2 s between them; each request times out after
 * 5 s. A 2xx answer is a delivery; 4xx answers other than 408 and 429 are
 * final at once. A message that finally fails is logged on the device, and
 * the device's next message is sent after it, so per-device order holds.
 */
export const HTTP_RETRY = { attempts: 5, firstDelayMs: 250, timeoutMs: 5000 };

/**
 * Per channel: at most `maxMessages` messages wait in memory; beyond that the
 * channel reads its backlog from the event store itself. `parallelDevices`
 * devices of one channel are delivered at the same time. Each channel's
 * checkpoint is saved every `saveEveryMs`.
 */
export const HTTP_QUEUE = { maxMessages: 2000, parallelDevices: 8, saveEveryMs: 1000 };

/** The checkpoint of the reader that hands changes to the channels' queues. */
const READER = 'channels-http';
const channelCheckpoint = (channelId: string) => `${READER}:${channelId}`;
/** Deleted channels' queues and checkpoints are dropped this often. */
const CLEAN_EVERY_MS = 60_000;

/** Before every event: the position of a channel that starts from the beginning. */
const START: Position = { commit: 0n, prepare: 0n };

/** a > b, where null is before every position. */
const isAfter = (a: Position | null, b: Position | null) => a !== null && (b === null || comparePositions(a, b) > 0);

interface Item {
  deviceId: string;
  position: Position;
  /** The channel's position just before this message: its checkpoint while the message is undelivered. */
  before: Position | null;
  /** The change's event id: the same in every delivery of it, so a receiver drops a repeat. */
  eventId: string;
  body: string;
  done: boolean;
}

/**
 * Delivery over `http` channels. One reader follows the event store and hands
 * each change to the queue of every http channel covering the device; the
 * reader never waits for a receiver. Each channel's queue delivers its
 * devices' messages in order (several devices at a time) and has its own
 * checkpoint in `es.checkpoints` (`channels-http:<channelId>`), which never
 * moves past a message not yet delivered (or finally failed and logged):
 * delivery is at least once per channel. A channel whose receiver fails or is
 * slow holds only its own messages back. When more than
 * `HTTP_QUEUE.maxMessages` wait, the channel stops taking messages from the
 * reader and reads its backlog from the store once it has room, until it is
 * level with the reader again; so memory stays bounded and nothing is skipped.
 */
export class HttpChannels {
  private readonly queues = new Map<string, ChannelQueue>();
  private reader: CheckpointedSubscriber<Database> | null = null;
  /** The position of the last batch the reader handed over. */
  readerAt: Position | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastClean = Date.now();
  /** Aborted when delivery stops here (a stop, or another node of the cluster took the lead). */
  private stopping = new AbortController();

  constructor(
    readonly store: EventStore,
    readonly db: Kysely<Database>,
    readonly registry: Registry,
    readonly logs: LogWriter,
    readonly log: Logger,
    /** Whether a channel's creator may still read a device: checked before each message goes out. */
    private readonly access: ChannelAccess,
    readonly retry = HTTP_RETRY,
    private readonly cluster: SubscriberCluster | null = null,
    private readonly http: Fetch = outboundFetch('public'),
  ) {}

  /** Its follower of the event log, once started (its lag is measured from it). */
  get subscriber(): CheckpointedSubscriber<Database> | null {
    return this.reader;
  }

  get signal(): AbortSignal {
    return this.stopping.signal;
  }

  /** What proves this node delivers now (always, on a single process). */
  private get fence(): Fence | null {
    return this.reader?.fence ?? null;
  }

  /** Whether `channelId` is an http channel covering the device (now: channels and groups change). */
  channelFor(channelId: string, deviceId: string) {
    return this.registry.channelsOf(deviceId).find((c) => c.id === channelId && c.protocol === 'http');
  }

  /** Follows the log (in a cluster: wherever this node leads the channels' reader). */
  async start(): Promise<void> {
    const wants = (deviceId: string) => this.registry.channelsOf(deviceId).some((c) => c.protocol === 'http');
    const tracker = new ChangeTracker(this.store, this.db);
    this.reader = new CheckpointedSubscriber<Database>({
      name: READER,
      store: this.store,
      db: this.db,
      log: this.log,
      batchSize: 5000,
      cluster: this.cluster,
      handle: async (batch) => {
        // A batch that changes rights: the read models hold the change before a message handed over after it is checked.
        await this.access.follow(batch);
        return this.offer(await tracker.changes(batch, wants), batch[batch.length - 1]!.position);
      },
      leading: { gained: () => this.resume(), lost: () => this.halt() },
    });
    await this.reader.start();
  }

  /** Stops reading, abandons deliveries in flight (they stay undelivered), and saves every channel's checkpoint. */
  async stop(): Promise<void> {
    await this.reader?.stop();
    this.reader = null;
  }

  /** Takes up every channel's queue from its checkpoint. */
  private async resume(): Promise<void> {
    this.stopping = new AbortController();
    this.queues.clear();
    await this.access.load();
    const { rows } = await sql<{ name: string; c: string; p: string }>`SELECT name, commit_position AS c, prepare_position AS p FROM es.checkpoints
      WHERE name = ${READER} OR name LIKE ${`${READER}:%`}`.execute(this.db);
    const toPosition = (r: { c: string; p: string }): Position => ({ commit: BigInt(r.c), prepare: BigInt(r.p) });
    const reader = rows.find((r) => r.name === READER);
    this.readerAt = reader ? toPosition(reader) : null;
    for (const r of rows) {
      if (r.name === READER) continue;
      const id = r.name.slice(READER.length + 1);
      const queue = new ChannelQueue(id, toPosition(r), this);
      queue.saved = queue.seen;
      this.queues.set(id, queue);
      // Messages the channel had not delivered when the platform stopped are read again from the store.
      if (isAfter(this.readerAt, queue.seen)) queue.fallBehind();
    }
    this.timer = setInterval(() => void this.tick(), HTTP_QUEUE.saveEveryMs);
    this.timer.unref();
  }

  /** Delivery stops here: what is in flight is abandoned; checkpoints are saved while this node still may. */
  private async halt(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.stopping.abort();
    await Promise.all([...this.queues.values()].map((q) => q.idle()));
    await this.save().catch((err) => {
      if (!(err instanceof LeaseLostError)) this.log.error({ err }, 'saving http channel checkpoints failed');
    });
    this.queues.clear();
  }

  /** The reader's handler: queues the batch's changes on their channels; waits only to record new channels' checkpoints. */
  /** Queues the batch's changes on their channels; false when none had an HTTP channel. */
  private async offer(changes: Change[], upTo: Position): Promise<boolean> {
    const from = this.readerAt;
    const created: ChannelQueue[] = [];
    let offered = false;
    for (const change of changes) {
      let body: string | null = null;
      for (const channel of this.registry.channelsOf(change.deviceId)) {
        if (channel.protocol !== 'http') continue;
        let queue = this.queues.get(channel.id);
        if (!queue) {
          // A channel new to this reader starts just before this batch.
          queue = new ChannelQueue(channel.id, from ?? START, this);
          this.queues.set(channel.id, queue);
          created.push(queue);
        }
        body ??= JSON.stringify(change.message);
        queue.offer(change, body);
        offered = true;
      }
    }
    this.readerAt = upTo;
    for (const queue of this.queues.values()) queue.level(upTo);
    // A new channel's checkpoint must exist before the reader's moves past its first messages.
    if (created.length) await this.save(created);
    return offered;
  }

  private async tick(): Promise<void> {
    try {
      await this.save();
      if (Date.now() - this.lastClean >= CLEAN_EVERY_MS) {
        this.lastClean = Date.now();
        await this.clean();
      }
    } catch (err) {
      if (!(err instanceof LeaseLostError)) this.log.error({ err }, 'saving http channel checkpoints failed');
    }
  }

  /** Saves, in one statement, the checkpoints of the channels (all by default) that moved since they were last saved. */
  private async save(queues: Iterable<ChannelQueue> = this.queues.values()): Promise<void> {
    const moved: { queue: ChannelQueue; at: Position }[] = [];
    for (const queue of queues) {
      const at = queue.safe ?? START;
      if (!queue.saved || comparePositions(at, queue.saved) !== 0) moved.push({ queue, at });
    }
    if (moved.length === 0) return;
    const fence = this.fence;
    const upsert = (db: Kysely<Database>) => sql`INSERT INTO es.checkpoints (name, commit_position, prepare_position, updated_at)
      SELECT name, c, p, now() FROM unnest(${moved.map((m) => channelCheckpoint(m.queue.id))}::text[],
        ${moved.map((m) => String(m.at.commit))}::numeric[], ${moved.map((m) => String(m.at.prepare))}::numeric[]) AS x(name, c, p)
      ON CONFLICT (name) DO UPDATE SET commit_position = EXCLUDED.commit_position, prepare_position = EXCLUDED.prepare_position, updated_at = now()`.execute(db);
    if (this.cluster) {
      if (!fence) throw new LeaseLostError(READER);
      await this.db.transaction().execute(async (tx) => {
        await fence.hold(tx);
        await upsert(tx);
      });
    } else {
      await upsert(this.db);
    }
    for (const m of moved) m.queue.saved = m.at;
  }

  /** Drops the idle queues, and the checkpoints, of channels that no longer exist. */
  private async clean(): Promise<void> {
    const idle = [...this.queues.values()].filter((q) => q.isIdle).map((q) => q.id);
    if (idle.length === 0) return;
    const existing = new Set((await this.db.selectFrom('channels').select('id').where('id', 'in', idle).execute()).map((r) => r.id));
    const gone = idle.filter((id) => !existing.has(id) && this.queues.get(id)?.isIdle);
    if (gone.length === 0) return;
    for (const id of gone) this.queues.delete(id);
    await sql`DELETE FROM es.checkpoints WHERE name = ANY(${gone.map(channelCheckpoint)}::text[])`.execute(this.db);
  }

  /** POSTs one message; true once delivered or finally failed (and logged), false when stopped first. */
  async deliver(channelId: string, item: Item): Promise<boolean> {
    let why = '';
    let url = '';
    for (let attempt = 1; attempt <= this.retry.attempts; attempt++) {
      // Looked up for each attempt: the channel may have been deleted, or the device left its group.
      const channel = this.channelFor(channelId, item.deviceId);
      if (!channel) return true;
      // The channel's creator must still be able to read the device; a message they may not see is not sent (the channel's log says so once).
      if (!(await this.access.allows(channel, item.deviceId, item.eventId))) return true;
      const headers = channelHeaders(channel, item.eventId);
      url = (channel.doc.http as { url: string }).url;
      // Only the node that leads delivers: checked before each POST.
      try {
        await this.fence?.check();
      } catch (err) {
        if (err instanceof LeaseLostError) return false;
        // The database does not answer, so whether this node still leads is unknown: nothing is sent; ask again shortly.
        await sleep(1000, this.signal);
        if (this.signal.aborted) return false;
        attempt--;
        continue;
      }
      const result = await postOnce(this.http, url, headers, item.body, this.retry.timeoutMs, this.signal);
      if (this.signal.aborted) return false;
      if (result.ok) return true;
      why = result.why;
      if (result.final || attempt === this.retry.attempts) break;
      await sleep(this.retry.firstDelayMs * 2 ** (attempt - 1), this.signal);
      if (this.signal.aborted) return false;
    }
    this.log.warn({ deviceId: item.deviceId, channelId, why }, 'http channel delivery failed');
    let origin = url;
    try {
      origin = new URL(url).origin;
    } catch {
      // the URL as given
    }
    this.logs.write(
      {
        resourceId: item.deviceId,
        resourceType: 'device',
        type: 'error',
        priority: 'high',
        category: 'system',
        message: `Channel ${channelId}: delivery to ${origin} failed (${why})`,
        data: { channelId },
      },
      `http channel ${channelId}`,
    );
    return true;
  }
}

/**
 * The headers of a POST to an `http` channel: its own, its write-only
 * `Authorization`, and `Idempotency-Key`, the same in every delivery of one
 * message (delivery is at least once), for the receiver to drop a repeat.
 */
export function channelHeaders(channel: { doc: ChannelDoc; secrets: ChannelSecrets }, key: string): Record<string, string> {
  const http = channel.doc.http as { headers?: Record<string, string> };
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(http.headers ?? {}) };
  if (channel.secrets.authorization) headers.Authorization = channel.secrets.authorization;
  headers['Idempotency-Key'] = key;
  return headers;
}

/** One POST to a channel's receiver: delivered, or why not and whether a retry could help (not a 4xx other than 408 and 429). */
export async function postOnce(http: Fetch, url: string, headers: Record<string, string>, body: string, timeoutMs: number, signal: AbortSignal): Promise<{ ok: boolean; final: boolean; why: string }> {
  const limit = deadline(timeoutMs, signal);
  try {
    const res = await http(url, { method: 'POST', headers, body, signal: limit.signal });
    // The answer is not used: its body is left unread, whatever its size.
    await res.body?.cancel().catch(() => undefined);
    if (res.ok) return { ok: true, final: true, why: '' };
    const final = res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429;
    return { ok: false, final, why: `HTTP ${res.status}` };
  } catch (err) {
    // An address the platform may not reach stays so: no retry.
    return { ok: false, final: (err as { cause?: unknown }).cause instanceof OutboundRefused, why: failureOf(err) };
  } finally {
    limit.clear();
  }
}

/** Waits `ms`, or less once `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * One http channel's messages: a window in position order (its undelivered
 * head is the checkpoint) and, per device, the messages to send in order.
 */
class ChannelQueue {
  /** Messages taken and not yet known to be delivered, in position order (done ones leave from the front). */
  private window: Item[] = [];
  private byDevice = new Map<string, Item[]>();
  /** Devices with messages waiting and no delivery running. */
  private ready: string[] = [];
  private running = new Map<string, Promise<void>>();
  /** `live`: takes messages from the reader; `behind`: reads its backlog from the store itself. */
  private mode: 'live' | 'behind' = 'live';
  private catchingUp: Promise<void> | null = null;
  private room: (() => void) | null = null;
  /** The last saved checkpoint. */
  saved: Position | null = null;

  constructor(
    readonly id: string,
    /** Every change of the channel up to this position is in the window or was delivered. */
    public seen: Position | null,
    private readonly owner: HttpChannels,
  ) {}

  /** The checkpoint: every message of the channel at or before it was delivered (or finally failed). */
  get safe(): Position | null {
    return this.window.length ? this.window[0]!.before : this.seen;
  }

  get isIdle(): boolean {
    return this.mode === 'live' && this.window.length === 0;
  }

  /** A change from the reader. */
  offer(change: Change, body: string): void {
    if (this.mode !== 'live' || !isAfter(change.position, this.seen)) return;
    if (this.window.length >= HTTP_QUEUE.maxMessages) {
      this.fallBehind();
      return;
    }
    this.take(change.deviceId, change.position, change.message.event.id, body);
  }

  /** The reader handed over everything up to `upTo`. */
  level(upTo: Position): void {
    if (this.mode === 'live' && isAfter(upTo, this.seen)) this.seen = upTo;
  }

  /** Stops taking messages from the reader; reads them from the store from `seen` on once there is room. */
  fallBehind(): void {
    if (this.mode === 'behind') return;
    this.mode = 'behind';
    this.owner.log.warn({ channelId: this.id, waiting: this.window.length }, 'http channel is behind; it reads its backlog from the event store');
    this.catchingUp = this.catchUp().finally(() => (this.catchingUp = null));
  }

  /** Resolves once nothing of this queue runs any more (after a stop). */
  async idle(): Promise<void> {
    this.room?.();
    await this.catchingUp;
    await Promise.all(this.running.values());
  }

  private take(deviceId: string, position: Position, eventId: string, body: string): void {
    const item: Item = { deviceId, position, before: this.seen, eventId, body, done: false };
    this.seen = position;
    this.window.push(item);
    const list = this.byDevice.get(deviceId);
    if (list) list.push(item);
    else {
      this.byDevice.set(deviceId, [item]);
      this.ready.push(deviceId);
      this.pump();
    }
  }

  private pump(): void {
    while (!this.owner.signal.aborted && this.running.size < HTTP_QUEUE.parallelDevices && this.ready.length) {
      const deviceId = this.ready.shift()!;
      this.running.set(deviceId, this.run(deviceId));
    }
  }

  private async run(deviceId: string): Promise<void> {
    const list = this.byDevice.get(deviceId)!;
    try {
      while (list.length && !this.owner.signal.aborted) {
        const item = list[0]!;
        if (!(await this.owner.deliver(this.id, item))) return;
        list.shift();
        item.done = true;
        while (this.window.length && this.window[0]!.done) this.window.shift();
        if (this.room && this.window.length <= HTTP_QUEUE.maxMessages / 2) this.room();
      }
    } catch (err) {
      this.owner.log.error({ err, channelId: this.id, deviceId }, 'http channel delivery stopped unexpectedly');
    } finally {
      this.running.delete(deviceId);
      if (list.length === 0) this.byDevice.delete(deviceId);
      else if (!this.owner.signal.aborted) this.ready.push(deviceId);
      // Let the finished promise settle before starting others.
      queueMicrotask(() => this.pump());
    }
  }

  /** Waits until at most half the window is in use (or the platform stops). */
  private waitForRoom(): Promise<void> {
    if (this.window.length <= HTTP_QUEUE.maxMessages / 2 || this.owner.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      this.room = () => {
        this.room = null;
        resolve();
      };
    });
  }

  /** Reads the channel's changes after `seen` from the store until level with the reader, then takes from the reader again. */
  private async catchUp(): Promise<void> {
    const { store, db, log, signal } = this.owner;
    const tracker = new ChangeTracker(store, db);
    const covers = (deviceId: string) => this.owner.channelFor(this.id, deviceId) !== undefined;
    while (!signal.aborted) {
      await this.waitForRoom();
      if (signal.aborted) return;
      // Level with the reader: from now on the reader hands over every later change (nothing awaits in between).
      if (!isAfter(this.owner.readerAt, this.seen)) {
        this.mode = 'live';
        log.info({ channelId: this.id }, 'http channel caught up');
        return;
      }
      try {
        const batch = await store.readAll({ after: this.seen, limit: 500 });
        if (batch.length === 0) {
          await sleep(50, signal);
          continue;
        }
        for (const change of await tracker.changes(batch, covers)) this.take(change.deviceId, change.position, change.message.event.id, JSON.stringify(change.message));
        const last = batch[batch.length - 1]!.position;
        if (isAfter(last, this.seen)) this.seen = last;
      } catch (err) {
        log.error({ err, channelId: this.id }, 'reading an http channel backlog failed; retrying');
        await sleep(1000, signal);
      }
    }
  }
}
