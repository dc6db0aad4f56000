import { sql, type Kysely } from 'kysely';
import type { EventStore } from '../../domain/eventstore/port.js';
import type { Database } from '../../projections/database.js';
import type { Principals } from '../../projections/principals.js';
import type { Position, RecordedEvent } from '../../domain/shared/events.js';
import type { ChannelInfo } from '../../ingest/registry.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { causedId } from '../../domain/shared/ids.js';
import { logEvent, logStream, type LogEntry } from '../../domain/logs/logEntry.js';
import { OwnerRights } from '../rights.js';

/** (channel, device) pairs whose verdict is kept at once. */
const MAX_VERDICTS = 100_000;

const pair = (channelId: string, deviceId: string) => `${channelId}\u0000${deviceId}`;
const unpair = (key: string) => key.split('\u0000') as [string, string];

/**
 * Whether a channel may still export a device's changes. Rights are checked
 * when the channel is created, and again at every delivery: the channel's
 * creator must be an enabled user whose roles allow GET on `device` and who
 * can read the device now (for a channel on a device group: each device of
 * it), as a `GET /api/iotnodes/{id}` by that user would need. The answers are
 * cached until an event that may change rights passes (`follow`, with the
 * reactor's batch, after the read models hold it).
 *
 * A change not sent for this reason is not logged per message: the channel's
 * log gets one entry when a device's changes stop being sent (`warning`,
 * `access`, with why) and one when they are sent again (`info`), each with
 * `data: {iotnode, delivery: 'refused' | 'sent'}`. The state is read back from
 * those entries when delivery starts here, and an entry's id is derived from
 * the change that caused it, so neither a restart nor a batch handled again
 * logs a state twice.
 */
export class ChannelAccess {
  private readonly rights: OwnerRights;
  /** Why each (channel, device) is refused now (null: sent), for the rights' current generation. */
  private verdicts = new Map<string, string | null>();
  private generation = -1;
  /** The (channel, device) pairs whose last logged state is a refusal, with its reason. */
  private refused = new Map<string, string>();

  constructor(
    private readonly deps: {
      store: EventStore;
      db: Kysely<Database>;
      principals: Principals;
      projections: { waitFor(position: Position, timeoutMs: number): Promise<void> } | null;
      clock?: () => Date;
    },
  ) {
    this.rights = new OwnerRights(deps.db, deps.principals, deps.projections);
  }

  /** Called with each batch the reactor reads, before its changes are delivered. */
  async follow(batch: readonly RecordedEvent[]): Promise<void> {
    const change = await this.rights.follow(batch);
    // A change on some resources only: the verdicts on pairs of those channels or devices are asked again.
    if (!change.all && change.resources.size) {
      for (const key of this.verdicts.keys()) {
        const [channelId, deviceId] = unpair(key);
        if (change.resources.has(channelId) || change.resources.has(deviceId)) this.verdicts.delete(key);
      }
    }
  }

  /** Delivery starts here: the refusals last logged on the channels are read back, and every answer is asked again. */
  async load(): Promise<void> {
    this.rights.clear();
    this.refused.clear();
    const { rows } = await sql<{ channel: string; iotnode: string; delivery: string; reason: string | null }>`
      SELECT DISTINCT ON (l.resource_id, l.data->>'iotnode') l.resource_id AS channel, l.data->>'iotnode' AS iotnode,
             l.data->>'delivery' AS delivery, l.data->>'reason' AS reason
      FROM channels c JOIN device_logs l ON l.resource_id = c.id
      WHERE l.data ? 'delivery' AND l.data ? 'iotnode'
      ORDER BY l.resource_id, l.data->>'iotnode', l.time DESC, l.id DESC`.execute(this.deps.db);
    for (const r of rows) if (r.delivery === 'refused') this.refused.set(pair(r.channel, r.iotnode), r.reason ?? '');
  }

  /**
   * Whether the change of `deviceId` (the event `causeId`) may go out through
   * the channel; a change of state is logged on the channel first.
   */
  async allows(channel: ChannelInfo, deviceId: string, causeId: string): Promise<boolean> {
    if (this.generation !== this.rights.generation) {
      this.verdicts.clear();
      this.generation = this.rights.generation;
    }
    const key = pair(channel.id, deviceId);
    let why = this.verdicts.get(key);
    if (why === undefined) {
      const generation = this.generation;
      why = await this.refusal(channel, deviceId);
      if (generation === this.rights.generation) {
        if (this.verdicts.size >= MAX_VERDICTS) this.verdicts.clear();
        this.verdicts.set(key, why);
      }
    }
    const logged = this.refused.get(key) ?? null;
    if (why !== logged) await this.record(channel.id, deviceId, why, causeId);
    return why === null;
  }

  /** Why the channel may not export the device now, or null. */
  private async refusal(channel: ChannelInfo, deviceId: string): Promise<string | null> {
    const creator = await this.rights.owner(channel.createdBy);
    if (!creator) return "its creator no longer exists or is disabled";
    if (!(await this.rights.roleAllows(creator, 'device', 'GET'))) return 'its creator has no role that may read devices (GET on device)';
    if (!(await this.rights.may(creator, deviceId, 'read'))) return `its creator cannot read iotnode ${deviceId}`;
    return null;
  }

  private async record(channelId: string, deviceId: string, why: string | null, causeId: string): Promise<void> {
    const entry: LogEntry = why
      ? {
          resourceId: channelId,
          resourceType: 'channel',
          type: 'warning',
          priority: 'high',
          category: 'access',
          message: `Channel ${channelId}: changes of iotnode ${deviceId} are not sent: ${why}. They are sent again once that is no longer so.`,
          data: { iotnode: deviceId, delivery: 'refused', reason: why },
        }
      : {
          resourceId: channelId,
          resourceType: 'channel',
          type: 'info',
          priority: 'medium',
          category: 'access',
          message: `Channel ${channelId}: changes of iotnode ${deviceId} are sent again: its creator may read it.`,
          data: { iotnode: deviceId, delivery: 'sent' },
        };
    // Derived from the change and the state, so the same change handled again (a retry, a restart) logs nothing new.
    const id = causedId(causeId, ['channel access', channelId, deviceId, why ?? 'sent']);
    const at = (this.deps.clock ?? (() => new Date()))().toISOString();
    const context = { actor: 'system:channels', correlationId: `channel:${channelId}`, causationId: causeId, now: at };
    await this.deps.store.append(logStream(channelId), [toNewEvent(logEvent(entry, at, id), context, id)], 'any');
    if (why) this.refused.set(pair(channelId, deviceId), why);
    else this.refused.delete(pair(channelId, deviceId));
  }
}
