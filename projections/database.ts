import type { UsersTables } from './users.js';
import type { AccessTables } from './access.js';
import type { UsergroupsTables } from './usergroups.js';
import type { DashboardsTables } from './dashboards.js';
import type { ImagesTables } from './images.js';
import type { GeofencesTables } from './geofences.js';
import type { DevicesTables } from './devices.js';
import type { ProvisioningTables } from './provisioning.js';
import type { ChannelsTables } from './channels.js';
import type { LogsTables } from './logs.js';
import type { TranslatorsTables } from './translators.js';
import type { CommandsTables } from './commands.js';
import type { RulesTables } from './rules.js';
import type { LocationsTables } from './locations.js';
import type { OrganizationsTables } from './organizations.js';
import type { AppsTables } from './apps.js';
import type { CalculationsTables } from './calculations.js';

/**
 * Every read-model table, one interface per capability. A capability adds its
 * tables here by extending this interface.
 */
export interface Database extends UsersTables, AccessTables, UsergroupsTables, DashboardsTables, ImagesTables, GeofencesTables, DevicesTables, ProvisioningTables, ChannelsTables, LogsTables, TranslatorsTables, CommandsTables, RulesTables, LocationsTables, OrganizationsTables, AppsTables, CalculationsTables {}
