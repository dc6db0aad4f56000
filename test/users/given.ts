import * as assert from 'uvu/assert';
import type { TestPlatform } from '../support/platform.js';

export interface GivenUser {
  id: string;
  username: string;
  password: string;
  token: string;
}

/** A user created by the admin through REST and logged in with its temporary password. */
export async function givenUser(t: TestPlatform, username: string, fields: Record<string, unknown> = {}): Promise<GivenUser> {
  const res = await t.call('POST', '/api/users', { body: { username, ...fields } });
  assert.is(res.status, 201, res.text);
  const password = res.body.temporaryPassword as string;
  return { id: res.body.id, username, password, token: await t.login(username, password) };
}

/** How many events the store holds; a refused request must not change it. */
export async function eventCount(t: TestPlatform): Promise<number> {
  let count = 0;
  let after = null;
  for (;;) {
    const batch = await t.platform.deps.store.readAll({ after, limit: 1000 });
    if (batch.length === 0) return count;
    count += batch.length;
    after = batch[batch.length - 1]!.position;
  }
}
