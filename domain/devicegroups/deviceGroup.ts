import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError } from '../shared/errors.js';

/** A named list of devices; a channel on a group covers the devices added to it later. */
export type DeviceGroupEvent =
  | { type: 'DeviceGroupCreated'; data: { id: string; name: string; devices: string[]; createdBy: string; at: string } }
  | { type: 'DeviceGroupUpdated'; data: { id: string; name?: string; devices?: string[]; at: string } }
  | { type: 'DeviceGroupDeleted'; data: { id: string; at: string } };

export type DeviceGroupCommand =
  | { type: 'CreateDeviceGroup'; id: string; name: string; devices: string[]; createdBy: string; at: string }
  | { type: 'UpdateDeviceGroup'; id: string; name?: string; devices?: string[]; at: string }
  /**
   * Adds devices after those the group holds (one it holds stays where it is),
   * dropping the ones added longest ago past `keepAtMost`. Decided against the
   * group as stored, so concurrent adds commute: a writer that lost the race
   * decides again and keeps the other's devices. With `create`, the group is
   * the one of that name: created with these devices when the stream holds
   * none, not found when it holds a group renamed since.
   */
  | { type: 'AddDevices'; id: string; devices: string[]; keepAtMost?: number; create?: { name: string; createdBy: string }; at: string }
  | { type: 'DeleteDeviceGroup'; id: string; at: string };

export type DeviceGroupState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; name: string; devices: string[] };

export const deviceGroupStream = (id: string) => `devicegroup-${id}`;
export const DEVICE_GROUP_NOT_FOUND = 'Device group not found';

const unique = (ids: string[]) => [...new Set(ids)];
const keep = (ids: string[], most?: number) => (most === undefined ? ids : ids.slice(-most));

export const deviceGroupDecider: Decider<DeviceGroupCommand, DeviceGroupState, DeviceGroupEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (command.type === 'CreateDeviceGroup') {
      if (state.status !== 'none') throw new ConflictError(`Device group ${command.id} already exists`);
      const { id, name, createdBy, at } = command;
      return [{ type: 'DeviceGroupCreated', data: { id, name, devices: unique(command.devices), createdBy, at } }];
    }
    if (command.type === 'AddDevices' && command.create && state.status === 'none') {
      const { id, at } = command;
      const { name, createdBy } = command.create;
      return [{ type: 'DeviceGroupCreated', data: { id, name, devices: keep(unique(command.devices), command.keepAtMost), createdBy, at } }];
    }
    if (state.status !== 'active') throw new NotFoundError(DEVICE_GROUP_NOT_FOUND);
    switch (command.type) {
      case 'UpdateDeviceGroup': {
        const data: Extract<DeviceGroupEvent, { type: 'DeviceGroupUpdated' }>['data'] = { id: command.id, at: command.at };
        if (command.name !== undefined && command.name !== state.name) data.name = command.name;
        if (command.devices !== undefined) {
          const devices = unique(command.devices);
          // The same members in the same order change nothing; a new order is a change (it is the group's order).
          if (devices.length !== state.devices.length || devices.some((id, i) => id !== state.devices[i])) data.devices = devices;
        }
        if (data.name === undefined && data.devices === undefined) return [];
        return [{ type: 'DeviceGroupUpdated', data }];
      }
      case 'AddDevices': {
        if (command.create && command.create.name !== state.name) throw new NotFoundError(DEVICE_GROUP_NOT_FOUND);
        const added = unique(command.devices).filter((id) => !state.devices.includes(id));
        if (!added.length) return [];
        return [{ type: 'DeviceGroupUpdated', data: { id: command.id, devices: keep([...state.devices, ...added], command.keepAtMost), at: command.at } }];
      }
      case 'DeleteDeviceGroup':
        return [{ type: 'DeviceGroupDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'DeviceGroupCreated':
        return { status: 'active', id: event.data.id, name: event.data.name, devices: event.data.devices };
      case 'DeviceGroupUpdated':
        if (state.status !== 'active') return state;
        return { ...state, name: event.data.name ?? state.name, devices: event.data.devices ?? state.devices };
      case 'DeviceGroupDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
