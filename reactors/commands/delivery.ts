import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber } from '../../domain/eventstore/subscriber.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import type { ConnectorEvent } from '../../domain/connectors/connector.js';
import type { Database } from '../../projections/database.js';

/** The checkpoint of command delivery; migration 0010 starts it at the end of the log of an existing installation. */
export const COMMANDS_CHECKPOINT = 'commands';

/**
 * Delivers downlinks from their stored events: a `DownlinkQueued` of a
 * Generic connector is published on its credentials set's push topic. The
 * event is stored before anything leaves, so a crash between the two loses
 * nothing: after a restart the reactor resumes from its checkpoint and
 * delivers what it had not.
 */
export class CommandDelivery {
  private readonly subscriber: CheckpointedSubscriber<Database>;

  constructor(deps: { store: EventStore; db: Kysely<Database>; log: Logger }, publish: (topic: string, message: string) => Promise<void>) {
    this.subscriber = new CheckpointedSubscriber<Database>({
      name: COMMANDS_CHECKPOINT,
      store: deps.store,
      db: deps.db,
      log: deps.log,
      batchSize: 500,
      handle: async (batch: RecordedEvent[]) => {
        for (const e of batch as (RecordedEvent & ConnectorEvent)[]) {
          if (e.type === 'DownlinkQueued') await publish(e.data.topic, e.data.message);
        }
      },
    });
  }

  start(): Promise<void> {
    return this.subscriber.start();
  }

  stop(): Promise<void> {
    return this.subscriber.stop();
  }
}
