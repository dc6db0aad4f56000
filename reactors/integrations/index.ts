import type { IntegrationName } from '../../domain/integrations/catalog.js';
import type { IntegrationModule } from './types.js';
import { chirpstack } from './chirpstack/index.js';
import { generic } from './generic/index.js';
import { theThingsStack } from './thethingsstack/index.js';
import { loriot } from './loriot/index.js';
import { createThingPark } from './thingpark/index.js';
import { genericHttp } from './generic-http/index.js';

/** Every integration's adapters, by name; an integration of the catalog without a module here has no adapters yet. */
export const INTEGRATION_MODULES: Partial<Record<IntegrationName, IntegrationModule>> = {
  ChirpStack: chirpstack,
  Generic: generic,
  TheThingsStack: theThingsStack,
  Loriot: loriot,
  ThingPark: createThingPark(),
  GenericHttp: genericHttp,
};

/** The integration whose webhook path is `path`. */
export const moduleOfWebhook = (path: string): IntegrationModule | undefined => Object.values(INTEGRATION_MODULES).find((m) => m?.webhook?.path === path);
