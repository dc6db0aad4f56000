import { sql, type Transaction } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import { commandDecider, type CommandEvent, type CommandState, type CommandStatus } from '../domain/commands/command.js';
import type { Database } from './database.js';
import type { Projection } from './runner.js';

export interface CommandsTable {
  id: string;
  device_id: string | null;
  connector_id: string;
  integration: string;
  command: string;
  kind: string;
  status: CommandStatus;
  f_port: number | null;
  hex: string | null;
  confirmed: boolean | null;
  reference: string | null;
  network_item_id: string | null;
  items: Record<string, unknown>[] | null;
  error: string | null;
  attempts: number;
  retry_at: Date | null;
  requested_by: string;
  requested_at: Date;
  updated_at: Date;
  revision: number;
}

/** The command each downlink outcome event was recorded on, by the event's id: a network server's report delivered again is found by it. */
export interface CommandOutcomesTable {
  id: string;
  command_id: string;
}

export interface CommandsTables {
  commands: CommandsTable;
  command_outcomes: CommandOutcomesTable;
}

const OUTCOME_EVENTS = new Set(['DownlinkSent', 'DownlinkAcked', 'DownlinkFailed', 'DownlinkFlushed']);

const COMMAND_EVENTS = new Set(['CommandRequested', 'CommandAccepted', 'CommandRefused', 'CommandAttemptFailed', 'DownlinkSent', 'DownlinkAcked', 'DownlinkFailed', 'DownlinkFlushed']);

/** The row a command's state gives, with the outcome details its last event carries. */
function rowOf(state: Exclude<CommandState, { status: 'none' }>, event: RecordedEvent & CommandEvent, row: Partial<CommandsTable>): Partial<CommandsTable> {
  const next: Partial<CommandsTable> = { ...row, status: state.status, attempts: state.attempts, updated_at: new Date(event.metadata.time), revision: event.revision };
  switch (event.type) {
    case 'CommandAccepted':
      if (event.data.networkItemId !== undefined) next.network_item_id = event.data.networkItemId;
      // jsonb: the driver would send a JavaScript array as a PostgreSQL array.
      if (event.data.items !== undefined) next.items = JSON.stringify(event.data.items) as never;
      next.retry_at = null;
      next.error = null;
      break;
    case 'CommandRefused':
      next.error = event.data.message;
      next.retry_at = null;
      break;
    case 'CommandAttemptFailed':
      next.error = event.data.message;
      next.retry_at = event.data.retryAt ? new Date(event.data.retryAt) : null;
      break;
    case 'DownlinkFailed':
      next.error = event.data.reason;
      break;
    default:
      break;
  }
  return next;
}

/**
 * Commands and the downlink queue, folded with the command decider's own
 * `evolve`, so the read model and the write side agree on every status. Each
 * row carries its stream revision, so an event
 * applied twice changes nothing. Each downlink outcome's event id names its
 * command in `command_outcomes`.
 */
export const commandsProjection: Projection = {
  name: 'commands',
  tables: ['commands', 'command_outcomes'],
  async apply(tx: Transaction<Database>, batch: RecordedEvent[]) {
    for (const e of batch) {
      if (!COMMAND_EVENTS.has(e.type)) continue;
      const event = e as RecordedEvent & CommandEvent;
      if (event.type === 'CommandRequested') {
        const r = event.data;
        await tx
          .insertInto('commands')
          .values({
            id: r.id,
            device_id: r.deviceId,
            connector_id: r.connectorId,
            integration: r.integration,
            command: r.command,
            kind: r.kind,
            status: 'requested',
            f_port: r.downlink?.fPort ?? null,
            hex: r.downlink?.hex ?? null,
            confirmed: r.downlink?.confirmed ?? null,
            reference: r.downlink?.reference ?? null,
            network_item_id: null,
            items: null,
            error: null,
            attempts: 0,
            retry_at: null,
            requested_by: event.metadata.actor,
            requested_at: new Date(r.at),
            updated_at: new Date(r.at),
            revision: event.revision,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        continue;
      }
      if (OUTCOME_EVENTS.has(event.type)) await tx.insertInto('command_outcomes').values({ id: event.id, command_id: event.data.id }).onConflict((oc) => oc.column('id').doNothing()).execute();
      const current = await tx.selectFrom('commands').selectAll().where('id', '=', event.data.id).forUpdate().executeTakeFirst();
      if (!current || current.revision >= event.revision) continue;
      // The command's state as the decider sees it, from the row: enough for the status transitions.
      const state: CommandState = { status: current.status, request: { kind: current.kind } as never, attempts: current.attempts };
      const after = commandDecider.evolve(state, event);
      if (after.status === 'none') continue;
      const row = rowOf(after, event, {});
      await tx
        .updateTable('commands')
        .set(row as never)
        .where('id', '=', event.data.id)
        .execute();
    }
  },
};
