/**
 * Resources whose creator gets full access and whose deletion removes every
 * access right on them. The access projection reads this list: a creation
 * event must carry `data.id` and `data.createdBy` (a user id), a deletion
 * event `data.id`. A capability adds its own line here.
 */
export interface OwnedResource {
  resourceType: string;
  created: string;
  deleted: string;
}

export const OWNED_RESOURCES: OwnedResource[] = [
  { resourceType: 'usergroup', created: 'UsergroupCreated', deleted: 'UsergroupDeleted' },
  { resourceType: 'dashboard', created: 'DashboardCreated', deleted: 'DashboardDeleted' },
  { resourceType: 'image', created: 'ImageUploaded', deleted: 'ImageDeleted' },
  { resourceType: 'geofence', created: 'GeofenceCreated', deleted: 'GeofenceDeleted' },
  { resourceType: 'device', created: 'DeviceRegistered', deleted: 'DeviceDeleted' },
  { resourceType: 'credentialsSet', created: 'CredentialsSetCreated', deleted: 'CredentialsSetDeleted' },
  { resourceType: 'reservedTopic', created: 'ReservedTopicCreated', deleted: 'ReservedTopicDeleted' },
  { resourceType: 'connector', created: 'ConnectorCreated', deleted: 'ConnectorDeleted' },
  { resourceType: 'channel', created: 'ChannelCreated', deleted: 'ChannelDeleted' },
  { resourceType: 'deviceGroup', created: 'DeviceGroupCreated', deleted: 'DeviceGroupDeleted' },
  { resourceType: 'ruleV2', created: 'RuleCreated', deleted: 'RuleDeleted' },
  { resourceType: 'location', created: 'LocationCreated', deleted: 'LocationDeleted' },
  { resourceType: 'organization', created: 'OrganizationCreated', deleted: 'OrganizationDeleted' },
  { resourceType: 'app', created: 'AppCreated', deleted: 'AppDeleted' },
  { resourceType: 'calculation', created: 'CalculationCreated', deleted: 'CalculationDeleted' },
];
