import { sql, type Kysely } from 'kysely';
import type { Position, RecordedEvent } from '../domain/shared/events.js';
import type { UserEvent } from '../domain/users/user.js';
import type { Database } from '../projections/database.js';
import type { Projection } from '../projections/runner.js';
import type { CredentialsSetEvent } from '../domain/credentials/credentialsSet.js';
import type { ReservedTopicEvent } from '../domain/topics/reservedTopic.js';
import type { DeviceEvent } from '../domain/devices/device.js';
import type { ChannelDoc, ChannelEvent, ChannelSecrets, Protocol } from '../domain/channels/channel.js';
import type { DeviceGroupEvent } from '../domain/devicegroups/deviceGroup.js';
import type { ConnectorDoc, ConnectorEvent, ConnectorSecrets } from '../domain/connectors/connector.js';
import type { DeviceDoc } from '../domain/devices/device.js';
import type { AppEvent } from '../domain/apps/app.js';

export interface ConnectorInfo {
  id: string;
  integration: string;
  doc: ConnectorDoc;
  secrets: ConnectorSecrets;
  createdBy: string;
}

/** Devices whose channels `channelsOf` keeps at once. */
const MAX_CHANNELS_SEEN = 100_000;

/** How a network server names a device inside a connector: its DevEUI, or its own device id. */
const deviceKey = (connectorId: string, kind: 'eui' | 'id', value: string) => `${connectorId}\u0000${kind}\u0000${value}`;

export interface CredentialsSetInfo {
  id: string;
  username: string;
  passwordHash: string;
  createdBy: string;
}

/** A client app as the broker checks its login: its id is its username. */
export interface AppInfo {
  id: string;
  secretHash: string;
}

export interface ReservedTopicInfo {
  id: string;
  topic: string;
  setId: string;
}

export interface ChannelInfo {
  id: string;
  protocol: Protocol;
  doc: ChannelDoc;
  secrets: ChannelSecrets;
  /** The user who created it: it exports only what this user may read, checked at each delivery. */
  createdBy: string;
}

/** Where a publish lands: the nearest reserved topic at or above it, and the rest of the path below it. */
export interface Resolved {
  reserved: ReservedTopicInfo;
  path: string[];
}

type RegistryEvent = CredentialsSetEvent | ReservedTopicEvent | DeviceEvent | ChannelEvent | DeviceGroupEvent | ConnectorEvent | AppEvent;

/** Why a user's logins were revoked: what their own MQTT connections are closed for. */
export type UserRevocation = 'deleted' | 'disabled' | 'password changed' | 'password reset';

/** The revocation a user event brings, if any: the user deleted or disabled, or their password changed or reset. */
export function revocationOf(event: RecordedEvent): UserRevocation | null {
  const e = event as RecordedEvent & UserEvent;
  switch (e.type) {
    case 'UserDeleted':
      return 'deleted';
    case 'UserUpdated':
      return e.data.changes.enabled === false ? 'disabled' : null;
    case 'PasswordChanged':
      return 'password changed';
    case 'PasswordReset':
      return 'password reset';
    default:
      return null;
  }
}

/** Users whose latest revocation is remembered at most; past it the memory starts afresh (see `userRevokedAt`). */
const MAX_USER_REVOCATIONS = 10_000;

const addTo = <K, V>(map: Map<K, Set<V>>, key: K, value: V) => {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(value);
};
const removeFrom = <K, V>(map: Map<K, Set<V>>, key: K, value: V) => {
  const set = map.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) map.delete(key);
};

/**
 * What the broker and the output need on every message, in memory: credentials
 * sets by username, reserved topics, the device of each secret, and the
 * channels of each device. Loaded from the read models at start, then kept
 * current by a projection that runs inside the projection runner, so a REST
 * write that returned is already visible to the broker.
 */
