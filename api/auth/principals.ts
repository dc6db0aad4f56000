import type { Kysely } from 'kysely';
import type { Database } from '../../projections/database.js';
import type { Projection } from '../../projections/runner.js';
import type { Principal } from './principal.js';

/** Events that change who a user is to the role check: existence, enabled, username, roles. */
const USER_EVENTS = new Set(['UserCreated', 'UserUpdated', 'UserDeleted']);

/**
 * Enabled users as principals, read from the `users` read model and kept in
 * memory, since every authenticated request needs one. The cache empties when
 * a batch with user events has committed, before the write that caused it is
 * answered, so a disabled or deleted user is refused from the next request on.
 * A read that raced with such a commit is not kept.
 */
export class Principals {
  private cache = new Map<string, Principal | null>();
  private generation = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly capacity = 10_000,
  ) {}

  /** The enabled user with this id, or null (unknown, deleted or disabled). */
  async get(id: string): Promise<Principal | null> {
    const cached = this.cache.get(id);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const user = await this.db.selectFrom('users').select(['id', 'username', 'profile']).where('id', '=', id).executeTakeFirst();
    const principal = user && user.profile.enabled ? { id: user.id, username: user.username, roles: user.profile.attributes.roles ?? [] } : null;
    if (generation === this.generation) {
      if (this.cache.size >= this.capacity) this.cache.clear();
      this.cache.set(id, principal);
    }
    return principal;
  }

  readonly projection: Projection = {
    name: 'principals',
    tables: [],
    apply: async () => {},
    committed: (batch) => {
      if (!batch.some((e) => USER_EVENTS.has(e.type))) return;
      this.generation++;
      this.cache.clear();
    },
  };
}
