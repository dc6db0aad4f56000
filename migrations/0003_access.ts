import { sql, type Kysely } from 'kysely';

/** Access rights, usergroups with their members, and custom roles. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE access_rights (
    resource_type text NOT NULL,
    resource_id text NOT NULL,
    subject_type text NOT NULL CHECK (subject_type IN ('user', 'group', 'orgUnit')),
    subject_id text NOT NULL,
    scope text[] NOT NULL,
    PRIMARY KEY (resource_id, subject_type, subject_id)
  )`.execute(db);
  await sql`CREATE INDEX access_rights_subject ON access_rights (subject_type, subject_id, resource_type)`.execute(db);
  await sql`CREATE TABLE usergroups (
    id text PRIMARY KEY,
    name text NOT NULL,
    owner uuid NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE TABLE usergroup_members (
    group_id text NOT NULL REFERENCES usergroups (id) ON DELETE CASCADE,
    user_id uuid NOT NULL,
    PRIMARY KEY (group_id, user_id)
  )`.execute(db);
  await sql`CREATE INDEX usergroup_members_user ON usergroup_members (user_id)`.execute(db);
  await sql`CREATE TABLE roles (
    name text PRIMARY KEY,
    permissions jsonb NOT NULL,
    revision bigint NOT NULL
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE roles, usergroup_members, usergroups, access_rights`.execute(db);
}
