import type { Decider } from '../shared/decider.js';
import type { EventSchemas } from '../eventstore/schemas.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { isResourceId } from '../shared/ids.js';
import { SCOPES, type Scope } from '../access/scopes.js';
import { DEV_EUI, normalizeDevEui } from '../integrations/catalog.js';
import { limitMessage, limitPassed } from './size.js';

/**
 * A device (iotnode): an open record. A few fields are fixed (`name`,
 * `description`, `category`, `connector`, `lnglat`, `secret`, `reportedAt`,
 * `updatedAt`, `rabbitRouting`), and a device bound to a network server's
 * connector is named inside it by `devEui` (16 hex digits, stored lower case)
 * or `networkDeviceId`; everything else a device reports becomes a top-level
 * field. Clients change it through REST (`DeviceUpdated`); devices
 * through MQTT (`DeviceReported`, written by the ingest pipeline).
 */
export type DeviceDoc = Record<string, unknown>;

export type DeviceEvent =
  | {
      type: 'DeviceRegistered';
      data: { id: string; createdBy: string; doc: DeviceDoc; credentialsSetId?: string; at: string };
    }
  | { type: 'DeviceUpdated'; data: { id: string; set: DeviceDoc; unset: string[]; at: string } }
  | {
      type: 'DeviceReported';
      data: { id: string; topic: string; path: string[]; payload: DeviceDoc; reportedAt: string };
    }
  | {
      type: 'DeviceClaimed';
      /**
       * `grants`: the access rights the claim gives on the device (the
       * credentials set's rights passing to it, and the claimer's own), applied
       * by the access projection. `username` names the claimer in the device's
       * log; claims of version 1 do not carry it.
       */
      data: { id: string; userId: string; username?: string; credentialsSetId: string | null; grants: ClaimGrant[]; at: string };
    }
  | { type: 'DeviceDeleted'; data: { id: string; at: string } };

/** A right a claim gives on the device: `user` for one user, `group` for a usergroup, `orgUnit` for an organization unit. */
export interface ClaimGrant {
  subjectType: 'user' | 'group' | 'orgUnit';
  subjectId: string;
  scope: Scope[];
}

/**
 * Schema versions of device events (see `domain/eventstore/schemas.ts`).
 * `DeviceClaimed` 2 carries the rights the claim gives (`grants`). Claims of
 * version 1 carried none: their rights were stored as `AccessGranted` events
 * on the device's access stream, in the same request, so they upcast to no
 * grants and replay gives the same rights.
 */
export const deviceSchemas: EventSchemas = {
  DeviceClaimed: { version: 2, upcast: { 1: (data) => ({ ...data, grants: Array.isArray(data.grants) ? data.grants : [] }) } },
};

export type DeviceCommand =
  | { type: 'RegisterDevice'; id: string; createdBy: string; fields: DeviceDoc; at: string }
  | { type: 'UpdateDevice'; id: string; fields: DeviceDoc; at: string }
  | {
      type: 'ClaimDevice';
      id: string;
      userId: string;
      username: string;
      /** The claimer already holds a right on the device or on its credentials set: the owner's consent to a claim of a claimed device. */
      consented: boolean;
      /** The rights held on the device's credentials set, which pass to the device. */
      setRights: ClaimGrant[];
      at: string;
    }
  | { type: 'DeleteDevice'; id: string; at: string }
  | ReportDevice;

/**
 * A device report, whatever brought it: an MQTT publish, an HTTP uplink, a
 * network server's webhook, a calculation. `source` says where it came from
 * (the MQTT topic, `/api/iotnodes/<id>/uplinks`, `integration:<name>/<connectorId>`);
 * `path` nests the payload below the device's own fields (a sub-topic).
 */
export interface ReportDevice {
  type: 'ReportDevice';
  id: string;
  source: string;
  path: string[];
  payload: DeviceDoc;
  reportedAt: string;
}

