import type { Transaction } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import { userDecider, type Profile, type UserEvent, type UserState } from '../domain/users/user.js';
import { usernameKey } from '../domain/users/username.js';
import type { Database } from './database.js';
import type { Projection } from './runner.js';

export interface UsersTable {
  id: string;
  username: string;
  /** `usernameKey(username)`: unique, as the username's claim is. */
  username_key: string;
  profile: Profile;
  password_hash: string;
  /** The number of the user's password changes and resets; access tokens of another version are refused. */
  token_version: number;
  /** The stream revision applied last; guards against applying an event twice. */
  revision: number;
  created_at: Date;
  updated_at: Date;
}

export interface UsersTables {
  users: UsersTable;
}

const USER_EVENTS = new Set<string>(['UserCreated', 'UserUpdated', 'PasswordChanged', 'PasswordReset', 'UserJoinedOrganization', 'UserLeftOrganization', 'UserDeleted']);

/** Users, folded with the same `evolve` the write side uses, so both agree on every field. */
export const usersProjection: Projection = {
  name: 'users',
  tables: ['users'],
  async apply(tx: Transaction<Database>, batch: RecordedEvent[]) {
    for (const event of batch) {
      if (!USER_EVENTS.has(event.type)) continue;
      await applyUserEvent(tx, event as RecordedEvent & UserEvent);
    }
  },
};

async function applyUserEvent(tx: Transaction<Database>, event: RecordedEvent & UserEvent): Promise<void> {
  const id = event.data.id;
  const at = new Date(event.data.at);
  if (event.type === 'UserCreated') {
    await tx
      .insertInto('users')
      .values({
        id,
        username: event.data.profile.username,
        username_key: usernameKey(event.data.profile.username),
        profile: JSON.stringify(event.data.profile) as unknown as Profile,
        password_hash: event.data.passwordHash,
        token_version: 0,
        revision: event.revision,
        created_at: at,
        updated_at: at,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    return;
  }
  const row = await tx.selectFrom('users').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
  if (!row || row.revision >= event.revision) return;
  if (event.type === 'UserDeleted') {
    await tx.deleteFrom('users').where('id', '=', id).execute();
    return;
  }
  const before: UserState = { status: 'active', id, profile: row.profile, passwordHash: row.password_hash, tokenVersion: row.token_version };
  const after = userDecider.evolve(before, event);
  if (after.status !== 'active') return;
  await tx
    .updateTable('users')
    .set({
      profile: JSON.stringify(after.profile) as unknown as Profile,
      password_hash: after.passwordHash,
      token_version: after.tokenVersion,
      revision: event.revision,
      updated_at: at,
    })
    .where('id', '=', id)
    .execute();
}