export class Registry {
  private sets = new Map<string, CredentialsSetInfo>();
  private setByUsername = new Map<string, string>();
  private topics = new Map<string, ReservedTopicInfo>();
  private topicById = new Map<string, string>();
  private deviceBySecret = new Map<string, string>();
  private secretByDevice = new Map<string, string>();
  private channels = new Map<string, ChannelInfo>();
  private channelsByDevice = new Map<string, Set<string>>();
  private channelsByGroup = new Map<string, Set<string>>();
  private groupMembers = new Map<string, string[]>();
  private groupsByDevice = new Map<string, Set<string>>();
  /** `channelsOf` per device, read several times per report; emptied whenever a channel or a group changes. */
  private channelsSeen = new Map<string, readonly ChannelInfo[]>();
  private connectors = new Map<string, ConnectorInfo>();
  private byNetworkKey = new Map<string, string>();
  /**
   * Each device's `connector`, `devEui` and `networkDeviceId`, when it has any of them: a command names the
   * device by its network names even when it goes through a connector the device is not bound to.
   */
  private bindings = new Map<string, DeviceDoc>();
  private apps = new Map<string, AppInfo>();
  private appRevoked = new Set<(appId: string) => void>();
  private userRevoked = new Set<(userId: string, why: UserRevocation) => void>();
  private userRevocations = new Map<string, Position>();

  async load(db: Kysely<Database>): Promise<void> {
    for (const r of await db.selectFrom('connectors').select(['id', 'doc', 'secrets', 'created_by']).execute()) {
      this.connectors.set(r.id, { id: r.id, integration: String(r.doc.integration), doc: r.doc, secrets: r.secrets, createdBy: r.created_by });
    }
    const bound = await sql<{ id: string; doc: DeviceDoc }>`SELECT id, jsonb_build_object('connector', doc->'connector', 'devEui', doc->'devEui', 'networkDeviceId', doc->'networkDeviceId') AS doc
      FROM devices WHERE doc ?| array['connector', 'devEui', 'networkDeviceId']`.execute(db);
    for (const r of bound.rows) this.bindDevice(r.id, r.doc);
    for (const r of await db.selectFrom('apps').select(['id', 'secret_hash']).execute()) this.apps.set(r.id, { id: r.id, secretHash: r.secret_hash });
    for (const r of await db.selectFrom('credentials_sets').selectAll().execute()) {
      this.putSet({ id: r.id, username: r.username, passwordHash: r.password_hash, createdBy: r.created_by });
    }
    for (const r of await db.selectFrom('reserved_topics').selectAll().execute()) this.putTopic({ id: r.id, topic: r.topic, setId: r.credentials_set_id });
    const { rows } = await sql<{ id: string; secret: string }>`SELECT id, secret FROM devices WHERE secret IS NOT NULL`.execute(db);
    for (const r of rows) this.putSecret(r.id, r.secret);
    for (const r of await db.selectFrom('channels').selectAll().execute()) {
      this.putChannel({ id: r.id, protocol: r.protocol as Protocol, doc: r.doc, secrets: r.secrets, createdBy: r.created_by });
    }
    const members = await db.selectFrom('device_group_members').select(['group_id', 'device_id']).orderBy('group_id').orderBy('position').execute();
    const groups = new Map<string, string[]>();
    for (const m of members) groups.set(m.group_id, [...(groups.get(m.group_id) ?? []), m.device_id]);
    for (const [id, devices] of groups) this.setGroup(id, devices);
  }

  credentialsSet(id: string): CredentialsSetInfo | undefined {
    return this.sets.get(id);
  }

  credentialsSetByUsername(username: string): CredentialsSetInfo | undefined {
    const id = this.setByUsername.get(username);
    return id ? this.sets.get(id) : undefined;
  }

  app(id: string): AppInfo | undefined {
    return this.apps.get(id);
  }

  /** Called with an app's id once it is deleted or its secret replaced: its open logins are no longer valid. */
  onAppRevoked(listener: (appId: string) => void): () => void {
    this.appRevoked.add(listener);
    return () => this.appRevoked.delete(listener);
  }

