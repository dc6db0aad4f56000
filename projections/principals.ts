import type { Kysely } from 'kysely';
import type { Database } from './database.js';
import type { Projection } from './runner.js';
import type { Principal } from '../domain/access/principal.js';

/**
 * Events that change who a user is to the checks: existence, enabled,
 * username, roles, and the token version (password changed or reset).
 */
const USER_EVENTS = new Set(['UserCreated', 'UserUpdated', 'PasswordChanged', 'PasswordReset', 'UserDeleted']);

interface Entry {
  principal: Principal;
  /** `users.token_version`: the only version of access token accepted for the user. */
  tokenVersion: number;
}

/**
 * Enabled users as principals, read from the `users` read model and kept in
 * memory, since every authenticated request needs one. The cache empties when
 * a batch with user events has committed, before the write that caused it is
 * answered, so a disabled or deleted user, or a token issued before a password
 * change or reset, is refused from the next request on. A read that raced with
 * such a commit is not kept.
 */
export class Principals {
  private cache = new Map<string, Entry | null>();
  private generation = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly capacity = 10_000,
  ) {}

  /** The enabled user with this id, or null (unknown, deleted or disabled). */
  async get(id: string): Promise<Principal | null> {
    return (await this.entry(id))?.principal ?? null;
  }

  /**
   * The enabled user a token speaks for, or null: unknown, deleted, disabled,
   * or the token is of another version than the user's (issued before their
   * latest password change or reset).
   */
  async forToken(id: string, tokenVersion: number): Promise<Principal | null> {
    const entry = await this.entry(id);
    return entry && entry.tokenVersion === tokenVersion ? entry.principal : null;
  }

  private async entry(id: string): Promise<Entry | null> {
    const cached = this.cache.get(id);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const user = await this.db.selectFrom('users').select(['id', 'username', 'profile', 'token_version']).where('id', '=', id).executeTakeFirst();
    const entry = user && user.profile.enabled ? { principal: { id: user.id, username: user.username, roles: user.profile.attributes.roles ?? [] }, tokenVersion: user.token_version } : null;
    if (generation === this.generation) {
      if (this.cache.size >= this.capacity) this.cache.clear();
      this.cache.set(id, entry);
    }
    return entry;
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
