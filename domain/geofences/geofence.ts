import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { checkRing, type Polygon } from './fence.js';
import { jsonEqual } from '../devices/device.js';

/** What a client sends and gets back. `refType` is `device` whenever `ref` is set. */
export interface GeofenceFields {
  fence: Polygon;
  ref: string | null;
  refType: 'device' | null;
}

export type GeofenceEvent =
  | { type: 'GeofenceCreated'; data: GeofenceFields & { id: string; createdBy: string; at: string } }
  | { type: 'GeofenceReplaced'; data: GeofenceFields & { id: string; at: string } }
  | { type: 'GeofenceDeleted'; data: { id: string; at: string } };

export type GeofenceCommand =
  | { type: 'CreateGeofence'; id: string; fields: GeofenceFields; createdBy: string; at: string }
  | { type: 'ReplaceGeofence'; id: string; fields: GeofenceFields; at: string }
  | { type: 'DeleteGeofence'; id: string; at: string };

/** A fence as it is: its fields, who created it, and when it was created and last replaced (the events' `at`). */
export type ActiveGeofence = { status: 'active'; id: string; createdBy: string; createdAt: string; updatedAt: string } & GeofenceFields;

export type GeofenceState = { status: 'none' | 'deleted' } | ActiveGeofence;

export const geofenceStream = (id: string) => `geofence-${id}`;

export const GEOFENCE_NOT_FOUND = 'Geofence not found';

/**
 * The body as sent (`{fence, ref?, refType?}`, already shaped by the OpenAPI
 * schema) to the stored fields. A `refType` without a `ref` links nothing and
 * is refused; a `ref` without `refType` is a device, the only kind there is.
 */
export function geofenceFields(body: { fence: Polygon; ref?: string; refType?: 'device' }): GeofenceFields {
  if (body.refType !== undefined && body.ref === undefined) throw ValidationError.field('refType', 'needs ref: the id of the device the fence is linked to');
  checkRing(body.fence.coordinates[0]!, 'fence.coordinates.0');
  return { fence: body.fence, ref: body.ref ?? null, refType: body.ref === undefined ? null : 'device' };
}

export const geofenceDecider: Decider<GeofenceCommand, GeofenceState, GeofenceEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (command.type === 'CreateGeofence') {
      if (state.status !== 'none') throw new ConflictError(`Geofence ${command.id} already exists`);
      return [{ type: 'GeofenceCreated', data: { id: command.id, ...command.fields, createdBy: command.createdBy, at: command.at } }];
    }
    if (state.status !== 'active') throw new NotFoundError(GEOFENCE_NOT_FOUND);
    switch (command.type) {
      case 'ReplaceGeofence': {
        const { fence, ref, refType } = command.fields;
        // The fields it has: nothing to record (as for rules and channels), and `updatedAt` stays.
        if (jsonEqual(fence, state.fence) && ref === state.ref && refType === state.refType) return [];
        return [{ type: 'GeofenceReplaced', data: { id: command.id, ...command.fields, at: command.at } }];
      }
      case 'DeleteGeofence':
        return [{ type: 'GeofenceDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'GeofenceCreated': {
        const { id, fence, ref, refType, createdBy, at } = event.data;
        return { status: 'active', id, fence, ref, refType, createdBy, createdAt: at, updatedAt: at };
      }
      case 'GeofenceReplaced': {
        if (state.status !== 'active') return state;
        const { fence, ref, refType, at } = event.data;
        return { ...state, fence, ref, refType, updatedAt: at };
      }
      case 'GeofenceDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};

/** A geofence as clients see it: the one presenter of the live read and of time travel. */
export const presentGeofence = (g: ActiveGeofence) => ({
  _id: g.id,
  fence: g.fence,
  ref: g.ref,
  refType: g.refType,
  createdBy: g.createdBy,
  createdAt: g.createdAt,
  updatedAt: g.updatedAt,
});