  private revokeApp(id: string): void {
    for (const listener of this.appRevoked) listener(id);
  }

  /**
   * Called with a user's id once they are deleted or disabled, or their
   * password is changed or reset: the logins they opened with an access token
   * issued before are no longer valid.
   */
  onUserRevoked(listener: (userId: string, why: UserRevocation) => void): () => void {
    this.userRevoked.add(listener);
    return () => this.userRevoked.delete(listener);
  }

  /**
   * Where in the log this node last revoked the user's logins (the latest of
   * the events above it has applied), or undefined. A login checked against
   * the users read model at a checkpoint before this position read the user
   * as they were before the revocation, and must not be let in.
   */
  userRevokedAt(userId: string): Position | undefined {
    return this.userRevocations.get(userId);
  }

  private revokeUser(id: string, why: UserRevocation, position: Position): void {
    if (this.userRevocations.size >= MAX_USER_REVOCATIONS && !this.userRevocations.has(id)) this.userRevocations.clear();
    this.userRevocations.set(id, position);
    for (const listener of this.userRevoked) listener(id, why);
  }

  reservedTopic(topic: string): ReservedTopicInfo | undefined {
    return this.topics.get(topic);
  }

  /** The nearest reserved topic at or above `topic`; one map lookup per level. */
  resolve(topic: string): Resolved | null {
    let cut = topic.length;
    for (;;) {
      const reserved = this.topics.get(cut === topic.length ? topic : topic.slice(0, cut));
      if (reserved) return { reserved, path: cut === topic.length ? [] : topic.slice(cut + 1).split('/') };
      cut = topic.lastIndexOf('/', cut - 1);
      if (cut <= 0) return null;
    }
  }

  deviceOfSecret(secret: string): string | undefined {
    return this.deviceBySecret.get(secret);
  }

  /** Records a device the ingest pipeline has just created, before the projection sees it. */
  putSecret(deviceId: string, secret: string): void {
    const old = this.secretByDevice.get(deviceId);
    if (old !== undefined && this.deviceBySecret.get(old) === deviceId) this.deviceBySecret.delete(old);
    this.deviceBySecret.set(secret, deviceId);
    this.secretByDevice.set(deviceId, secret);
  }

  forgetSecret(deviceId: string): void {
    const old = this.secretByDevice.get(deviceId);
    if (old !== undefined && this.deviceBySecret.get(old) === deviceId) this.deviceBySecret.delete(old);
    this.secretByDevice.delete(deviceId);
  }

  connector(id: string): ConnectorInfo | undefined {
    return this.connectors.get(id);
  }

  /**
   * The device a connector's network server names by this DevEUI (lower case), by its own device id, or by
   * the device's `secret`: only a device bound to this connector, never another connector's.
   */
  deviceOfNetwork(connectorId: string, ref: { devEui?: string | null; networkDeviceId?: string | null; secret?: string | null }): string | undefined {
    if (ref.secret) {
      const id = this.deviceBySecret.get(ref.secret);
      return id !== undefined && this.bindings.get(id)?.connector === connectorId ? id : undefined;
    }
    return (ref.devEui ? this.byNetworkKey.get(deviceKey(connectorId, 'eui', ref.devEui)) : undefined) ?? (ref.networkDeviceId ? this.byNetworkKey.get(deviceKey(connectorId, 'id', ref.networkDeviceId)) : undefined);
  }

