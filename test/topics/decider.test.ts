import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ALLOWED_ROOTS, ROOTS_NOTE, TOPIC_NOT_FOUND, reservedTopicDecider, type ReservedTopicCommand, type ReservedTopicEvent } from '../../domain/topics/reservedTopic.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const topics = suite('reserved topic decider');

const at = '2026-01-01T00:00:00.000Z';
const ID = 'eeeeeeeeeeeeeeeeeeeeeeee';
const SET = 'dddddddddddddddddddddddd';
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';

const given = (events: ReservedTopicEvent[]) => deciderSpec(reservedTopicDecider).given(events);
const reserve = (topic: string, basicCredentialsSetId = SET): ReservedTopicCommand => ({ type: 'ReserveTopic', id: ID, topic, basicCredentialsSetId, createdBy: owner, at });
const reserved = (topic: string): ReservedTopicEvent => ({ type: 'ReservedTopicCreated', data: { id: ID, topic, basicCredentialsSetId: SET, createdBy: owner, at } });
const topicRefused = (why: string) => `ERR - topic ${why}; ${ROOTS_NOTE}`;

topics('the refusal note names every allowed root', () => {
  assert.is(ROOTS_NOTE, 'the allowed roots are svc/generic/v2, svc/push/v1, svc/tracker/v1, svc/meter/v1, svc/gateway/v1, each followed by at least one sub-topic');
});

topics('given no reservation, when a topic below each allowed root is reserved, then ReservedTopicCreated pairs it with its credentials set', () => {
  for (const root of ALLOWED_ROOTS) {
    const topic = root === 'svc/push/v1' ? `${root}/${SET}/valves` : `${root}/plant-1/line-2`;
    given([]).when(reserve(topic)).then([reserved(topic)]);
  }
  given([]).when(reserve(`svc/push/v1/${SET}`)).then([reserved(`svc/push/v1/${SET}`)]);
});

topics('when a topic starts with /, or with no allowed root, then a validation error with the roots note', () => {
  given([]).when(reserve('/svc/generic/v2/a')).thenThrows(ValidationError, topicRefused('must not start with /'));
  for (const topic of ['svc/other/v1/a', 'svc/generic/v2x/a', 'svc/generic', 'plant/a']) {
    given([]).when(reserve(topic)).thenThrows(ValidationError, topicRefused('must start with an allowed root'));
  }
});

topics('when a topic is a root alone, then a validation error: a sub-topic is needed', () => {
  for (const topic of ['svc/generic/v2', 'svc/generic/v2/', 'svc/meter/v1/']) {
    given([]).when(reserve(topic)).thenThrows(ValidationError, topicRefused('must add a sub-topic below the root'));
  }
});

topics('when a topic has an empty level, then a validation error', () => {
  for (const topic of ['svc/generic/v2/a//b', 'svc/generic/v2/a/', 'svc/generic/v2//a']) {
    given([]).when(reserve(topic)).thenThrows(ValidationError, topicRefused('must not have empty levels'));
  }
});

topics('when a topic has +, #, $ or NUL anywhere, then a validation error', () => {
  for (const topic of ['svc/generic/v2/a/+', 'svc/generic/v2/#', 'svc/generic/v2/a/b#', 'svc/generic/v2/$x', 'svc/generic/v2/a$', 'svc/generic/v2/a\u0000b']) {
    given([]).when(reserve(topic)).thenThrows(ValidationError, topicRefused('must not contain +, #, $ or NUL'));
  }
});

topics('when a topic is past 1024 bytes, counted in UTF-8, then a validation error; at 1024 bytes it is taken', () => {
  const root = 'svc/generic/v2/';
  given([]).when(reserve(root + 'x'.repeat(1024 - root.length))).then([reserved(root + 'x'.repeat(1024 - root.length))]);
  given([]).when(reserve(root + 'x'.repeat(1025 - root.length))).thenThrows(ValidationError, topicRefused('must be at most 1024 bytes'));
  const wide = root + 'ä'.repeat(505);
  assert.ok(wide.length < 1024);
  given([]).when(reserve(wide)).thenThrows(ValidationError, topicRefused('must be at most 1024 bytes'));
});

topics("when a set reserves below svc/push/v1 another set's branch, then a validation error: only its own", () => {
  for (const topic of ['svc/push/v1/ffffffffffffffffffffffff/valves', `svc/push/v1/x${SET}/valves`]) {
    given([])
      .when(reserve(topic))
      .thenThrows(ValidationError, `ERR - topic below svc/push/v1 must start with the id of its own basic credentials set: svc/push/v1/${SET}/…; ${ROOTS_NOTE}`);
  }
  given([]).when(reserve(`svc/generic/v2/ffffffffffffffffffffffff`)).then([reserved('svc/generic/v2/ffffffffffffffffffffffff')]);
});

topics('given a reservation, live or released, when it is reserved again, then a conflict names it', () => {
  const released: ReservedTopicEvent = { type: 'ReservedTopicDeleted', data: { id: ID, topic: 'svc/meter/v1/a', at } };
  for (const events of [[reserved('svc/meter/v1/a')], [reserved('svc/meter/v1/a'), released]]) {
    given(events).when(reserve('svc/meter/v1/b')).thenThrows(ConflictError, `Reserved topic ${ID} already exists`);
  }
});

topics('given a reservation, when it is released, then ReservedTopicDeleted names the topic it held', () => {
  given([reserved('svc/meter/v1/a')]).when({ type: 'ReleaseTopic', id: ID, at }).then([{ type: 'ReservedTopicDeleted', data: { id: ID, topic: 'svc/meter/v1/a', at } }]);
});

topics('given no reservation or a released one, when it is released, then Reserved MQTT topic not found', () => {
  const released: ReservedTopicEvent = { type: 'ReservedTopicDeleted', data: { id: ID, topic: 'svc/meter/v1/a', at } };
  given([]).when({ type: 'ReleaseTopic', id: ID, at }).thenThrows(NotFoundError, TOPIC_NOT_FOUND);
  given([reserved('svc/meter/v1/a'), released]).when({ type: 'ReleaseTopic', id: ID, at }).thenThrows(NotFoundError, TOPIC_NOT_FOUND);
  assert.is(TOPIC_NOT_FOUND, 'Reserved MQTT topic not found');
});

topics.run();
