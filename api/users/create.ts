import { readModelsInclude, type Deps } from '../deps.js';
import { handle, toNewEvent, type CommandContext } from '../../domain/shared/decider.js';
import { newUserId } from '../../domain/shared/ids.js';
import { ConcurrencyError, ConflictError, UnavailableError } from '../../domain/shared/errors.js';
import { hashPassword } from '../../domain/users/password.js';
import { userDecider, userStream, type Profile, type Unit, type UserEvent } from '../../domain/users/user.js';
import { usernameDecider, usernameStream, type UsernameEvent } from '../../domain/users/username.js';

/**
 * Creates a user: claims the username on its own stream first (so concurrent
 * creations of one name cannot both succeed), then writes the user. The two
 * are separate appends (the store appends to several streams atomically only
 * without expected revisions, which the claim needs), so a crash between them
 * leaves a claim whose holder was never created: the next creation of the name
 * takes such a claim over (`releaseFromGone`). With
 * `temporary`, the password was chosen by the service and the user must set
 * their own (UPDATE_PASSWORD). `organization`: the unit whose admin creates
 * the user as a member (its name is in the profile's `attributes.organization`).
 */
export async function createUser(deps: Deps, context: CommandContext, profile: Profile, password: string, temporary: boolean, organization?: Unit): Promise<string> {
  const id = newUserId();
  const passwordHash = await hashPassword(password);
  // No read model waits on the claim; waiting here could answer 503 before the user itself is stored.
  const claim = () => handle(deps.store, usernameStream(profile.username), usernameDecider, { type: 'Claim', username: profile.username, userId: id }, context);
  try {
    await claim();
  } catch (error) {
    if (!(error instanceof ConflictError) || !(await releaseFromGone(deps, context, profile.username))) throw error;
    await claim();
  }
  let created;
  try {
    created = await handle(deps.store, userStream(id), userDecider, { type: 'CreateUser', id, profile, passwordHash, temporaryPassword: temporary, ...(organization ? { organization } : {}), at: context.now }, context);
  } catch (error) {
    // The id is new, so a stream already there is another creation's takeover of the claim (`releaseFromGone`): the name is its now.
    if (error instanceof ConcurrencyError || error instanceof ConflictError) throw new ConflictError(`ERR - username ${profile.username} is taken`);
    await releaseUnused(deps, context, profile.username, id);
    throw error;
  }
  // Past PROJECTION_WAIT_MS, 503 saying the user is stored: a caller under a lock keeps it until the read models have the user.
  if (created.result) await readModelsInclude(deps, created.result.position);
  return id;
}

/**
 * A name held by no user is released, and true returned: its holder was deleted (its deletion stored, its release
 * not: the two are separate appends), or never created (the claim stored, the user not: a crash between the two
 * appends of `createUser`, or a failed creation whose release failed too). A holder never created is first deleted,
 * on its empty stream: that append and the holder's own creation both expect no stream, so exactly one is stored. A
 * creation still under way then fails with 409 instead of storing a second user of the name; one that got in first
 * keeps the name. A deleted user never comes back, so its name is free.
 */
async function releaseFromGone(deps: Deps, context: CommandContext, username: string): Promise<boolean> {
  let claim = usernameDecider.initialState();
  for (const e of await deps.store.readStream(usernameStream(username))) claim = usernameDecider.evolve(claim, e as unknown as UsernameEvent);
  const holder = claim.holder;
  if (!holder) return false;
  const stream = await deps.store.readStream(userStream(holder));
  if (stream.length === 0) {
    const gone: UserEvent = { type: 'UserDeleted', data: { id: holder, at: context.now } };
    try {
      await deps.store.append(userStream(holder), [toNewEvent(gone, context)], 'no_stream');
    } catch (error) {
      // Its creation got in first: the name is taken.
      if (error instanceof ConcurrencyError) return false;
      throw error;
    }
  } else if (stream[stream.length - 1]!.type !== 'UserDeleted') {
    return false;
  }
  await handle(deps.store, usernameStream(username), usernameDecider, { type: 'Release', username, userId: holder }, context);
  return true;
}

/**
 * The claim of a user that was not stored is given back, so the name is not taken for good by nobody. Only once the
 * user's stream is read and found empty: an append that failed on its way back may have been stored all the same.
 */
async function releaseUnused(deps: Deps, context: CommandContext, username: string, userId: string): Promise<void> {
  try {
    if ((await deps.store.readStream(userStream(userId), { limit: 1 })).length > 0) return;
    await handle(deps.store, usernameStream(username), usernameDecider, { type: 'Release', username, userId }, context);
  } catch (err) {
    deps.log.error({ err, username, userId }, 'the claim of a username whose user was not stored could not be released');
  }
}

/** Creates the first admin from ADMIN_USERNAME and ADMIN_PASSWORD when no user exists yet. */
export async function bootstrapAdmin(deps: Deps): Promise<void> {
  const { adminUsername, adminPassword } = deps.config;
  if (!adminUsername || !adminPassword) return;
  const any = await deps.db.selectFrom('users').select('id').limit(1).executeTakeFirst();
  if (any) return;
  const now = deps.clock().toISOString();
  try {
    await createUser(
      deps,
      { actor: 'system:bootstrap', correlationId: `bootstrap-${now}`, now },
      { username: adminUsername, enabled: true, requiredActions: [], attributes: { roles: ['admin'] } },
      adminPassword,
      false,
    );
  } catch (err) {
    // Nodes of a cluster starting together: the username's claim lets one of them create the admin.
    if (err instanceof ConflictError) return deps.log.info({ username: adminUsername }, 'the first admin was created by another node');
    // Stored; the read models (led by another node, or not led yet) show it shortly.
    if (err instanceof UnavailableError) return deps.log.warn({ username: adminUsername }, 'created the first admin; the read models have not caught up yet');
    throw err;
  }
  deps.log.info({ username: adminUsername }, 'created the first admin');
}
