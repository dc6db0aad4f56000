import { Router } from 'express';
import type { Deps } from '../deps.js';
import { UnauthorizedError } from '../../domain/shared/errors.js';
import { verifyPassword } from '../../domain/users/password.js';
import { issueToken } from './tokens.js';

// Compared against when the username is unknown, so both failures take the same time.
const DUMMY_HASH = 'scrypt$00000000000000000000000000000000$0000000000000000000000000000000000000000000000000000000000000000';

export function authRoutes(deps: Deps): Router {
  const router = Router();

  router.post('/api/auth/local', async (req, res) => {
    const { username, password } = req.body as { username: string; password: string };
    const user = await deps.db
      .selectFrom('users')
      .select(['id', 'profile', 'password_hash'])
      .where((eb) => eb(eb.fn('lower', ['username']), '=', username.toLowerCase()))
      .executeTakeFirst();
    const ok = await verifyPassword(password, user?.password_hash ?? DUMMY_HASH);
    if (!user || !ok || !user.profile.enabled) throw new UnauthorizedError('Invalid username or password');
    res.json({ token: issueToken(deps.jwtSecret, user.id, deps.config.tokenTtlSeconds) });
  });

  return router;
}
