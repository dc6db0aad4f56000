import type { Deps } from '../deps.js';
import { write } from '../deps.js';
import { handle, type CommandContext } from '../../domain/shared/decider.js';
import { newUserId } from '../../domain/shared/ids.js';
import { ConflictError, UnavailableError } from '../../domain/shared/errors.js';
import { hashPassword } from '../../domain/users/password.js';
import { userDecider, userStream, type Profile, type Unit } from '../../domain/users/user.js';
import { usernameDecider, usernameStream } from '../../domain/users/username.js';

/**
 * Creates a user: claims the username on its own stream first (so concurrent
 * creations of one name cannot both succeed), then writes the user. With
 * `temporary`, the password was chosen by the service and the user must set
 * their own (UPDATE_PASSWORD). `organization`: the unit whose admin creates
 * the user as a member (its name is in the profile's `attributes.organization`).
 */
export async function createUser(deps: Deps, context: CommandContext, profile: Profile, password: string, temporary: boolean, organization?: Unit): Promise<string> {
  const id = newUserId();
  const passwordHash = await hashPassword(password);
  // No read model waits on the claim; waiting here could answer 503 before the user itself is stored.
  await handle(deps.store, usernameStream(profile.username), usernameDecider, { type: 'Claim', username: profile.username, userId: id }, context);
  await write(deps, context, userStream(id), userDecider, { type: 'CreateUser', id, profile, passwordHash, temporaryPassword: temporary, ...(organization ? { organization } : {}), at: context.now });
  return id;
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
