import { createHash } from 'node:crypto';
import type { RecordedEvent } from '../shared/events.js';
import type { LogEvent } from './logEntry.js';
import type { UsergroupEvent } from '../usergroups/usergroup.js';
import type { OrganizationEvent } from '../organizations/organization.js';
import { isUserStream, type UserEvent } from '../users/user.js';

type Entry = LogEvent['data'];

/**
 * The log entries that events on usergroups and organization units imply:
 * what a group's or a unit's owner should be able to read about it later
 * (members added and removed, the owner or the app filter changed, a unit
 * moved, a member's password reset by the unit). Each entry is derived from
 * its event alone, with an id derived from the event's, so it is stored with
 * the change or not at all, and a rebuild writes exactly the same entries.
 *
 * resourceType `userGroup` and `organization` are the logs widget's names.
 */
export function impliedEntries(event: RecordedEvent): Entry[] {
  if (event.streamId.startsWith('usergroup-')) return groupEntries(event as RecordedEvent & UsergroupEvent);
  if (event.streamId.startsWith('organization-')) return unitEntries(event as RecordedEvent & OrganizationEvent);
  if (isUserStream(event.streamId)) return memberEntries(event as RecordedEvent & UserEvent);
  return [];
}

/** The entry id: the event's own for the first entry of an event, a UUID derived from it for a further one. */
const entryId = (event: RecordedEvent, n: number) => {
  if (n === 0) return event.id;
  const h = createHash('sha1').update(`${event.id}:${n}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${h.slice(18, 20)}-${h.slice(20, 32)}`;
};

function entry(event: RecordedEvent, n: number, fields: Omit<Entry, 'id' | 'at' | 'type'> & { type?: Entry['type'] }): Entry {
  return { id: entryId(event, n), type: 'info', ...fields, at: (event.data as { at: string }).at };
}

const who = (userId: string, username: string | undefined) => (username ? `${username} (${userId})` : userId);

function groupEntries(e: RecordedEvent & UsergroupEvent): Entry[] {
  const on = { resourceId: e.data.id, resourceType: 'userGroup' };
  switch (e.type) {
    case 'UsergroupCreated':
      return [entry(e, 0, { ...on, priority: 'low', category: 'update', message: `Group ${e.data.name} created`, data: { owner: e.data.owner } })];
    case 'UsergroupUpdated': {
      const out: Entry[] = [];
      if (e.data.changes.name !== undefined) out.push(entry(e, out.length, { ...on, priority: 'low', category: 'update', message: `Renamed to ${e.data.changes.name}` }));
      if (e.data.changes.owner !== undefined) {
        out.push(entry(e, out.length, { ...on, priority: 'medium', category: 'access', message: `Owner changed to ${who(e.data.changes.owner, e.data.ownerUsername)}`, data: { owner: e.data.changes.owner } }));
      }
      return out;
    }
    case 'UsergroupMemberAdded':
      return [entry(e, 0, { ...on, priority: 'medium', category: 'access', message: `Member ${who(e.data.userId, e.data.username)} added`, data: { userId: e.data.userId } })];
    case 'UsergroupMemberRemoved':
      return [entry(e, 0, { ...on, priority: 'medium', category: 'access', message: `Member ${who(e.data.userId, e.data.username)} removed`, data: { userId: e.data.userId } })];
    case 'UsergroupAppFilterSet': {
      const n = e.data.appIds.length;
      const message = n === 0 ? 'App filter set: members see no app' : `App filter set: members see only ${n === 1 ? 'one app' : `${n} apps`}`;
      return [entry(e, 0, { ...on, priority: 'medium', category: 'access', message, data: { appIds: e.data.appIds } })];
    }
    case 'UsergroupAppAllowed':
      return [entry(e, 0, { ...on, priority: 'low', category: 'access', message: `App ${e.data.appId} allowed by the app filter`, data: { appId: e.data.appId } })];
    case 'UsergroupAppDisallowed':
      return [entry(e, 0, { ...on, priority: 'low', category: 'access', message: `App ${e.data.appId} removed from the app filter`, data: { appId: e.data.appId } })];
    case 'UsergroupAppFilterRemoved':
      return [entry(e, 0, { ...on, priority: 'medium', category: 'access', message: 'App filter removed: members see every app they have rights on' })];
    case 'UsergroupDeleted':
      // Nobody can read a deleted group's log.
      return [];
    default: {
      const _: never = e;
      return _;
    }
  }
}

function unitEntries(e: RecordedEvent & OrganizationEvent): Entry[] {
  const on = { resourceId: e.data.id, resourceType: 'organization' };
  switch (e.type) {
    case 'OrganizationCreated': {
      const out = [entry(e, 0, { ...on, priority: 'low', category: 'update', message: `Unit ${e.data.name} created${e.data.parent ? ` below ${e.data.parent.name}` : ''}` })];
      if (e.data.parent) {
        out.push(entry(e, 1, { resourceId: e.data.parent.id, resourceType: 'organization', priority: 'low', category: 'update', message: `Sub-unit ${e.data.name} created`, data: { unitId: e.data.id } }));
      }
      return out;
    }
    case 'OrganizationUpdated':
      if (e.data.moved) {
        // Moving a unit changes who holds the rights given to the units above it.
        const where = e.data.parent ? `below ${e.data.parent.name}` : 'to the top of the tree';
        return [entry(e, 0, { ...on, priority: 'high', category: 'access', message: `Moved ${where}`, data: { parentId: e.data.parent?.id ?? null } })];
      }
      return [entry(e, 0, { ...on, priority: 'low', category: 'update', message: 'Description changed' })];
    case 'OrganizationDeleted':
      return [];
    default: {
      const _: never = e;
      return _;
    }
  }
}

function memberEntries(e: RecordedEvent & UserEvent): Entry[] {
  const unit = (id: string) => ({ resourceId: id, resourceType: 'organization' });
  switch (e.type) {
    case 'UserCreated':
      if (!e.data.organization) return [];
      return [entry(e, 0, { ...unit(e.data.organization.id), priority: 'medium', category: 'access', message: `Member ${who(e.data.id, e.data.profile.username)} created`, data: { userId: e.data.id } })];
    case 'UserJoinedOrganization':
      return [entry(e, 0, { ...unit(e.data.organization.id), priority: 'medium', category: 'access', message: `Member ${who(e.data.id, e.data.username)} added`, data: { userId: e.data.id } })];
    case 'UserLeftOrganization':
      return [entry(e, 0, { ...unit(e.data.organization.id), priority: 'medium', category: 'access', message: `Member ${who(e.data.id, e.data.username)} removed`, data: { userId: e.data.id } })];
    case 'PasswordReset':
      if (!e.data.organization) return [];
      return [entry(e, 0, { ...unit(e.data.organization.id), priority: 'high', category: 'access', message: `Password of member ${who(e.data.id, e.data.username)} reset`, data: { userId: e.data.id } })];
    case 'UserUpdated':
    case 'PasswordChanged':
    case 'UserDeleted':
      return [];
    default: {
      const _: never = e;
      return [];
    }
  }
}
