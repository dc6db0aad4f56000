import { suite } from 'uvu';
import { organizationDecider, type OrganizationEvent } from '../../domain/organizations/organization.js';
import { userDecider, type UserEvent } from '../../domain/users/user.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const id = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const top = { id: 'bbbbbbbbbbbbbbbbbbbbbbbb', name: 'Acme' };
const other = { id: 'cccccccccccccccccccccccc', name: 'Globex' };
const creator = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const at = '2026-01-01T00:00:00.000Z';
const created: OrganizationEvent = { type: 'OrganizationCreated', data: { id, name: 'Acme Sales', description: 'Sellers', parent: top, createdBy: creator, at } };
const unit = (events: OrganizationEvent[]) => deciderSpec(organizationDecider).given(events);

const test = suite('organizations decider');

test('given nothing, when a unit is created below a parent, then OrganizationCreated names both', () => {
  unit([]).when({ type: 'CreateOrganization', id, name: 'Acme Sales', description: 'Sellers', parent: top, createdBy: creator, at }).then([created]);
});

test('given nothing, when the name is empty or has spaces around it, or the parent is the unit itself, then 422', () => {
  for (const name of ['', ' Acme', 'Acme ']) {
    unit([]).when({ type: 'CreateOrganization', id, name, parent: null, createdBy: creator, at }).thenThrows(ValidationError, /^ERR - name /);
  }
  unit([]).when({ type: 'CreateOrganization', id, name: 'Loop', parent: { id, name: 'Loop' }, createdBy: creator, at }).thenThrows(ValidationError, /^ERR - parent /);
  unit([created]).when({ type: 'CreateOrganization', id, name: 'Again', parent: null, createdBy: creator, at }).thenThrows(ConflictError);
});

test('given a unit, when it is sent again unchanged, then no event; with a new description, then an update that is no move', () => {
  unit([created]).when({ type: 'UpdateOrganization', id, name: 'Acme Sales', description: 'Sellers', parent: top, at }).then([]);
  unit([created])
    .when({ type: 'UpdateOrganization', id, name: 'Acme Sales', parent: top, at })
    .then([{ type: 'OrganizationUpdated', data: { id, name: 'Acme Sales', parent: top, moved: false, at } }]);
});

test('given a unit, when it gets another parent or none, then an update that is a move', () => {
  unit([created])
    .when({ type: 'UpdateOrganization', id, name: 'Acme Sales', description: 'Sellers', parent: other, at })
    .then([{ type: 'OrganizationUpdated', data: { id, name: 'Acme Sales', description: 'Sellers', parent: other, moved: true, at } }]);
  unit([created])
    .when({ type: 'UpdateOrganization', id, name: 'Acme Sales', description: 'Sellers', parent: null, at })
    .then([{ type: 'OrganizationUpdated', data: { id, name: 'Acme Sales', description: 'Sellers', parent: null, moved: true, at } }]);
});

test('given a unit, when its name would change or it would become its own parent, then 422', () => {
  unit([created]).when({ type: 'UpdateOrganization', id, name: 'Acme Selling', parent: top, at }).thenThrows(ValidationError, /^ERR - name cannot be changed/);
  unit([created]).when({ type: 'UpdateOrganization', id, name: 'Acme Sales', parent: { id, name: 'Acme Sales' }, at }).thenThrows(ValidationError, /^ERR - parent /);
});

test('given a unit, when it is deleted, then OrganizationDeleted carries its name (its rights go by name); then it is gone', () => {
  const deleted: OrganizationEvent = { type: 'OrganizationDeleted', data: { id, name: 'Acme Sales', at } };
  unit([created]).when({ type: 'DeleteOrganization', id, at }).then([deleted]);
  unit([created, deleted]).when({ type: 'DeleteOrganization', id, at }).thenThrows(NotFoundError, 'Organization not found');
  unit([created, deleted]).when({ type: 'UpdateOrganization', id, name: 'Acme Sales', parent: null, at }).thenThrows(NotFoundError);
});

// ---- membership, on the user's stream ----
const userId = '0b7c5a1e-2d3f-4a5b-8c6d-7e8f9a0b1c2d';
const profile = { username: 'mia', enabled: true, requiredActions: [], attributes: { organization: ['Acme'] } };
const userCreated: UserEvent = { type: 'UserCreated', data: { id: userId, profile, passwordHash: 'h', at } };
const user = (events: UserEvent[]) => deciderSpec(userDecider).given(events);
const sales = { id, name: 'Acme Sales' };

test('given nothing, when a unit creates a member, then UserCreated names the unit; a profile outside the unit is refused', () => {
  user([])
    .when({ type: 'CreateUser', id: userId, profile, passwordHash: 'h', temporaryPassword: false, organization: top, at })
    .then([{ type: 'UserCreated', data: { id: userId, profile, passwordHash: 'h', organization: top, at } }]);
  user([]).when({ type: 'CreateUser', id: userId, profile, passwordHash: 'h', temporaryPassword: false, organization: sales, at }).thenThrows(ValidationError, /attributes\.organization/);
});

test('given a user, when they join a unit, then UserJoinedOrganization with the username; joining again changes nothing', () => {
  const joined: UserEvent = { type: 'UserJoinedOrganization', data: { id: userId, username: 'mia', organization: sales, at } };
  user([userCreated]).when({ type: 'JoinOrganization', id: userId, organization: sales, at }).then([joined]);
  const state = user([userCreated, joined]).state;
  if (state.status !== 'active') throw new Error('active');
  if (JSON.stringify(state.profile.attributes.organization) !== JSON.stringify(['Acme', 'Acme Sales'])) throw new Error(`organization is ${JSON.stringify(state.profile.attributes.organization)}`);
  user([userCreated, joined]).when({ type: 'JoinOrganization', id: userId, organization: sales, at }).then([]);
});

test('given a member, when they leave, then UserLeftOrganization; a non-member leaving or reset by the unit is not found', () => {
  user([userCreated])
    .when({ type: 'LeaveOrganization', id: userId, organization: top, at })
    .then([{ type: 'UserLeftOrganization', data: { id: userId, username: 'mia', organization: top, at } }]);
  user([userCreated]).when({ type: 'LeaveOrganization', id: userId, organization: sales, at }).thenThrows(NotFoundError, 'Member not found');
  user([userCreated]).when({ type: 'ResetPassword', id: userId, passwordHash: 'h2', organization: sales, at }).thenThrows(NotFoundError, 'Member not found');
  user([]).when({ type: 'JoinOrganization', id: userId, organization: sales, at }).thenThrows(NotFoundError, 'User not found');
});

test('given a member, when the unit resets the password, then PasswordReset names the unit and the username', () => {
  user([userCreated])
    .when({ type: 'ResetPassword', id: userId, passwordHash: 'h2', organization: top, at })
    .then([{ type: 'PasswordReset', data: { id: userId, passwordHash: 'h2', organization: top, username: 'mia', at } }]);
});

test.run();
