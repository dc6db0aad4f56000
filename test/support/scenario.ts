import type { TestPlatform } from './platform.js';

/**
 * Drives every capability through REST, so projection-wide tests (replay,
 * rebuild) cover every read model. Each step must succeed.
 */
export async function exerciseEveryCapability(t: TestPlatform): Promise<void> {
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await t.call(method, path, body === undefined ? {} : { body });
    if (res.status >= 300) throw new Error(`${method} ${path} answered ${res.status}: ${res.text}`);
    return res.body;
  };
  const user = await ok('POST', '/api/users', { username: 'scenario-user', email: 'user@example.com' });
  await ok('PATCH', `/api/users/${user._id ?? user.id}`, { firstName: 'Ada' });
  const group = await ok('POST', '/api/usergroups', { name: 'scenario group' });
  await ok('POST', `/api/usergroups/${group._id}/members`, { userId: user._id ?? user.id });
}
