import { sql } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import type { CredentialsSetEvent } from '../domain/credentials/credentialsSet.js';
import type { ReservedTopicEvent } from '../domain/topics/reservedTopic.js';
import type { ConnectorDoc, ConnectorEvent, ConnectorSecrets } from '../domain/connectors/connector.js';
import type { Projection } from './runner.js';

export interface CredentialsSetsTable {
  id: string;
  username: string;
  password_hash: string;
  created_by: string;
  created_at: Date;
}

export interface ReservedTopicsTable {
  id: string;
  topic: string;
  credentials_set_id: string;
  created_by: string;
  created_at: Date;
}

export interface ConnectorsTable {
  id: string;
  doc: ConnectorDoc;
  secrets: ConnectorSecrets;
  integration: string | null;
  /** The health of its outbound connections (`ConnectorStatusChanged`). */
  status: 'ok' | 'failing';
  last_error: string | null;
  last_error_at: Date | null;
  status_at: Date | null;
  created_by: string;
  created_at: Date;
}

export interface ProvisioningTables {
  credentials_sets: CredentialsSetsTable;
  reserved_topics: ReservedTopicsTable;
  connectors: ConnectorsTable;
}

type ProvisioningEvent = CredentialsSetEvent | ReservedTopicEvent | ConnectorEvent;

/** Credentials sets, reserved topics and connectors: few, small, written by REST only. */
export const provisioningProjection: Projection = {
  name: 'provisioning',
  tables: ['credentials_sets', 'reserved_topics', 'connectors'],
  async apply(tx, batch) {
    for (const e of batch as (RecordedEvent & ProvisioningEvent)[]) {
      switch (e.type) {
        case 'CredentialsSetCreated':
          await tx
            .insertInto('credentials_sets')
            .values({ id: e.data.id, username: e.data.username, password_hash: e.data.passwordHash, created_by: e.data.createdBy, created_at: new Date(e.data.at) })
            .onConflict((oc) => oc.column('id').doNothing())
            .execute();
          break;
        case 'CredentialsSetDeleted':
          await tx.deleteFrom('credentials_sets').where('id', '=', e.data.id).execute();
          // A reservation cannot outlive its credentials set: nobody could publish to it any more.
          await tx.deleteFrom('reserved_topics').where('credentials_set_id', '=', e.data.id).execute();
          break;
        case 'ReservedTopicCreated':
          await tx
            .insertInto('reserved_topics')
            .values({ id: e.data.id, topic: e.data.topic, credentials_set_id: e.data.basicCredentialsSetId, created_by: e.data.createdBy, created_at: new Date(e.data.at) })
            .onConflict((oc) => oc.column('id').doNothing())
            .execute();
          break;
        case 'ReservedTopicDeleted':
          await tx.deleteFrom('reserved_topics').where('id', '=', e.data.id).execute();
          break;
        case 'ConnectorCreated':
          await sql`INSERT INTO connectors (id, doc, secrets, integration, created_by, created_at)
            VALUES (${e.data.id}, ${JSON.stringify(e.data.doc)}::jsonb, ${JSON.stringify(e.data.secrets)}::jsonb, ${String(e.data.doc.integration)}, ${e.data.createdBy}, ${e.data.at})
            ON CONFLICT (id) DO NOTHING`.execute(tx);
          break;
        case 'ConnectorDeleted':
          await tx.deleteFrom('connectors').where('id', '=', e.data.id).execute();
          break;
        case 'ConnectorStatusChanged': {
          const { id, status, error, at } = e.data;
          await sql`UPDATE connectors SET status = ${status}, status_at = ${at},
              last_error = COALESCE(${error ?? null}, last_error), last_error_at = CASE WHEN ${status} = 'failing' THEN ${at}::timestamptz ELSE last_error_at END
            WHERE id = ${id} AND (status_at IS NULL OR status_at <= ${at})`.execute(tx);
          break;
        }
      }
    }
  },
};
