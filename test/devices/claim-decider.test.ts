/**
 * A claim is decided on the device's registration, its claims and its
 * credentials set, never on its document: the claims' decider passes over
 * reports, and decides as the device's decider does.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { claimDecider, deviceDecider, type DeviceEvent } from '../../domain/devices/device.js';
import { NotFoundError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const AT = '2026-05-01T10:00:00.000Z';
const registered: DeviceEvent = { type: 'DeviceRegistered', data: { id: 'd1', createdBy: 'u0', doc: { name: 'Meter', secret: 'svc/generic/v2/a/d1' }, credentialsSetId: 's1', at: AT } };
const reports: DeviceEvent[] = Array.from({ length: 50 }, (_, i) => ({ type: 'DeviceReported', data: { id: 'd1', topic: 'svc/generic/v2/a/d1', path: [], payload: { [`f${i}`]: i }, reportedAt: AT } }));
const claimed: DeviceEvent = { type: 'DeviceClaimed', data: { id: 'd1', userId: 'u1', username: 'first', credentialsSetId: 's1', grants: [{ subjectType: 'user', subjectId: 'u1', scope: ['read', 'write'] }], at: AT } };
const claim = (userId: string, consented: boolean) => ({ type: 'ClaimDevice' as const, id: 'd1', userId, username: userId, consented, setRights: [], at: AT });

const claims = suite('claims decided without the document');

claims('given a device with reports and a first claim, when another user claims it without consent, then not found, as the device decider says', () => {
  const history = [registered, ...reports, claimed];
  deciderSpec(claimDecider).given(history).when(claim('u2', false)).thenThrows(NotFoundError);
  deciderSpec(deviceDecider).given(history).when(claim('u2', false)).thenThrows(NotFoundError);
});

claims('given a device with reports, when it is claimed, then both deciders decide the same claim; the claims\' fold leaves the document as registered', () => {
  const history = [registered, ...reports];
  const byClaims = deciderSpec(claimDecider).given(history);
  assert.equal(byClaims.when(claim('u1', false)).events(), deciderSpec(deviceDecider).given(history).when(claim('u1', false)).events());
  assert.equal(byClaims.state.status === 'active' && Object.keys(byClaims.state.doc).sort(), ['createdAt', 'name', 'secret', 'updatedAt']);
});

claims.run();