export type DeviceState =
  | { status: 'none' | 'deleted' }
  | { status: 'active'; id: string; doc: DeviceDoc; createdBy: string; credentialsSetId: string | null; claimedBy: string[] };

export const deviceStream = (id: string) => `device-${id}`;
/** Whether a stream is a device's (`deviceStream`). */
export const isDeviceStream = (streamId: string) => streamId.startsWith('device-');

export const DEVICE_NOT_FOUND = 'Iotnode not found';

/** Separates parts of composite keys inside the platform, so a name must not carry it. */
const SEPARATOR = '~||~';

/** Fields only the platform writes. */
export const SYSTEM_FIELDS = new Set(['_id', 'reportedAt', 'updatedAt', 'createdAt', 'rabbitRouting']);
/** Fields a device's own reports cannot change: they identify it or belong to the platform. */
export const PROTECTED_FROM_REPORTS = new Set([...SYSTEM_FIELDS, 'secret', 'connector', 'devEui', 'networkDeviceId', 'name', 'translatorPreferences']);

export function checkName(name: unknown): string {
  if (typeof name !== 'string' || name.trim() === '') throw ValidationError.field('name', 'must be a non-empty string');
  if (name.includes(SEPARATOR)) throw ValidationError.field('name', `must not contain ${SEPARATOR}`);
  return name;
}

/** A GeoJSON Point, longitude first, within the WGS 84 ranges. */
export function isLngLat(value: unknown): value is { type: 'Point'; coordinates: [number, number] } {
  const v = value as { type?: unknown; coordinates?: unknown };
  if (!v || typeof v !== 'object' || v.type !== 'Point' || !Array.isArray(v.coordinates) || v.coordinates.length !== 2) return false;
  const [lng, lat] = v.coordinates as unknown[];
  return typeof lng === 'number' && typeof lat === 'number' && Number.isFinite(lng) && Number.isFinite(lat) && lng >= -180 && lng <= 180 && lat >= -90 && lat <= 90;
}

const checkLngLat = (value: unknown) => {
  if (!isLngLat(value)) throw ValidationError.field('lnglat', 'must be a GeoJSON Point with coordinates [longitude, latitude], longitude -180 to 180, latitude -90 to 90');
  return { type: 'Point', coordinates: [value.coordinates[0], value.coordinates[1]] };
};

/** `connector` is accepted as an id or as `{_id}` and stored as the id. */
function checkConnector(value: unknown): string | null {
  if (value === null) return null;
  const id = typeof value === 'object' && value !== null ? (value as { _id?: unknown })._id : value;
  if (!isResourceId(id)) throw ValidationError.field('connector', 'must be a connector id or an object with _id');
  return id;
}

/**
 * Checks and normalises the fields a client writes. `null` removes a field
 * (except `name`, which is required). The platform's own fields are ignored,
 * so a document read with GET can be written back; `rabbitRouting` only when
 * it equals the value the platform keeps (`kept`), any other is refused.
 */
