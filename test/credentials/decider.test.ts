import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CREDENTIALS_NOT_FOUND, credentialsSetDecider, type CredentialsSetCommand, type CredentialsSetEvent } from '../../domain/credentials/credentialsSet.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const credentials = suite('credentials set decider');

const at = '2026-01-01T00:00:00.000Z';
const ID = 'dddddddddddddddddddddddd';
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const passwordHash = 'scrypt$16384$8$1$c2FsdA$aGFzaA';

const given = (events: CredentialsSetEvent[]) => deciderSpec(credentialsSetDecider).given(events);
const create = (username: string): CredentialsSetCommand => ({ type: 'CreateCredentialsSet', id: ID, username, passwordHash, createdBy: owner, at });
const created: CredentialsSetEvent = { type: 'CredentialsSetCreated', data: { id: ID, username: 'gateway-7', passwordHash, createdBy: owner, at } };
const deleted: CredentialsSetEvent = { type: 'CredentialsSetDeleted', data: { id: ID, at } };

credentials('given no set, when it is created, then CredentialsSetCreated keeps the username and the password only as its hash', () => {
  given([]).when(create('gateway-7')).then([created]);
  assert.equal(given([created]).state, { status: 'active', id: ID, username: 'gateway-7' });
});

credentials('given no set, when the username has the shape of a UUID in either case, then a validation error: that shape is a user login', () => {
  for (const username of [owner, owner.toUpperCase()]) {
    given([]).when(create(username)).thenThrows(ValidationError, 'ERR - username must not have the shape of a UUID');
  }
  given([]).when(create(`${owner}x`)).then([{ ...created, data: { ...created.data, username: `${owner}x` } }]);
});

credentials('given a set, live or deleted, when it is created again, then a conflict names it', () => {
  for (const events of [[created], [created, deleted]]) {
    given(events).when(create('gateway-8')).thenThrows(ConflictError, `Basic credentials set ${ID} already exists`);
  }
});

credentials('given a set, when it is deleted, then CredentialsSetDeleted; given none or a deleted one, then Basic credentials set not found', () => {
  given([created]).when({ type: 'DeleteCredentialsSet', id: ID, at }).then([deleted]);
  given([]).when({ type: 'DeleteCredentialsSet', id: ID, at }).thenThrows(NotFoundError, CREDENTIALS_NOT_FOUND);
  given([created, deleted]).when({ type: 'DeleteCredentialsSet', id: ID, at }).thenThrows(NotFoundError, CREDENTIALS_NOT_FOUND);
  assert.is(CREDENTIALS_NOT_FOUND, 'Basic credentials set not found');
});

credentials.run();
