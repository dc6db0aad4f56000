import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Decider } from '../../domain/shared/decider.js';
import type { DomainEvent } from '../../domain/shared/events.js';
import { accessDecider } from '../../domain/access/rights.js';
import { roleDecider } from '../../domain/access/customRoles.js';
import { usergroupDecider, type UsergroupEvent } from '../../domain/usergroups/usergroup.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

/** Given events, when a command: the events decided, or the error thrown (the shared decider spec, as a value). */
function given<C, S, E extends DomainEvent>(decider: Decider<C, S, E>, events: E[]) {
  const spec = deciderSpec(decider).given(events);
  return {
    when(command: C): E[] | Error {
      try {
        return spec.when(command).events();
      } catch (error) {
        return error as Error;
      }
    },
  };
}

const at = '2026-01-01T00:00:00.000Z';
const group = '0123456789abcdef01234567';
const user = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const deciders = suite('access, role and usergroup deciders');

deciders('given nothing, when a usergroup is created, then its creator owns it and it has no members', () => {
  assert.equal(given(usergroupDecider, []).when({ type: 'CreateUsergroup', id: group, name: 'team', createdBy: user, at }), [
    { type: 'UsergroupCreated', data: { id: group, name: 'team', owner: user, createdBy: user, at } },
  ]);
});

deciders('given a group with a member, when the member is added again, then no event; when a stranger is removed, then not found', () => {
  const history: UsergroupEvent[] = [
    { type: 'UsergroupCreated', data: { id: group, name: 'team', owner: user, createdBy: user, at } },
    { type: 'UsergroupMemberAdded', data: { id: group, userId: user, at } },
  ];
  assert.equal(given(usergroupDecider, history).when({ type: 'AddMember', id: group, userId: user, at }), []);
  assert.instance(given(usergroupDecider, history).when({ type: 'RemoveMember', id: group, userId: 'someone-else', at }), NotFoundError);
  const removed: UsergroupEvent = { type: 'UsergroupMemberRemoved', data: { id: group, userId: user, at } };
  assert.equal(given(usergroupDecider, history).when({ type: 'RemoveMember', id: group, userId: user, at }), [removed]);
  assert.instance(given(usergroupDecider, [...history, { type: 'UsergroupDeleted', data: { id: group, at } }]).when({ type: 'AddMember', id: group, userId: user, at }), NotFoundError);
});

deciders('when access is granted, then singleton becomes user, the scope is deduplicated in a fixed order, and swapped id kinds are refused', () => {
  const base = { resourceType: 'dashboard', resourceId: group, at };
  assert.equal(given(accessDecider, []).when({ type: 'Grant', ...base, subjectType: 'singleton', subjectId: user.toUpperCase(), scope: ['read', 'admin', 'read'] }), [
    { type: 'AccessGranted', data: { ...base, subjectType: 'user', subjectId: user, scope: ['admin', 'read'] } },
  ]);
  assert.instance(given(accessDecider, []).when({ type: 'Grant', ...base, subjectType: 'singleton', subjectId: group, scope: ['read'] }), ValidationError);
  assert.instance(given(accessDecider, []).when({ type: 'Grant', ...base, subjectType: 'group', subjectId: user, scope: ['read'] }), ValidationError);
  assert.instance(given(accessDecider, []).when({ type: 'Grant', ...base, subjectType: 'group', subjectId: group, scope: [] }), ValidationError);
});

deciders('when access is revoked without a scope, then every scope is revoked', () => {
  const base = { resourceType: 'dashboard', resourceId: group, at };
  assert.equal(given(accessDecider, []).when({ type: 'Revoke', ...base, subjectType: 'orgUnit', subjectId: 'acme' }), [
    { type: 'AccessRevoked', data: { ...base, subjectType: 'orgUnit', subjectId: 'acme', scope: ['admin', 'write', 'read', 'peek'] } },
  ]);
});

deciders('when a custom role is named like a built-in in any case, then refused; created twice, a conflict; gone, not found', () => {
  assert.instance(given(roleDecider, []).when({ type: 'CreateRole', name: 'EDITOR', permissions: {}, at }), ValidationError);
  const created = { type: 'RoleCreated' as const, data: { name: 'keeper', permissions: {}, at } };
  assert.instance(given(roleDecider, [created]).when({ type: 'CreateRole', name: 'keeper', permissions: {}, at }), ConflictError);
  const deleted = { type: 'RoleDeleted' as const, data: { name: 'keeper', at } };
  assert.instance(given(roleDecider, [created, deleted]).when({ type: 'ReplaceRole', name: 'keeper', permissions: {}, at }), NotFoundError);
  assert.equal(given(roleDecider, [created, deleted]).when({ type: 'CreateRole', name: 'keeper', permissions: { log: ['GET'] }, at }), [
    { type: 'RoleCreated', data: { name: 'keeper', permissions: { log: ['GET'] }, at } },
  ]);
});

deciders.run();
