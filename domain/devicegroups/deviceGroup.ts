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
  | { type: 'DeleteDeviceGroup'; id: string; at: string };

export type DeviceGroupState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; name: string; devices: string[] };

export const deviceGroupStream = (id: string) => `devicegroup-${id}`;
export const DEVICE_GROUP_NOT_FOUND = 'Device group not found';

const unique = (ids: string[]) => [...new Set(ids)];

export const deviceGroupDecider: Decider<DeviceGroupCommand, DeviceGroupState, DeviceGroupEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (command.type === 'CreateDeviceGroup') {
      if (state.status !== 'none') throw new ConflictError(`Device group ${command.id} already exists`);
      const { id, name, createdBy, at } = command;
      return [{ type: 'DeviceGroupCreated', data: { id, name, devices: unique(command.devices), createdBy, at } }];
    }
    if (state.status !== 'active') throw new NotFoundError(DEVICE_GROUP_NOT_FOUND);
    switch (command.type) {
      case 'UpdateDeviceGroup': {
        const data: Extract<DeviceGroupEvent, { type: 'DeviceGroupUpdated' }>['data'] = { id: command.id, at: command.at };
        if (command.name !== undefined && command.name !== state.name) data.name = command.name;
        if (command.devices !== undefined) data.devices = unique(command.devices);
        if (data.name === undefined && data.devices === undefined) return [];
        return [{ type: 'DeviceGroupUpdated', data }];
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
