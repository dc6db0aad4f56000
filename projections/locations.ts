import type { RecordedEvent } from '../domain/shared/events.js';
import type { Location, LocationEvent } from '../domain/locations/location.js';
import type { Projection } from './runner.js';

export interface LocationsTable {
  id: string;
  name: string;
  doc: Location;
  user_id: string;
  created_by: string;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

export interface LocationsTables {
  locations: LocationsTable;
}

/** Locations, one row each with the whole location; guarded by stream revision. */
export const locationsProjection: Projection = {
  name: 'locations',
  tables: ['locations'],
  async apply(tx, batch) {
    for (const e of batch as (RecordedEvent & LocationEvent)[]) {
      switch (e.type) {
        case 'LocationCreated': {
          const at = new Date(e.data.at);
          const { location } = e.data;
          await tx
            .insertInto('locations')
            .values({ id: e.data.id, name: location.name, doc: JSON.stringify(location) as never, user_id: location.user, created_by: e.data.createdBy, revision: e.revision, created_at: at, updated_at: at })
            .onConflict((oc) => oc.column('id').doNothing())
            .execute();
          break;
        }
        case 'LocationReplaced': {
          const { location } = e.data;
          await tx
            .updateTable('locations')
            .set({ name: location.name, doc: JSON.stringify(location) as never, user_id: location.user, revision: e.revision, updated_at: new Date(e.data.at) })
            .where('id', '=', e.data.id)
            .where('revision', '<', e.revision)
            .execute();
          break;
        }
        case 'LocationDeleted':
          await tx.deleteFrom('locations').where('id', '=', e.data.id).execute();
          break;
      }
    }
  },
};