  /** Indexes a device by its connector and network names; called with the device's fields after every change of them. */
  bindDevice(deviceId: string, doc: DeviceDoc): void {
    const keysOf = (d: DeviceDoc | undefined): string[] => {
      if (!d || typeof d.connector !== 'string') return [];
      return [
        ...(typeof d.devEui === 'string' ? [deviceKey(d.connector, 'eui', d.devEui)] : []),
        ...(typeof d.networkDeviceId === 'string' ? [deviceKey(d.connector, 'id', d.networkDeviceId)] : []),
      ];
    };
    for (const key of keysOf(this.bindings.get(deviceId))) if (this.byNetworkKey.get(key) === deviceId) this.byNetworkKey.delete(key);
    const binding: DeviceDoc = {};
    for (const k of ['connector', 'devEui', 'networkDeviceId']) if (typeof doc[k] === 'string') binding[k] = doc[k];
    if (Object.keys(binding).length) this.bindings.set(deviceId, binding);
    else this.bindings.delete(deviceId);
    for (const key of keysOf(binding)) this.byNetworkKey.set(key, deviceId);
  }

  /** A device's connector and network names, as bound. */
  bindingOf(deviceId: string): DeviceDoc {
    return { ...this.bindings.get(deviceId) };
  }

  /** The channels that cover a device: its own and those of its groups. */
  channelsOf(deviceId: string): readonly ChannelInfo[] {
    const seen = this.channelsSeen.get(deviceId);
    if (seen) return seen;
    const ids = new Set(this.channelsByDevice.get(deviceId));
    for (const group of this.groupsByDevice.get(deviceId) ?? []) for (const c of this.channelsByGroup.get(group) ?? []) ids.add(c);
    const found = [...ids].map((id) => this.channels.get(id)!).filter(Boolean);
    // Bounded by the devices that report; a change of any channel or group starts it over.
    if (this.channelsSeen.size >= MAX_CHANNELS_SEEN) this.channelsSeen.clear();
    this.channelsSeen.set(deviceId, found);
    return found;
  }

  private putSet(set: CredentialsSetInfo): void {
    this.sets.set(set.id, set);
    this.setByUsername.set(set.username, set.id);
  }

  private putTopic(t: ReservedTopicInfo): void {
    this.topics.set(t.topic, t);
    this.topicById.set(t.id, t.topic);
  }

  private putChannel(c: ChannelInfo): void {
    this.channelsSeen.clear();
    this.channels.set(c.id, c);
    if (c.doc.iotnode) addTo(this.channelsByDevice, c.doc.iotnode, c.id);
    if (c.doc.deviceGroup) addTo(this.channelsByGroup, c.doc.deviceGroup, c.id);
  }

  private dropChannel(id: string): void {
    const c = this.channels.get(id);
    if (!c) return;
    this.channelsSeen.clear();
    this.channels.delete(id);
    if (c.doc.iotnode) removeFrom(this.channelsByDevice, c.doc.iotnode, id);
    if (c.doc.deviceGroup) removeFrom(this.channelsByGroup, c.doc.deviceGroup, id);
  }

  private setGroup(id: string, devices: string[] | null): void {
    this.channelsSeen.clear();
    for (const d of this.groupMembers.get(id) ?? []) removeFrom(this.groupsByDevice, d, id);
    if (devices === null) {
      this.groupMembers.delete(id);
      return;
    }
    this.groupMembers.set(id, devices);
    for (const d of devices) addTo(this.groupsByDevice, d, id);
  }

