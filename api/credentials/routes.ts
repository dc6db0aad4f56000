import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess, requireReference, scopesOn } from '../access.js';
import type { Principal } from '../../domain/access/principal.js';
import { satisfies } from '../../domain/access/scopes.js';
import { sql } from 'kysely';
import { ConflictError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { hashPassword } from '../../domain/users/password.js';
import { CREDENTIALS_NOT_FOUND, checkUsername, credentialsSetDecider, credentialsSetStream } from '../../domain/credentials/credentialsSet.js';
import { ALLOWED_ROOTS, TOPIC_NOT_FOUND, checkTopic, reservedTopicDecider, reservedTopicStream } from '../../domain/topics/reservedTopic.js';
import { handle } from '../../domain/shared/decider.js';

const presentSet = (r: { id: string; username: string; created_at: Date }) => ({ _id: r.id, username: r.username, createdAt: r.created_at });
const presentTopic = (r: { id: string; topic: string; credentials_set_id: string }) => ({ _id: r.id, topic: r.topic, basicCredentialsSetId: r.credentials_set_id });

/** A credentials set named in a body that does not exist, or that the caller cannot see: one answer for both. */
const unknownSet = () =>
  ValidationError.field('basicCredentialsSetId', `does not reference an existing basic credentials set; topics are reserved below the allowed roots ${ALLOWED_ROOTS.join(', ')}`);

/**
 * Whether `topic` is taken for the set: reserved already, or at, above or
 * below a topic reserved by a credentials set of another owner (the user who
 * created it). A set inside another owner's branch would take over its
 * publishes; one above it would shadow them. Sets of the same owner may nest
 * (a gateway and its separately reserved sub-nodes).
 */
async function overlapsAnotherOwner(deps: Deps, topic: string, setId: string): Promise<boolean> {
  const levels = topic.split('/');
  const ancestors = levels.slice(0, -1).map((_, i) => levels.slice(0, i + 1).join('/'));
  const { rows } = await sql<{ id: string }>`
    SELECT t.id FROM reserved_topics t
      JOIN credentials_sets theirs ON theirs.id = t.credentials_set_id
      JOIN credentials_sets ours ON ours.id = ${setId}
    WHERE t.topic = ${topic}
       OR ((t.topic = ANY(${ancestors}::text[]) OR starts_with(t.topic, ${topic + '/'})) AND theirs.created_by <> ours.created_by)
    LIMIT 1`.execute(deps.db);
  return rows.length > 0;
}

/** Whether the topic is the `secret` of a device the caller may not write (a release leaves its device behind). */
async function secretOfAnother(deps: Deps, principal: Principal, topic: string): Promise<boolean> {
  const devices = await deps.db.selectFrom('devices').select('id').where('secret', '=', topic).execute();
  for (const d of devices) if (!satisfies(await scopesOn(deps, principal, d.id), 'write')) return true;
  return false;
}

/** Credentials sets and reserved MQTT topics: what a device provider sets up before publishing. */
export function credentialsRoutes(deps: Deps): Router {
  const router = Router();

  // ---- basic credentials sets ----
  router.post('/api/basic-credentials-sets', async (req, res) => {
    const { username, password } = req.body as { username: string; password: string };
    checkUsername(username);
    const id = newResourceId();
    const context = requestContext(deps, req);
    const passwordHash = await hashPassword(password);
    await deps.locks.serialized('credentials-set-usernames', async () => {
      const taken = await deps.db.selectFrom('credentials_sets').select('id').where('username', '=', username).executeTakeFirst();
      if (taken) throw new ConflictError('ERR - username is already used by another basic credentials set');
      await write(deps, context, credentialsSetStream(id), credentialsSetDecider, { type: 'CreateCredentialsSet', id, username, passwordHash, createdBy: context.actor, at: context.now });
    });
    res.status(201).json({ _id: id, username });
  });

  router.get('/api/basic-credentials-sets', async (req, res) => {
    const rows = await deps.db
      .selectFrom('credentials_sets')
      .select(['id', 'username', 'created_at'])
      .where(readableBy(principalOf(req), 'credentials_sets.id'))
      .orderBy('username')
      .execute();
    res.json(rows.map(presentSet));
  });

  router.get('/api/basic-credentials-sets/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', CREDENTIALS_NOT_FOUND);
    const row = await deps.db.selectFrom('credentials_sets').select(['id', 'username', 'created_at']).where('id', '=', id).executeTakeFirstOrThrow();
    res.json(presentSet(row));
  });

  router.delete('/api/basic-credentials-sets/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', CREDENTIALS_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, credentialsSetStream(id), credentialsSetDecider, { type: 'DeleteCredentialsSet', id, at: context.now });
    res.status(204).end();
  });

  // ---- reserved MQTT topics ----
  router.post('/api/reserved-mqtt-topics', async (req, res) => {
    const { topic, basicCredentialsSetId } = req.body as { topic: string; basicCredentialsSetId: string };
    checkTopic(topic, basicCredentialsSetId);
    // Reserving a topic lets its set create devices: the caller must control the set. A set the caller cannot see answers as one that does not exist.
    await requireReference(deps, principalOf(req), basicCredentialsSetId, 'write', unknownSet());
    const id = newResourceId();
    const context = requestContext(deps, req);
    await deps.locks.serialized('reserved-topics', async () => {
      if (await overlapsAnotherOwner(deps, topic, basicCredentialsSetId)) throw new ConflictError('ERR - topic is already reserved');
      // Publishes on the topic would land on the device whose secret it is: one the caller may not write stays out of reach.
      if (await secretOfAnother(deps, principalOf(req), topic)) throw new ConflictError('ERR - topic is already reserved');
      await write(deps, context, reservedTopicStream(id), reservedTopicDecider, { type: 'ReserveTopic', id, topic, basicCredentialsSetId, createdBy: context.actor, at: context.now });
    });
    res.status(201).json({ _id: id, topic });
  });

  router.get('/api/reserved-mqtt-topics', async (req, res) => {
    const rows = await deps.db
      .selectFrom('reserved_topics')
      .select(['id', 'topic', 'credentials_set_id'])
      .where(readableBy(principalOf(req), 'reserved_topics.id'))
      .orderBy('topic')
      .execute();
    res.json(rows.map(presentTopic));
  });

  router.get('/api/reserved-mqtt-topics/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', TOPIC_NOT_FOUND);
    const row = await deps.db.selectFrom('reserved_topics').select(['id', 'topic', 'credentials_set_id']).where('id', '=', id).executeTakeFirstOrThrow();
    res.json(presentTopic(row));
  });

  router.delete('/api/reserved-mqtt-topics/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', TOPIC_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, reservedTopicStream(id), reservedTopicDecider, { type: 'ReleaseTopic', id, at: context.now });
    res.status(204).end();
  });

  return router;
}
