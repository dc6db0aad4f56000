import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { userDecider, UPDATE_PASSWORD, type UserEvent } from '../../domain/users/user.js';
import { usernameDecider, usernameStream, type UsernameEvent } from '../../domain/users/username.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const given = (events: UserEvent[]) => deciderSpec(userDecider).given(events);

const id = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const at = '2026-01-01T00:00:00.000Z';
const profile = { username: 'ada', enabled: true, requiredActions: [], attributes: { roles: ['editor'], language: 'en' } };
const created: UserEvent = { type: 'UserCreated', data: { id, profile: { ...profile, requiredActions: [UPDATE_PASSWORD] }, passwordHash: 'h1', at } };

const users = suite('users decider');

users('given no user, when it is created with a temporary password, then UserCreated requires UPDATE_PASSWORD', () => {
  given([]).when({ type: 'CreateUser', id, profile, passwordHash: 'h1', temporaryPassword: true, at }).then([created]);
});

users('given no user, when it is created with its own password, then no action is required', () => {
  given([])
    .when({ type: 'CreateUser', id, profile, passwordHash: 'h1', temporaryPassword: false, at })
    .then([{ type: 'UserCreated', data: { id, profile, passwordHash: 'h1', at } }]);
});

users('given a user, when it is created again, then a conflict', () => {
  given([created]).when({ type: 'CreateUser', id, profile, passwordHash: 'h2', temporaryPassword: true, at }).thenThrows(ConflictError);
});

users('given a user, when a change names the username, then it is refused', () => {
  const changes = { username: 'eve' } as never;
  given([created]).when({ type: 'UpdateUser', id, changes, at }).thenThrows(ValidationError, /^ERR - username cannot be changed$/);
});

users('given a user, when an empty change arrives, then no event', () => {
  given([created]).when({ type: 'UpdateUser', id, changes: {}, at }).then([]);
});

users('given a user, when one attribute changes, then the others stay', () => {
  const updated: UserEvent = { type: 'UserUpdated', data: { id, changes: { attributes: { language: 'de' } }, at } };
  given([created]).when({ type: 'UpdateUser', id, changes: { attributes: { language: 'de' } }, at }).then([updated]);
  const { state } = given([created, updated]);
  assert.equal(state.status === 'active' && state.profile.attributes, { roles: ['editor'], language: 'de' });
});

users('given a user with a temporary password, when the user sets one, then UPDATE_PASSWORD is cleared', () => {
  const changed: UserEvent = { type: 'PasswordChanged', data: { id, passwordHash: 'h2', at } };
  given([created]).when({ type: 'ChangePassword', id, passwordHash: 'h2', at }).then([changed]);
  const { state } = given([created, changed]);
  assert.equal(state.status === 'active' && [state.passwordHash, state.profile.requiredActions], ['h2', []]);
});

users('given a user who set a password, when an admin resets it, then UPDATE_PASSWORD is required again, once', () => {
  const reset: UserEvent = { type: 'PasswordReset', data: { id, passwordHash: 'h3', at } };
  given([created]).when({ type: 'ResetPassword', id, passwordHash: 'h3', at }).then([reset]);
  const { state } = given([created, { type: 'PasswordChanged', data: { id, passwordHash: 'h2', at } }, reset, reset]);
  assert.equal(state.status === 'active' && state.profile.requiredActions, [UPDATE_PASSWORD]);
});

users('given a deleted user, when anything but creation arrives, then the user is not found', () => {
  const deleted: UserEvent = { type: 'UserDeleted', data: { id, at } };
  given([created]).when({ type: 'DeleteUser', id, at }).then([deleted]);
  given([created, deleted]).when({ type: 'UpdateUser', id, changes: { firstName: 'A' }, at }).thenThrows(NotFoundError);
  given([created, deleted]).when({ type: 'DeleteUser', id, at }).thenThrows(NotFoundError);
  given([]).when({ type: 'ResetPassword', id, passwordHash: 'h', at }).thenThrows(NotFoundError);
});

const claimed: UsernameEvent = { type: 'UsernameClaimed', data: { username: 'ada', userId: 'u1' } };
const released: UsernameEvent = { type: 'UsernameReleased', data: { username: 'ada', userId: 'u1' } };
const names = (events: UsernameEvent[]) => deciderSpec(usernameDecider).given(events);

users('given a claimed username, when another user claims it in another case, then a conflict: the case folds into one stream', () => {
  assert.is(usernameStream('ADA'), usernameStream('ada'));
  names([claimed]).when({ type: 'Claim', username: 'ADA', userId: 'u2' }).thenThrows(ConflictError, 'ERR - username ADA is taken');
});

users('given a claimed username, when its holder claims it again, then no event', () => {
  names([claimed]).when({ type: 'Claim', username: 'ada', userId: 'u1' }).then([]);
});

users('given a claimed username, when another user releases it, then no event: only the holder releases', () => {
  names([claimed]).when({ type: 'Release', username: 'ada', userId: 'u2' }).then([]);
  names([claimed]).when({ type: 'Release', username: 'ada', userId: 'u1' }).then([released]);
});

users('given a released username, when another user claims it, then UsernameClaimed for that user', () => {
  names([claimed, released]).when({ type: 'Claim', username: 'ADA', userId: 'u2' }).then([{ type: 'UsernameClaimed', data: { username: 'ADA', userId: 'u2' } }]);
  names([claimed, released]).when({ type: 'Release', username: 'ada', userId: 'u1' }).then([]);
});

users.run();
