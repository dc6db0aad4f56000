import { suite } from 'uvu';
import { channelDecider, type ChannelEvent } from '../../domain/channels/channel.js';
import { NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const decider = suite('channel decider');
const given = (events: ChannelEvent[]) => deciderSpec(channelDecider).given(events);

const at = '2024-05-01T12:00:00.000Z';
const ID = '111111111111111111111111';
const DEVICE = '222222222222222222222222';
const created: ChannelEvent = {
  type: 'ChannelCreated',
  data: { id: ID, createdBy: 'user-1', protocol: 'http', doc: { name: 'hook', iotnode: DEVICE, http: { url: 'https://a.example/hook', headers: {} } }, secrets: { authorization: 'Bearer one' }, at },
};

decider('given an http channel, when it is replaced without its Authorization, then ChannelReplaced keeps the stored one', () => {
  given([created])
    .when({ type: 'ReplaceChannel', id: ID, body: { name: 'moved', iotnode: DEVICE, http: { url: 'https://b.example/hook' } }, at })
    .then([{ type: 'ChannelReplaced', data: { id: ID, doc: { name: 'moved', iotnode: DEVICE, http: { url: 'https://b.example/hook' } }, secrets: { authorization: 'Bearer one' }, at } }]);
});

decider('given an http channel, when it is replaced with a new Authorization, then the new one is a secret, not part of the document', () => {
  given([created])
    .when({ type: 'ReplaceChannel', id: ID, body: { name: 'hook', iotnode: DEVICE, http: { url: 'https://a.example/hook', headers: { authorization: 'Bearer two' } } }, at })
    .then([{ type: 'ChannelReplaced', data: { id: ID, doc: { name: 'hook', iotnode: DEVICE, http: { url: 'https://a.example/hook', headers: {} } }, secrets: { authorization: 'Bearer two' }, at } }]);
});

decider('given a channel, when it is replaced by what it is, then no event', () => {
  given([created]).when({ type: 'ReplaceChannel', id: ID, body: { name: 'hook', iotnode: DEVICE, http: { url: 'https://a.example/hook', headers: {} } }, at }).then([]);
});

decider('given a channel, when a replacement names another target or protocol, then a validation error naming it', () => {
  given([created]).when({ type: 'ReplaceChannel', id: ID, body: { deviceGroup: DEVICE, http: { url: 'https://a.example/hook' } }, at }).thenThrows(ValidationError, /^ERR - iotnode cannot change/);
  given([created]).when({ type: 'ReplaceChannel', id: ID, body: { iotnode: DEVICE, mqtt: { type: 'keycloakUser', recipient: 'u' } }, at }).thenThrows(ValidationError, /^ERR - mqtt cannot replace http/);
});

decider('given no channel, or a deleted one, when it is replaced, then not found', () => {
  given([]).when({ type: 'ReplaceChannel', id: ID, body: { iotnode: DEVICE, http: { url: 'https://a.example/hook' } }, at }).thenThrows(NotFoundError);
  given([created, { type: 'ChannelDeleted', data: { id: ID, at } }]).when({ type: 'ReplaceChannel', id: ID, body: { iotnode: DEVICE, http: { url: 'https://a.example/hook' } }, at }).thenThrows(NotFoundError);
});

decider.run();
