/**
 * The role check: which HTTP methods a role allows on each resource type.
 *
 * The dashboard row is the contract's table; every other resource type follows
 * the same shape (docs/access.md):
 * - `admin`: every method on everything.
 * - `editor`: reads and edits what exists (GET, PATCH, PUT), never creates or deletes (POST, DELETE).
 * - `installer`: reads everything; also creates and edits the things a device
 *   installation needs (devices, credentials sets, reserved topics, connectors).
 * - `viewerBasic`, `viewerStandard`, `viewerFull`: GET only.
 * - a custom role: the methods it lists per resource type.
 * A user with several roles gets the union; a user with none is a `viewerBasic`.
 */
export const RESOURCE_TYPES = [
  'dashboard',
  'image',
  'device',
  'deviceGroup',
  'user',
  'usergroup',
  'accessRight',
  'role',
  'credentialsSet',
  'reservedTopic',
  'connector',
  'channel',
  'translator',
  'geofence',
  'log',
  'rule',
  'calculation',
  'location',
  'organization',
  'app',
  'audit',
] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type Method = (typeof METHODS)[number];

export const BUILTIN_ROLES = ['admin', 'editor', 'installer', 'viewerBasic', 'viewerStandard', 'viewerFull'] as const;
export type BuiltinRole = (typeof BUILTIN_ROLES)[number];

/** A custom role: resource type → allowed methods. */
export type Permissions = Partial<Record<ResourceType, Method[]>>;

const ALL: Method[] = [...METHODS];
const READ: Method[] = ['GET'];
const EDIT: Method[] = ['GET', 'PATCH', 'PUT'];
const INSTALL: Method[] = ['GET', 'POST', 'PATCH', 'PUT'];
const INSTALLER_RESOURCES = new Set<ResourceType>(['device', 'credentialsSet', 'reservedTopic', 'connector']);

export function builtinMethods(role: BuiltinRole, resource: ResourceType): Method[] {
  switch (role) {
    case 'admin':
      return ALL;
    case 'editor':
      return EDIT;
    case 'installer':
      return INSTALLER_RESOURCES.has(resource) ? INSTALL : READ;
    case 'viewerBasic':
    case 'viewerStandard':
    case 'viewerFull':
      return READ;
    default: {
      const _: never = role;
      return _;
    }
  }
}

export const isBuiltinRole = (role: string): role is BuiltinRole => (BUILTIN_ROLES as readonly string[]).includes(role);

/** The union of what `roles` allow on `resource`; `custom` holds the permissions of the custom roles among them. */
export function allowedMethods(roles: string[], resource: ResourceType, custom: Map<string, Permissions>): Set<string> {
  const allowed = new Set<string>();
  const effective = roles.length ? roles : ['viewerBasic'];
  for (const role of effective) {
    const methods = isBuiltinRole(role) ? builtinMethods(role, resource) : (custom.get(role)?.[resource] ?? []);
    for (const m of methods) allowed.add(m);
  }
  return allowed;
}
