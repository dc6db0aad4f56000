import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber, type SubscriberCluster } from '../../domain/eventstore/subscriber.js';
import type { LogWriter } from '../../domain/logs/writer.js';
import type { Database } from '../../projections/database.js';
import type { ChannelInfo, Registry } from '../../ingest/registry.js';
import type { Principals } from '../../projections/principals.js';
import { ChangeTracker, type Change } from './changes.js';
import { ChannelAccess } from './access.js';

type ChannelAccessDeps = ConstructorParameters<typeof ChannelAccess>[0];

/** The output topic of a device for a recipient (a user id or a credentials set id). */
export const outputTopic = (recipient: string, deviceId: string) => `svc/output/v2/${recipient}/iotnode/${deviceId}`;

/**
 * Delivery over `mqtt` channels, plus the log entries of channels whose
 * protocol this build does not deliver (`cloudIotHub`, `bacnet`, `knx`, `modbus`).
 * A channel publishes a change only while its creator may read the device (`access`).
 */
export function mqttDelivery(registry: Registry, publish: (topic: string, payload: Buffer) => Promise<void>, logs: LogWriter, access: ChannelAccess, hold: () => () => void = () => () => {}) {
  return async (changes: Change[]): Promise<void> => {
    if (changes.length === 0) return;
    // Who gets each change, decided first: the creators' rights are looked up (and changes of state logged) here.
    const recipientsOf: Set<string>[] = [];
    for (const change of changes) {
      const recipients = new Set<string>();
      for (const channel of registry.channelsOf(change.deviceId)) {
        if (channel.protocol === 'mqtt') {
          const recipient = (channel.doc.mqtt as { recipient?: string } | undefined)?.recipient;
          if (recipient && (await access.allows(channel, change.deviceId, change.message.event.id))) recipients.add(recipient);
        } else if (channel.protocol !== 'http') {
          unsupported(logs, channel, change.deviceId);
        }
      }
      recipientsOf.push(recipients);
    }
    const sends: Promise<void>[] = [];
    // Consumers' connections are corked while the batch is handed to the broker, in one go, so it leaves in few writes.
    const release = hold();
    setTimeout(release, 0);
    for (const [i, change] of changes.entries()) {
      let payload: Buffer | null = null;
      for (const recipient of recipientsOf[i]!) {
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

/**
 * The `mqtt` channels' reactor (`output-mqtt`): follows the event log from its
 * own checkpoint and publishes each change of a device that has an `mqtt`
 * channel on its recipients' output topics. The checkpoint moves once the
 * broker took the batch's publishes: at least once.
 */
export class MqttOutput {
  /** Its follower of the event log (its lag is measured from it). */
  readonly subscriber: CheckpointedSubscriber<Database>;

  constructor(
    deps: { store: EventStore; db: Kysely<Database>; log: Logger; registry: Registry; logs: LogWriter; principals: Principals; projections: ChannelAccessDeps['projections']; cluster?: SubscriberCluster | null },
    publish: (topic: string, payload: Buffer) => Promise<void>,
    hold: () => () => void,
  ) {
    const tracker = new ChangeTracker(deps.store, deps.db);
    const access = new ChannelAccess(deps);
    const deliver = mqttDelivery(deps.registry, publish, deps.logs, access, hold);
    // Devices without a channel other than http are not folded at all.
    const wants = (deviceId: string) => deps.registry.channelsOf(deviceId).some((c) => c.protocol !== 'http');
    this.subscriber = new CheckpointedSubscriber<Database>({
      name: 'output-mqtt',
      store: deps.store,
      db: deps.db,
      log: deps.log,
      batchSize: 5000,
      cluster: deps.cluster ?? null,
      handle: async (batch) => {
        // A batch that changes rights: the read models hold the change before any channel is checked.
        await access.follow(batch);
        await deliver(await tracker.changes(batch, wants));
      },
      leading: { gained: () => access.load(), lost: async () => {} },
    });
  }

  start(): Promise<void> {
    return this.subscriber.start();
  }

  stop(): Promise<void> {
    return this.subscriber.stop();
  }
}
