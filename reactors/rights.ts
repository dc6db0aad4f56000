import type { Kysely } from 'kysely';
import type { Database } from '../projections/database.js';
import type { Principal } from '../domain/access/principal.js';
import type { Principals } from '../projections/principals.js';
import { loadCustomRoles, scopesOfUser } from '../projections/access.js';
import { allowedMethods, type ResourceType } from '../domain/access/roles.js';
import { satisfies, type Need } from '../domain/access/scopes.js';
import { OWNED_RESOURCES } from '../domain/access/resources.js';
import type { Position, RecordedEvent } from '../domain/shared/events.js';

/**
 * Events after which a user's rights may differ: grants and revokes, group
 * memberships, organization memberships and the organization tree, users
 * (enabled, roles, deletion), custom roles, and every owned resource's
 * creation and deletion (the creator rule).
 */
export const RIGHTS_EVENTS: ReadonlySet<string> = new Set([
  'AccessGranted',
  'AccessRevoked',
  'UsergroupMemberAdded',
  'UsergroupMemberRemoved',
  'UsergroupDeleted',
  'UserCreated',
  'UserUpdated',
  'UserDeleted',
  'UserJoinedOrganization',
  'UserLeftOrganization',
  'OrganizationUpdated',
  'DeviceClaimed',
  'RoleCreated',
  'RoleReplaced',
  'RoleDeleted',
  ...OWNED_RESOURCES.flatMap((r) => [r.created, r.deleted]),
]);

/**
 * Events that change rights on one resource only, named by the event: its creation (its creator's rights) or
 * deletion (every right on it), a claim, a grant or a revoke. The others (memberships, users, roles, the
 * organization tree, a usergroup's or a unit's creation or deletion) may change anyone's rights on anything.
 */
const ONE_RESOURCE: ReadonlySet<string> = new Set([
  'AccessGranted',
  'AccessRevoked',
  'DeviceClaimed',
  ...OWNED_RESOURCES.filter((r) => r.resourceType !== 'usergroup' && r.resourceType !== 'organization').flatMap((r) => [r.created, r.deleted]),
]);

/** The resource whose rights an event of `ONE_RESOURCE` changes. */
const resourceOf = (e: RecordedEvent): string => {
  const data = e.data as { id?: string; resourceId?: string };
  return (e.type === 'AccessGranted' || e.type === 'AccessRevoked' ? data.resourceId : data.id) ?? '';
};

/** What a batch changed: every right (`all`), the rights on some resources only, or none. */
export type RightsChange = { all: true } | { all: false; resources: ReadonlySet<string> };

/** How long a batch that changes rights waits for the read models to hold the change before it is offered again. */
const WAIT_MS = 30_000;

/**
 * The rights of the users on whose behalf reactors act (a rule's or a
 * calculation's owner, a channel's creator, a geofence's creator), by the
 * rules the REST API enforces: the user must exist and be enabled
 * (`Principals`), the role check (`allowedMethods`, custom roles included)
 * and the object check (the access rights held directly, through usergroups
 * or organization units). Answers are cached until an event of
 * `RIGHTS_EVENTS` passes in the reactor's own order (`follow`); a lookup that
 * raced with such an event is not kept.
 */
export class OwnerRights {
  private scopes = new Map<string, boolean>();
  private roles = new Map<string, boolean>();
  /** Raised whenever the cache empties: callers keeping answers of their own compare it. */
  generation = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly principals: Principals,
    /** The read models: a batch that changes rights waits for them to hold the change before checking anything. */
    private readonly projections: { waitFor(position: Position, timeoutMs: number): Promise<void> } | null = null,
    private readonly capacity = 100_000,
  ) {}

  /**
   * Called with each batch before any right is checked for it: when the
   * batch holds an event that may change rights, waits for the read models
   * to hold it (when given the runner) and empties the cache.
   */
  async follow(batch: readonly RecordedEvent[]): Promise<RightsChange> {
    let last: Position | null = null;
    let all = false;
    const resources = new Set<string>();
    for (const e of batch) {
      if (!RIGHTS_EVENTS.has(e.type)) continue;
      last = e.position;
      if (ONE_RESOURCE.has(e.type)) resources.add(resourceOf(e));
      else all = true;
    }
    if (!last) return { all: false, resources };
    if (this.projections) await this.projections.waitFor(last, WAIT_MS);
    // Creations and deletions of anyone's resources pass all the time: they forget the answers on those resources
    // alone, not every answer, which would make every channel and calculation ask again, one query each.
    if (all) this.clear();
    else this.forget(resources);
    return all ? { all: true } : { all: false, resources };
  }

  /** Forgets the answers on these resources. */
  private forget(resources: ReadonlySet<string>): void {
    if (resources.size === 0) return;
    for (const key of this.scopes.keys()) if (resources.has(key.split('/')[1]!)) this.scopes.delete(key);
  }

  clear(): void {
    this.generation++;
    this.scopes.clear();
    this.roles.clear();
  }

  /** The enabled user with this id, or null (unknown, deleted or disabled). */
  owner(userId: string): Promise<Principal | null> {
    return this.principals.get(userId);
  }

  /** Whether the user holds `need` (or more) on the resource. */
  async may(owner: Principal, resourceId: string, need: Need): Promise<boolean> {
    // User ids are UUIDs and resource ids have no slash: the resource is the key's second part (`forget`).
    const key = `${owner.id}/${resourceId}/${need}`;
    const cached = this.scopes.get(key);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const held = satisfies((await scopesOfUser(this.db, owner.id, [resourceId])).get(resourceId) ?? [], need);
    this.keep(this.scopes, generation, key, held);
    return held;
  }

  /** Whether the user's roles allow `method` on the resource type (the REST API's method check). */
  async roleAllows(owner: Principal, resourceType: ResourceType, method: string): Promise<boolean> {
    const key = `${owner.roles.join('\u0000')}/${resourceType}/${method}`;
    const cached = this.roles.get(key);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const allowed = allowedMethods(owner.roles, resourceType, await loadCustomRoles(this.db, owner.roles)).has(method);
    this.keep(this.roles, generation, key, allowed);
    return allowed;
  }

  private keep(cache: Map<string, boolean>, generation: number, key: string, value: boolean): void {
    if (generation !== this.generation) return;
    if (cache.size >= this.capacity) cache.clear();
    cache.set(key, value);
  }
}