export function clientFields(fields: DeviceDoc, creating: boolean, kept: DeviceDoc = {}): { set: DeviceDoc; unset: string[] } {
  const set: DeviceDoc = {};
  const unset: string[] = [];
  for (const [key, value] of Object.entries(fields)) {
    if (key === 'rabbitRouting' && (kept.rabbitRouting === undefined || !jsonEqual(value, kept.rabbitRouting))) {
      throw ValidationError.field('rabbitRouting', 'is internal and cannot be changed; send it as read, or leave it out');
    }
    if (SYSTEM_FIELDS.has(key)) continue;
    if (value === null && key !== 'name') {
      if (!creating) unset.push(key);
      continue;
    }
    if (value === undefined) continue;
    switch (key) {
      case 'name':
        set.name = checkName(value);
        break;
      case 'lnglat':
        set.lnglat = checkLngLat(value);
        break;
      case 'connector':
        set.connector = checkConnector(value);
        break;
      case 'devEui':
        if (typeof value !== 'string' || !DEV_EUI.test(value)) throw ValidationError.field('devEui', 'must be a LoRaWAN DevEUI: 16 hexadecimal digits');
        set.devEui = normalizeDevEui(value);
        break;
      case 'secret':
        // Like a reserved topic (it is one), at most 1024 bytes: it is an indexed key, and 1024 characters could be 4 KB.
        if (typeof value !== 'string' || value.length < 1 || Buffer.byteLength(value) > 1024) throw ValidationError.field('secret', 'must be a string of 1 to 1024 bytes (UTF-8)');
        set.secret = value;
        break;
      case 'networkDeviceId':
        if (typeof value !== 'string' || value.length < 1 || value.length > 128) throw ValidationError.field('networkDeviceId', 'must be the network server\'s id of the device, 1 to 128 characters');
        set.networkDeviceId = value;
        break;
      default:
        set[key] = value;
    }
  }
  if (creating && set.name === undefined) throw ValidationError.field('name', 'is required');
  return { set, unset };
}

/**
 * What a device's report may change: its own measurement fields. Fields that
 * identify the device or belong to the platform are dropped; an invalid
 * `lnglat` is dropped. Returns the kept payload and the dropped keys.
 */
export function reportableFields(payload: DeviceDoc, nested: boolean): { kept: DeviceDoc; dropped: string[] } {
  if (nested) return { kept: payload, dropped: [] };
  const kept: DeviceDoc = {};
  const dropped: string[] = [];
  for (const [key, value] of Object.entries(payload)) {
    if (PROTECTED_FROM_REPORTS.has(key) || (key === 'lnglat' && !isLngLat(value))) dropped.push(key);
    // A point as REST keeps it: other members (a GeoJSON `crs`) are not the platform's to store.
    else if (key === 'lnglat') kept.lnglat = { type: 'Point', coordinates: [...(value as { coordinates: [number, number] }).coordinates] };
    else kept[key] = value;
  }
  return { kept, dropped };
}

/**
 * The top-level field a report on a sub-topic (`path` not empty) would write
 * but may not, or null: a report below a reserved topic lands under its first
 * level, so `R/secret`, `R/name` or `R/createdAt` would reach the fields a
 * report on `R` itself cannot change, and `R/lnglat` must carry a valid point
 * (`R/lnglat/x` never does).
 */
