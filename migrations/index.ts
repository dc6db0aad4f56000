import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import * as eventstore from './0001_eventstore.js';
import * as users from './0002_users.js';
import * as access from './0003_access.js';
import * as dashboards from './0004_dashboards.js';
import * as devices from './0005_devices.js';
import * as translators from './0006_translators.js';
import * as geofences from './0007_geofences.js';
import * as reactorCheckpoints from './0010_reactor_checkpoints.js';
import * as commands from './0011_commands.js';
import * as parkedEvents from './0012_parked_events.js';
import * as translatorCodecs from './0020_translator_codecs.js';
import * as rules from './0030_rules.js';
import * as calculations from './0033_calculations.js';
import * as locationsOrganizationsApps from './0036_locations_organizations_apps.js';
import * as leases from './0047_leases.js';
import * as audit from './0050_audit.js';
import * as deviceSnapshots from './0051_device_snapshots.js';
import * as analytics from './0052_analytics.js';
import * as historyPerReport from './0053_history_per_report.js';
import * as usernameKey from './0054_username_key.js';
import * as userTokenVersion from './0055_user_token_version.js';
import * as commandOutcomes from './0056_command_outcomes.js';
import * as deviceRefusals from './0057_device_refusals.js';

/**
 * Every migration, in order. Names sort by their number; add a new one at the
 * end with the next number and both `up` and `down`.
 */
export const migrations: Record<string, Migration> = {
  '0001_eventstore': eventstore,
  '0002_users': users,
  '0003_access': access,
  '0004_dashboards': dashboards,
  '0005_devices': devices,
  '0006_translators': translators,
  '0007_geofences': geofences,
  '0010_reactor_checkpoints': reactorCheckpoints,
  '0011_commands': commands,
  '0012_parked_events': parkedEvents,
  '0020_translator_codecs': translatorCodecs,
  '0030_rules': rules,
  '0033_calculations': calculations,
  '0036_locations_organizations_apps': locationsOrganizationsApps,
  '0047_leases': leases,
  '0050_audit': audit,
  '0051_device_snapshots': deviceSnapshots,
  '0052_analytics': analytics,
  '0053_history_per_report': historyPerReport,
  '0054_username_key': usernameKey,
  '0055_user_token_version': userTokenVersion,
  '0056_command_outcomes': commandOutcomes,
  '0057_device_refusals': deviceRefusals,
};

const provider: MigrationProvider = { getMigrations: async () => migrations };

export function migrator(db: Kysely<any>): Migrator {
  // Numbers are handed out per capability ahead of time, so a lower number can land after a higher one was applied.
  return new Migrator({ db, provider, allowUnorderedMigrations: true });
}

export async function migrateToLatest(db: Kysely<any>): Promise<void> {
  const { error, results } = await migrator(db).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '?'} failed: ${(error as Error).message ?? error}`);
  }
}
