import type { Projection } from './runner.js';
import { usersProjection } from './users.js';
import { accessProjection } from './access.js';
import { usergroupsProjection } from './usergroups.js';
import { dashboardsProjection } from './dashboards.js';
import { imagesProjection } from './images.js';
import { geofencesProjection } from './geofences.js';
import { devicesProjection } from './devices.js';
import { provisioningProjection } from './provisioning.js';
import { channelsProjection } from './channels.js';
import { logsProjection } from './logs.js';
import { translatorsProjection } from './translators.js';
import { commandsProjection } from './commands.js';
import { auditProjection } from './audit.js';
import { rulesProjection } from './rules.js';
import { locationsProjection } from './locations.js';
import { organizationsProjection } from './organizations.js';
import { appsProjection } from './apps.js';
import { calculationsProjection } from './calculations.js';

/** Every projection, in the order they apply a batch. */
export const allProjections = (): Projection[] => [usersProjection, accessProjection, usergroupsProjection, dashboardsProjection, imagesProjection, geofencesProjection, devicesProjection(), provisioningProjection, channelsProjection, logsProjection, translatorsProjection, commandsProjection, rulesProjection, locationsProjection, organizationsProjection, appsProjection, calculationsProjection, auditProjection];