  /** Keeps the registry current; applied by the projection runner in global order. Every step is idempotent. */
  readonly projection: Projection = {
    name: 'ingest-registry',
    tables: [],
    // Open logins of an app end once its deletion or new secret is stored, never before; so do a user's once they are
    // deleted or disabled or their password changes. On every node of a cluster, each following the log for itself.
    committed: (batch: RecordedEvent[]) => {
      for (const e of batch) {
        if (e.type === 'AppSecretRotated' || e.type === 'AppDeleted') this.revokeApp((e.data as { id: string }).id);
        const why = revocationOf(e);
        if (why) this.revokeUser((e.data as { id: string }).id, why, e.position);
      }
    },
    apply: async (_tx, batch: RecordedEvent[]) => {
      for (const e of batch as (RecordedEvent & RegistryEvent)[]) {
        switch (e.type) {
          case 'CredentialsSetCreated':
            this.putSet({ id: e.data.id, username: e.data.username, passwordHash: e.data.passwordHash, createdBy: e.data.createdBy });
            break;
          case 'CredentialsSetDeleted': {
            const set = this.sets.get(e.data.id);
            if (set && this.setByUsername.get(set.username) === set.id) this.setByUsername.delete(set.username);
            this.sets.delete(e.data.id);
            for (const [topic, t] of this.topics) {
              if (t.setId !== e.data.id) continue;
              this.topics.delete(topic);
              this.topicById.delete(t.id);
            }
            break;
          }
          case 'ReservedTopicCreated':
            this.putTopic({ id: e.data.id, topic: e.data.topic, setId: e.data.basicCredentialsSetId });
            break;
          case 'ReservedTopicDeleted': {
            const topic = this.topicById.get(e.data.id);
            if (topic !== undefined && this.topics.get(topic)?.id === e.data.id) this.topics.delete(topic);
            this.topicById.delete(e.data.id);
            break;
          }
          case 'DeviceRegistered':
            if (typeof e.data.doc.secret === 'string') this.putSecret(e.data.id, e.data.doc.secret);
            if (e.data.doc.connector !== undefined || e.data.doc.devEui !== undefined || e.data.doc.networkDeviceId !== undefined) this.bindDevice(e.data.id, e.data.doc);
            break;
          case 'DeviceUpdated': {
            if (typeof e.data.set.secret === 'string') this.putSecret(e.data.id, e.data.set.secret);
            else if (e.data.unset.includes('secret')) this.forgetSecret(e.data.id);
            const binding = ['connector', 'devEui', 'networkDeviceId'];
            if (binding.some((k) => k in e.data.set || e.data.unset.includes(k))) {
              const before = this.bindingOf(e.data.id);
              const after: DeviceDoc = { ...before, ...Object.fromEntries(binding.filter((k) => k in e.data.set).map((k) => [k, e.data.set[k]])) };
              for (const k of e.data.unset) delete after[k];
              this.bindDevice(e.data.id, after);
            }
            break;
          }
          case 'DeviceDeleted':
            this.forgetSecret(e.data.id);
            this.bindDevice(e.data.id, {});
            break;
          case 'ConnectorCreated':
            this.connectors.set(e.data.id, { id: e.data.id, integration: String(e.data.doc.integration), doc: e.data.doc, secrets: e.data.secrets, createdBy: e.data.createdBy });
            break;
          case 'ConnectorDeleted':
            this.connectors.delete(e.data.id);
            break;
          case 'ChannelCreated':
            this.putChannel({ id: e.data.id, protocol: e.data.protocol, doc: e.data.doc, secrets: e.data.secrets, createdBy: e.data.createdBy });
            break;
          case 'ChannelReplaced': {
            // The target stays, so the indexes by device and group do too.
            const c = this.channels.get(e.data.id);
            if (c) this.putChannel({ ...c, doc: e.data.doc, secrets: e.data.secrets });
            break;
          }
          case 'ChannelDeleted':
            this.dropChannel(e.data.id);
            break;
          case 'DeviceGroupCreated':
            this.setGroup(e.data.id, e.data.devices);
            break;
          case 'DeviceGroupUpdated':
            if (e.data.devices) this.setGroup(e.data.id, e.data.devices);
            break;
          case 'DeviceGroupDeleted':
            this.setGroup(e.data.id, null);
            break;
          case 'AppCreated':
            this.apps.set(e.data.id, { id: e.data.id, secretHash: e.data.secretHash });
            break;
          case 'AppSecretRotated':
            this.apps.set(e.data.id, { id: e.data.id, secretHash: e.data.secretHash });
            break;
          case 'AppDeleted':
            this.apps.delete(e.data.id);
            break;
        }
      }
    },
  };
}
