import type { RecordedEvent } from '../domain/shared/events.js';
import type { AppEvent } from '../domain/apps/app.js';
import type { Projection } from './runner.js';

export interface AppsTable {
  id: string;
  name: string;
  description: string | null;
  /** scrypt, salted; never returned. */
  secret_hash: string;
  created_by: string;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

export interface AppsTables {
  apps: AppsTable;
}

/** Client apps; guarded by stream revision. A deleted app also leaves every usergroup's filter (see `usergroupsProjection`). */
export const appsProjection: Projection = {
  name: 'apps',
  tables: ['apps'],
  async apply(tx, batch) {
    for (const e of batch as (RecordedEvent & AppEvent)[]) {
      switch (e.type) {
        case 'AppCreated': {
          const at = new Date(e.data.at);
          await tx
            .insertInto('apps')
            .values({ id: e.data.id, name: e.data.name, description: e.data.description ?? null, secret_hash: e.data.secretHash, created_by: e.data.createdBy, revision: e.revision, created_at: at, updated_at: at })
            .onConflict((oc) => oc.column('id').doNothing())
            .execute();
          break;
        }
        case 'AppUpdated':
          await tx
            .updateTable('apps')
            .set({ name: e.data.name, description: e.data.description ?? null, revision: e.revision, updated_at: new Date(e.data.at) })
            .where('id', '=', e.data.id)
            .where('revision', '<', e.revision)
            .execute();
          break;
        case 'AppSecretRotated':
          await tx
            .updateTable('apps')
            .set({ secret_hash: e.data.secretHash, revision: e.revision, updated_at: new Date(e.data.at) })
            .where('id', '=', e.data.id)
            .where('revision', '<', e.revision)
            .execute();
          break;
        case 'AppDeleted':
          await tx.deleteFrom('apps').where('id', '=', e.data.id).execute();
          break;
      }
    }
  },
};
