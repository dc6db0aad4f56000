/** Who is calling: a user, resolved from a verified token against the users read model. */
export interface Principal {
  id: string;
  username: string;
  roles: string[];
}
