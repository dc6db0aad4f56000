import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { UnauthorizedError, ValidationError } from '../../domain/shared/errors.js';
import { hashPassword, verifyPassword } from '../../domain/users/password.js';
import { userDecider, userStream } from '../../domain/users/user.js';
import { usernameKey } from '../../domain/users/username.js';
import { issueToken } from '../../domain/access/tokens.js';
import { FAILED_LOGINS_PER_MINUTE, RateLimiter } from '../rateLimit.js';

// Compared against when the username is unknown, so both failures take the same time.
const DUMMY_HASH = 'scrypt$00000000000000000000000000000000$0000000000000000000000000000000000000000000000000000000000000000';

export function authRoutes(deps: Deps): Router {
  const router = Router();

  const failedByName = new RateLimiter('failed logins for this username from this address', FAILED_LOGINS_PER_MINUTE.username);
  const failedByAddress = new RateLimiter('failed logins from this address', FAILED_LOGINS_PER_MINUTE.address);
  router.post('/api/auth/local', async (req, res) => {
    const { username, password } = req.body as { username: string; password: string };
    const name = usernameKey(username);
    const address = req.socket.remoteAddress ?? 'unknown';
    // A username's failures count per address, so guesses from elsewhere never lock its owner out.
    const attempt = `${name}\u0000${address}`;
    failedByName.check(attempt);
    failedByAddress.check(address);
    const user = await deps.db
      .selectFrom('users')
      .select(['id', 'profile', 'password_hash', 'token_version'])
      .where('username_key', '=', name)
      .executeTakeFirst();
    const ok = await verifyPassword(password, user?.password_hash ?? DUMMY_HASH);
    if (!user || !ok || !user.profile.enabled) {
      failedByName.spend(attempt);
      failedByAddress.spend(address);
      throw new UnauthorizedError('Invalid username or password');
    }
    res.json({ token: issueToken(deps.jwtSecret, user.id, deps.config.tokenTtlSeconds, user.token_version) });
  });

  /**
   * The caller sets their own password; this clears UPDATE_PASSWORD. Every
   * token issued before stops working (the token version moves on), the
   * caller's included: the answer carries a fresh one, of the new version.
   */
  router.put('/api/auth/password', async (req, res) => {
    const principal = principalOf(req);
    const { currentPassword, newPassword } = req.body as { currentPassword: string; newPassword: string };
    const user = await deps.db.selectFrom('users').select('password_hash').where('id', '=', principal.id).executeTakeFirstOrThrow();
    if (!(await verifyPassword(currentPassword, user.password_hash))) throw ValidationError.field('currentPassword', 'is not correct');
    const context = requestContext(deps, req);
    const passwordHash = await hashPassword(newPassword);
    const { state } = await write(deps, context, userStream(principal.id), userDecider, { type: 'ChangePassword', id: principal.id, passwordHash, at: context.now });
    if (state.status !== 'active') throw new UnauthorizedError();
    res.json({ token: issueToken(deps.jwtSecret, principal.id, deps.config.tokenTtlSeconds, state.tokenVersion) });
  });

  return router;
}
