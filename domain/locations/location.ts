import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';

/**
 * A location (deprecated; kept for old integrations): a named place with a
 * position, a default layer and further layers, each a background image with
 * device items placed on it. Superseded by dashboards with floor plans; the
 * API marks its operations deprecated.
 */
export interface LocationItem {
  deviceId: string;
  type?: string;
  size?: number;
  top?: number;
  left?: number;
  valueDisplay?: string;
  locationItemControl?: { icon?: string };
}

export interface LocationLayer {
  name?: string;
  items?: LocationItem[];
  image?: string;
  left?: number;
  top?: number;
  width?: number;
  height?: number;
}

export interface Location {
  name: string;
  description?: string;
  /** The creating user. */
  user: string;
  lat: number;
  lng: number;
  icon?: string;
  defaultLayer: LocationLayer;
  layers?: LocationLayer[];
  version?: number;
}

export type LocationEvent =
  | { type: 'LocationCreated'; data: { id: string; createdBy: string; location: Location; at: string } }
  | { type: 'LocationReplaced'; data: { id: string; location: Location; at: string } }
  | { type: 'LocationDeleted'; data: { id: string; at: string } };

export type LocationCommand =
  | { type: 'CreateLocation'; id: string; createdBy: string; location: Location; at: string }
  | { type: 'ReplaceLocation'; id: string; location: Location; at: string }
  | { type: 'DeleteLocation'; id: string; at: string };

export type LocationState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; location: Location };

export const locationStream = (id: string) => `location-${id}`;
export const LOCATION_NOT_FOUND = 'Location not found';

/** Letters, digits, åäöÅÄÖ, spaces, underscores and hyphens: the contract's character set for location and layer names. */
const NAME = /^[A-Za-z0-9åäöÅÄÖ _-]+$/;

/** The contract's rule, with the words it requires in the message. */
export function checkLocationName(field: string, name: string): void {
  if (!NAME.test(name)) {
    throw ValidationError.field(field, 'is not a valid location name: use only letters, digits, åäöÅÄÖ, spaces, underscores and hyphens');
  }
}

/** Ranges the request schema also states; checked here too so the decider holds the rule whoever calls it. */
const RANGES: [keyof LocationLayer, number, number][] = [
  ['left', 0, 100],
  ['top', 0, 100],
  ['width', 50, 200],
  ['height', 50, 200],
];

function checkLayer(field: string, layer: LocationLayer): void {
  if (layer.name !== undefined) checkLocationName(`${field}.name`, layer.name);
  for (const [key, min, max] of RANGES) {
    const value = layer[key];
    if (value !== undefined && (typeof value !== 'number' || value < min || value > max)) throw ValidationError.field(`${field}.${key}`, `must be between ${min} and ${max}`);
  }
  for (const [i, item] of (layer.items ?? []).entries()) {
    if (typeof item.deviceId !== 'string' || item.deviceId === '') throw ValidationError.field(`${field}.items.${i}.deviceId`, 'is required');
  }
}

/**
 * The contract's rules on a whole location. Names are compared in Unicode
 * NFC, so an `ä` typed as `a` plus a combining diaeresis is the same `ä`.
 */
export function checkLocation(location: Location): Location {
  const normalized: Location = {
    ...location,
    name: location.name.normalize('NFC'),
    defaultLayer: normalizeLayer(location.defaultLayer),
    ...(location.layers ? { layers: location.layers.map(normalizeLayer) } : {}),
  };
  checkLocationName('name', normalized.name);
  checkLayer('defaultLayer', normalized.defaultLayer);
  for (const [i, layer] of (normalized.layers ?? []).entries()) checkLayer(`layers.${i}`, layer);
  return normalized;
}

const normalizeLayer = (layer: LocationLayer): LocationLayer => (typeof layer.name === 'string' ? { ...layer, name: layer.name.normalize('NFC') } : layer);

/** Every device a location shows, in order of appearance. */
export const deviceIdsOf = (location: Location): string[] => [
  ...new Set([location.defaultLayer, ...(location.layers ?? [])].flatMap((layer) => (layer.items ?? []).map((item) => item.deviceId))),
];

export const locationDecider: Decider<LocationCommand, LocationState, LocationEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'CreateLocation': {
        if (state.status !== 'none') throw new ConflictError(`Location ${command.id} already exists`);
        const location = checkLocation(command.location);
        return [{ type: 'LocationCreated', data: { id: command.id, createdBy: command.createdBy, location, at: command.at } }];
      }
      case 'ReplaceLocation': {
        if (state.status !== 'active') throw new NotFoundError(LOCATION_NOT_FOUND);
        const location = checkLocation(command.location);
        return [{ type: 'LocationReplaced', data: { id: command.id, location, at: command.at } }];
      }
      case 'DeleteLocation':
        if (state.status !== 'active') throw new NotFoundError(LOCATION_NOT_FOUND);
        return [{ type: 'LocationDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'LocationCreated':
      case 'LocationReplaced':
        return { status: 'active', id: event.data.id, location: event.data.location };
      case 'LocationDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
