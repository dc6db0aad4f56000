import { sql, type Kysely } from 'kysely';

/**
 * Locations (deprecated model, kept for old integrations), organization units
 * with their tree, client apps, and the app filter of usergroups.
 *
 * `organization_tree` is the closure of the units' parent links: a row for
 * every unit and each of its ancestors (itself at depth 0), with both names,
 * since `orgUnit` access rights and users' `attributes.organization` name
 * units by name.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE locations (
    id text PRIMARY KEY,
    name text NOT NULL,
    doc jsonb NOT NULL,
    user_id uuid NOT NULL,
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX locations_name ON locations (name, id)`.execute(db);

  await sql`CREATE TABLE organizations (
    id text PRIMARY KEY,
    name text NOT NULL,
    description text,
    parent_id text,
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`.execute(db);
  // Names are kept unique by the write side (under a lock); the read model only indexes them, so it never refuses an event.
  await sql`CREATE INDEX organizations_name ON organizations (lower(name))`.execute(db);
  await sql`CREATE INDEX organizations_parent ON organizations (parent_id) WHERE parent_id IS NOT NULL`.execute(db);
  await sql`CREATE TABLE organization_tree (
    unit_id text NOT NULL,
    unit_name text NOT NULL,
    ancestor_id text NOT NULL,
    ancestor_name text NOT NULL,
    depth integer NOT NULL,
    PRIMARY KEY (unit_id, ancestor_id)
  )`.execute(db);
  await sql`CREATE INDEX organization_tree_unit_name ON organization_tree (unit_name)`.execute(db);
  await sql`CREATE INDEX organization_tree_ancestor ON organization_tree (ancestor_id)`.execute(db);

  await sql`CREATE TABLE apps (
    id text PRIMARY KEY,
    name text NOT NULL,
    description text,
    secret_hash text NOT NULL,
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX apps_name ON apps (name, id)`.execute(db);

  // NULL: the group has no filter; an array (possibly empty): its members see only those apps.
  await sql`ALTER TABLE usergroups ADD COLUMN app_filter text[]`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE usergroups DROP COLUMN app_filter`.execute(db);
  await sql`DROP TABLE apps, organization_tree, organizations, locations`.execute(db);
}
