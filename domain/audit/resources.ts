import type { RecordedEvent } from '../shared/events.js';
import { isResourceId } from '../shared/ids.js';
import { userStream } from '../users/user.js';
import { usernameStream } from '../users/username.js';
import { roleStream } from '../access/customRoles.js';
import { accessStream } from '../access/rights.js';
import { usergroupStream } from '../usergroups/usergroup.js';
import { dashboardStream } from '../dashboards/dashboard.js';
import { imageStream } from '../images/image.js';
import { deviceStream } from '../devices/device.js';
import { credentialsSetStream } from '../credentials/credentialsSet.js';
import { reservedTopicStream } from '../topics/reservedTopic.js';
import { connectorStream } from '../connectors/connector.js';
import { commandStream } from '../commands/command.js';
import { deviceGroupStream } from '../devicegroups/deviceGroup.js';
import { channelStream } from '../channels/channel.js';
import { logStream } from '../logs/logEntry.js';
import { translatorStream } from '../translators/translator.js';
import { geofenceStream } from '../geofences/geofence.js';
import { ruleStream } from '../rules/rule.js';
import { runStream } from '../rules/run.js';
import { locationStream } from '../locations/location.js';
import { organizationStream } from '../organizations/organization.js';
import { appStream } from '../apps/app.js';
import { calculationStream } from '../calculations/calculation.js';

/** The resource a stream's events are about: the type as access rights name it, and its id. */
export interface StreamResource {
  type: string;
  id: string;
}

type Rule = (suffix: string, first: RecordedEvent) => StreamResource | null;

const own = (type: string): Rule => (id) => ({ type, id });
/** Streams about another resource, whose events name its type (`resourceType`): its access rights, its log entries. */
const about: Rule = (id, first) => {
  const type = (first.data as { resourceType?: unknown }).resourceType;
  return typeof type === 'string' ? { type, id } : null;
};

/** Each stream id prefix (from the function that builds it), and how its first event names the resource. */
const RULES: [string, Rule][] = [
  // Longest prefixes first, so `translator-name-` is not taken for another `…-`.
  [translatorStream(''), own('translator')],
  [organizationStream(''), own('organization')],
  [reservedTopicStream(''), own('reservedTopic')],
  [credentialsSetStream(''), own('credentialsSet')],
  [deviceGroupStream(''), own('deviceGroup')],
  [usergroupStream(''), own('usergroup')],
  [dashboardStream(''), own('dashboard')],
  [connectorStream(''), own('connector')],
  [locationStream(''), own('location')],
  [geofenceStream(''), own('geofence')],
  [channelStream(''), own('channel')],
  [deviceStream(''), own('device')],
  [imageStream(''), own('image')],
  // Rules are `ruleV2` to access rights; a run is about its rule.
  [runStream(''), (_id, first) => {
    const ruleId = (first.data as { ruleId?: unknown }).ruleId;
    return typeof ruleId === 'string' ? { type: 'ruleV2', id: ruleId } : null;
  }],
  [ruleStream(''), own('ruleV2')],
  [userStream(''), own('user')],
  [roleStream(''), own('role')],
  [appStream(''), own('app')],
  [calculationStream(''), own('calculation')],
  [usernameStream(''), (_name, first) => {
    const userId = (first.data as { userId?: unknown }).userId;
    return typeof userId === 'string' ? { type: 'user', id: userId } : null;
  }],
  [accessStream(''), about],
  [logStream(''), about],
  // A command is about the device it is for, or its connector when it is for a connector.
  [commandStream(''), (_id, first) => {
    const { deviceId, connectorId } = first.data as { deviceId?: unknown; connectorId?: unknown };
    if (typeof deviceId === 'string') return { type: 'device', id: deviceId };
    return typeof connectorId === 'string' ? { type: 'connector', id: connectorId } : null;
  }],
];

/**
 * The resource a stream is about, from the stream's first event: the audit
 * log's visibility and its `resourceId`/`resourceType` filters follow it. A
 * stream no rule knows is about `<prefix>` `<id>` when its id ends in a
 * resource id (`rule-<id>`), so capabilities added later are covered by
 * their stream names; otherwise it is about no resource, and only admins see
 * its events.
 */
export function resourceOfStream(first: RecordedEvent): StreamResource | null {
  for (const [prefix, rule] of RULES) {
    if (first.streamId.startsWith(prefix)) return rule(first.streamId.slice(prefix.length), first);
  }
  const match = /^([a-z][a-zA-Z]*)-([0-9a-f]{24})$/.exec(first.streamId);
  return match && isResourceId(match[2]) ? { type: match[1]!, id: match[2]! } : null;
}
