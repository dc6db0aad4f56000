/**
 * The rights reactors act with are cached until an event may change them: a
 * creation, deletion, claim, grant or revoke forgets the answers on its own
 * resource only; anything else (memberships, users, roles, the organization
 * tree) forgets every answer.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { OwnerRights } from '../../reactors/rights.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';

const rights = suite<{ t: TestPlatform }>('the rights reactors act with');

rights.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
rights.after(async (ctx) => {
  await ctx.t.stop();
});

let position = 1n;
const event = (type: string, data: Record<string, unknown>): RecordedEvent =>
  ({ id: crypto.randomUUID(), type, streamId: 'x', revision: 0, data, metadata: { time: new Date().toISOString(), actor: 'test', correlationId: 'test' }, position: { commit: position, prepare: position++ } }) as RecordedEvent;

rights('given a cached answer on a device, when other resources are created or lose a right, then it is kept; when its own device loses a right, or a user changes, it is asked again', async ({ t }) => {
  const user = await givenUser(t, 'owner-rights', { attributes: { roles: ['installer'] } });
  const device = (await t.call('POST', '/api/iotnodes', { token: user.token, body: { name: 'Kept' } })).body._id as string;
  const other = (await t.call('POST', '/api/iotnodes', { token: user.token, body: { name: 'Other' } })).body._id as string;
  const { db, principals } = t.platform.deps;
  const owner = (await principals.get(user.id))!;
  const cache = new OwnerRights(db, principals, null);
  assert.is(await cache.may(owner, device, 'read'), true);

  // The read model says otherwise from now on; only a lookup that is not cached sees it.
  await sql`UPDATE access_rights SET scope = '{}' WHERE resource_id = ${device}`.execute(db);
  assert.is(await cache.may(owner, device, 'read'), true, 'cached');

  await cache.follow([event('DeviceRegistered', { id: other }), event('AccessRevoked', { resourceId: other, resourceType: 'device', subjectType: 'user', subjectId: user.id, scope: ['read'] }), event('DashboardDeleted', { id: 'dash' })]);
  assert.is(await cache.may(owner, device, 'read'), true, 'changes on other resources keep the answer');

  await cache.follow([event('AccessRevoked', { resourceId: device, resourceType: 'device', subjectType: 'user', subjectId: user.id, scope: ['read'] })]);
  assert.is(await cache.may(owner, device, 'read'), false, 'a change on the device itself asks again');

  await sql`UPDATE access_rights SET scope = '{read,write,admin}' WHERE resource_id = ${device}`.execute(db);
  await cache.follow([event('UsergroupMemberAdded', { id: 'group', userId: user.id })]);
  assert.is(await cache.may(owner, device, 'read'), true, 'a membership may change anything: every answer is asked again');
});

rights.run();
