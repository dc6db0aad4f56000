import type { Kysely } from 'kysely';
import type { Database } from './database.js';
import { isBuiltinRole, type Permissions } from '../domain/access/roles.js';

/** The permissions of the custom roles among `roles`. */
export async function loadCustomRoles(db: Kysely<Database>, roles: string[]): Promise<Map<string, Permissions>> {
  const custom = roles.filter((r) => !isBuiltinRole(r));
  const map = new Map<string, Permissions>();
  if (custom.length === 0) return map;
  // Custom roles arrive with the access capability (table `roles`).
  return map;
}
