/** Who is calling: a user, resolved from a verified token against the users read model. */
export interface Principal {
  id: string;
  username: string;
  roles: string[];
}

/** Holds the built-in `admin` role: manages users and custom roles. */
export const isAdmin = (principal: Principal): boolean => principal.roles.includes('admin');