export function refusedSubTopicField(path: string[], payload: unknown): string | null {
  const head = path[0];
  if (head === undefined) return null;
  if (PROTECTED_FROM_REPORTS.has(head)) return head;
  if (head === 'lnglat' && (path.length > 1 || !isLngLat(payload))) return head;
  return null;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Applies a report: on the reserved topic itself (`path` empty) the payload's
 * fields become top-level fields; on a sub-topic the payload is stored under
 * the sub-topic path, keeping the siblings along the way.
 */
export function applyReport(doc: DeviceDoc, path: string[], payload: DeviceDoc): DeviceDoc {
  if (path.length === 0) return { ...doc, ...payload };
  // Ingest refuses such a report; one stored before it did changes nothing.
  if (refusedSubTopicField(path, payload) !== null) return doc;
  const [head, ...rest] = path as [string, ...string[]];
  const current = isPlainObject(doc[head]) ? (doc[head] as DeviceDoc) : {};
  return { ...doc, [head]: rest.length ? applyReport(current, rest, payload) : payload };
}

/** Structural equality for JSON values. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual((a as DeviceDoc)[k], (b as DeviceDoc)[k]));
}

/** The top-level attributes whose value differs between two versions of a device; removed ones are `null`. */
export function diffDocs(before: DeviceDoc, after: DeviceDoc): DeviceDoc {
  const diff: DeviceDoc = {};
  for (const [k, v] of Object.entries(after)) if (!jsonEqual(before[k], v)) diff[k] = v;
  for (const k of Object.keys(before)) if (!(k in after)) diff[k] = null;
  return diff;
}

/** The document a device has after an event; `updatedAt` moves only when an attribute other than the timestamps changed. */
export function evolveDoc(doc: DeviceDoc, event: DeviceEvent): DeviceDoc {
  switch (event.type) {
    case 'DeviceRegistered':
      return { ...event.data.doc, createdAt: event.data.at, updatedAt: event.data.at };
    case 'DeviceUpdated': {
      const next = { ...doc, ...event.data.set };
      for (const k of event.data.unset) delete next[k];
      return touched(doc, next, event.data.at);
    }
    case 'DeviceReported':
      return reported(doc, event.data).doc;
    case 'DeviceClaimed':
    case 'DeviceDeleted':
      return doc;
    default: {
      const _: never = event;
      return _;
    }
  }
}

/**
 * The document after a report, or the document as it was when the report
 * would take it past `DOC_LIMITS` (`refused` then names the limit): the whole
 * report is left out, `reportedAt` included. Decided here, in the fold every
 * reader of devices shares, because a report is decided without reading its
 * device (ingest knows only that it exists): the read model, time travel, the
 * output topics and the translators' cache all leave out the same reports.
 */
export function reported(doc: DeviceDoc, data: { path: string[]; payload: DeviceDoc; reportedAt: string }): { doc: DeviceDoc; refused: 'fields' | 'bytes' | null } {
  const applied = applyReport(doc, data.path, data.payload);
  // A copy when the report changed nothing: a document once folded is never changed in place (read models keep them).
  const next = applied === doc ? { ...doc } : applied;
  next.reportedAt = data.reportedAt;
  const after = touched(doc, next, data.reportedAt);
  const refused = limitPassed(doc, after);
  return refused ? { doc, refused } : { doc: after, refused: null };
}

/** ERR text of a REST write that would take a device's document past `DOC_LIMITS`, or null. */
export function oversizeProblem(before: DeviceDoc, after: DeviceDoc): string | null {
  const passed = limitPassed(before, after);
  return passed ? `ERR - iotnode ${limitMessage(passed)}` : null;
}

/** A device's document through its life, as the devices read model holds it. */
export type DocState = { status: 'none' | 'deleted' } | { status: 'active'; doc: DeviceDoc };

/** The read model's fold of one device: registered once, then `evolveDoc` on every event until it is deleted. */
export function evolveDocState(state: DocState, event: DeviceEvent): DocState {
  if (event.type === 'DeviceRegistered') return state.status === 'none' ? { status: 'active', doc: evolveDoc({}, event) } : state;
  if (state.status !== 'active') return state;
  if (event.type === 'DeviceDeleted') return { status: 'deleted' };
  return { status: 'active', doc: evolveDoc(state.doc, event) };
}

/** `after`, with `updatedAt` set to `at` when anything but the two timestamps changed. */
function touched(before: DeviceDoc, after: DeviceDoc, at: string): DeviceDoc {
  return sameBesidesTimes(before, after) ? after : { ...after, updatedAt: at };
}

/** `jsonEqual` of two documents, leaving `reportedAt` and `updatedAt` out (without copying them: this runs for every report). */
function sameBesidesTimes(a: DeviceDoc, b: DeviceDoc): boolean {
  let n = 0;
  for (const k in a) {
    if (k === 'reportedAt' || k === 'updatedAt' || !Object.prototype.hasOwnProperty.call(a, k)) continue;
    if (!Object.prototype.hasOwnProperty.call(b, k) || !jsonEqual(a[k], b[k])) return false;
    n++;
  }
  for (const k in b) if (k !== 'reportedAt' && k !== 'updatedAt' && Object.prototype.hasOwnProperty.call(b, k)) n--;
  return n === 0;
}

/** The device as clients see it. */
export const presentDevice = (id: string, doc: DeviceDoc) => ({ _id: id, ...doc });

export const rabbitRouting = (id: string) => ({ exchange: 'iotnodes', routingKey: `iotnode.${id}` });

export const deviceDecider: Decider<DeviceCommand, DeviceState, DeviceEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (command.type === 'RegisterDevice') {
      if (state.status !== 'none') throw new ConflictError(`Iotnode ${command.id} already exists`);
      const routing = rabbitRouting(command.id);
      const { set } = clientFields(command.fields, true, { rabbitRouting: routing });
      const doc = { ...set, rabbitRouting: routing };
      const oversize = oversizeProblem({}, doc);
      if (oversize) throw new ValidationError(oversize);
      return [{ type: 'DeviceRegistered', data: { id: command.id, createdBy: command.createdBy, doc, at: command.at } }];
    }
    if (state.status !== 'active') throw new NotFoundError(DEVICE_NOT_FOUND);
    switch (command.type) {
      case 'ReportDevice':
        return decideReport(command).events;
      case 'UpdateDevice': {
        const { set, unset } = clientFields(command.fields, false, state.doc);
        const present = unset.filter((k) => k in state.doc);
        const changed = Object.entries(set).some(([k, v]) => !jsonEqual(state.doc[k], v));
        if (!changed && present.length === 0) return [];
        const next = { ...state.doc, ...set };
        for (const k of present) delete next[k];
        const oversize = oversizeProblem(state.doc, next);
        if (oversize) throw new ValidationError(oversize);
        return [{ type: 'DeviceUpdated', data: { id: command.id, set, unset: present, at: command.at } }];
      }
      case 'ClaimDevice': {
        if (state.claimedBy.includes(command.userId)) return [];
        // Knowing a secret is enough for the first claim (the contract's onboarding flow); a claimed device changes hands only with its owner's consent.
        if (state.claimedBy.length > 0 && !command.consented) throw new NotFoundError(DEVICE_NOT_FOUND);
        const grants = claimGrants(command.userId, command.setRights);
        return [{ type: 'DeviceClaimed', data: { id: command.id, userId: command.userId, username: command.username, credentialsSetId: state.credentialsSetId, grants, at: command.at } }];
      }
      case 'DeleteDevice':
        return [{ type: 'DeviceDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    if (event.type === 'DeviceRegistered') {
      return {
        status: 'active',
        id: event.data.id,
        doc: evolveDoc({}, event),
        createdBy: event.data.createdBy,
        credentialsSetId: event.data.credentialsSetId ?? null,
        claimedBy: [],
      };
    }
    if (state.status !== 'active') return state;
    switch (event.type) {
      case 'DeviceDeleted':
        return { status: 'deleted' };
      case 'DeviceClaimed':
        return { ...state, claimedBy: [...state.claimedBy, event.data.userId] };
      case 'DeviceUpdated':
      case 'DeviceReported':
        return { ...state, doc: evolveDoc(state.doc, event) };
      default: {
        const _: never = event;
        return state;
      }
    }
  },
};

/**
 * The device's decider for claims. A claim decides on who claimed before and on the credentials set, never on
 * the document, so its fold passes over reports (the bulk of a device's life: tens of thousands a month) instead
 * of folding each into the document, which made a claim cost a second per ten thousand reports of a wide device.
 */
export const claimDecider: Decider<DeviceCommand, DeviceState, DeviceEvent> = {
  ...deviceDecider,
  evolve: (state, event) => (event.type === 'DeviceReported' ? state : deviceDecider.evolve(state, event)),
};

/**
 * The one decision on a device report: the fields a report may change go
 * into a `DeviceReported`; fields that identify the device or belong to the
 * platform are left out and named in `ignored`. Pure; the caller knows the
 * device exists (ingest from its registry, REST from the stream).
 */
export function decideReport(command: ReportDevice): { events: DeviceEvent[]; ignored: string[] } {
  const refused = refusedSubTopicField(command.path, command.payload);
  if (refused !== null) return { events: [], ignored: [refused] };
  const { kept, dropped } = reportableFields(command.payload, command.path.length > 0);
  const event: DeviceEvent = { type: 'DeviceReported', data: { id: command.id, topic: command.source, path: command.path, payload: kept, reportedAt: command.reportedAt } };
  return { events: [event], ignored: dropped };
}

/**
 * The one decision on an uplink: the device's own report and the reports its
 * translators made from it for other devices (a gateway's
 * `additionalDeviceUpdates`), one fact, so its events go into one atomic
 * append over every stream they name (ingest, and `POST
 * /api/iotnodes/{id}/uplinks`). `ignored` names the device's own fields left out.
 */
export function decideUplink(command: ReportDevice & { updates: { deviceId: string; payload: DeviceDoc }[] }): { appends: { streamId: string; events: DeviceEvent[] }[]; ignored: string[] } {
  const { updates, ...own } = command;
  const report = decideReport(own);
  const streams = new Map<string, DeviceEvent[]>();
  const add = (id: string, events: DeviceEvent[]) => {
    if (events.length) streams.set(deviceStream(id), [...(streams.get(deviceStream(id)) ?? []), ...events]);
  };
  add(command.id, report.events);
  for (const u of updates) add(u.deviceId, decideReport({ type: 'ReportDevice', id: u.deviceId, source: command.source, path: [], payload: u.payload, reportedAt: command.reportedAt }).events);
  return { appends: [...streams].map(([streamId, events]) => ({ streamId, events })), ignored: report.ignored };
}

/** The device after a report on its own topic: the same fold the read model and the output apply. */
export const foldReport = (doc: DeviceDoc, id: string, payload: DeviceDoc, reportedAt: string): DeviceDoc =>
  evolveDoc(doc, decideReport({ type: 'ReportDevice', id, source: '', path: [], payload, reportedAt }).events[0]!);

/**
 * The rights a claim gives: every right held on the credentials set passes to
 * the device, and the claimer gets `write` and `read`, plus whatever it holds
 * on the set itself, so `admin` on a claimed device is only for who already
 * had it on the set.
 */
export function claimGrants(userId: string, setRights: ClaimGrant[]): ClaimGrant[] {
  const user = userId.toLowerCase();
  const own = setRights.filter((r) => r.subjectType === 'user' && r.subjectId.toLowerCase() === user).flatMap((r) => r.scope);
  const others = setRights.filter((r) => !(r.subjectType === 'user' && r.subjectId.toLowerCase() === user));
  const claimer: ClaimGrant = { subjectType: 'user', subjectId: user, scope: SCOPES.filter((s) => s === 'write' || s === 'read' || own.includes(s)) };
  return [...others.map((r) => ({ ...r, scope: [...r.scope] })), claimer];
}

/** The event that registers a device on its first MQTT message; the credentials set's creator becomes its creator. */
export function mqttRegistration(id: string, topic: string, credentialsSetId: string, createdBy: string, at: string): DeviceEvent {
  const doc: DeviceDoc = { name: `MQTT - ${topic}`, secret: topic, rabbitRouting: rabbitRouting(id) };
  return { type: 'DeviceRegistered', data: { id, createdBy, doc, credentialsSetId, at } };
}

/**
 * The event that registers a device on its first message from a Generic
 * connector's external broker: bound to the connector, named by its topic,
 * the connector's creator its creator.
 */
export function connectorRegistration(id: string, topic: string, connectorId: string, createdBy: string, at: string): DeviceEvent {
  const doc: DeviceDoc = { name: `MQTT - ${topic}`, secret: topic, connector: connectorId, rabbitRouting: rabbitRouting(id) };
  return { type: 'DeviceRegistered', data: { id, createdBy, doc, at } };
}
