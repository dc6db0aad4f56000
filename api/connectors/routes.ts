import { Router } from 'express';
import { createHash, randomBytes } from 'node:crypto';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess, requireReference } from '../access.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { CONNECTOR_NOT_FOUND, SETTINGS, connectorDecider, connectorStream, type ConnectorDoc } from '../../domain/connectors/connector.js';
import { isIntegration } from '../../domain/integrations/catalog.js';
import { ALLOWED_ROOTS } from '../../domain/topics/reservedTopic.js';
import type { ConnectorsTable } from '../../projections/provisioning.js';

/** A connector as clients see it: its settings without the write-only ones, and the health of its outbound connections. */
const presentConnector = (r: Pick<ConnectorsTable, 'id' | 'doc' | 'status' | 'last_error' | 'last_error_at' | 'status_at'>) => ({
  _id: r.id,
  ...r.doc,
  status: r.status,
  ...(r.status_at ? { statusSince: r.status_at.toISOString() } : {}),
  ...(r.last_error ? { lastError: r.last_error, lastErrorAt: r.last_error_at?.toISOString() } : {}),
});

const COLUMNS = ['id', 'doc', 'status', 'last_error', 'last_error_at', 'status_at'] as const;

/** A credentials set named in a body that does not exist, or that the caller cannot see: one answer for both. */
const unknownSet = () =>
  ValidationError.field('basicCredentialsSetId', `does not reference an existing basic credentials set; topics are reserved below the allowed roots ${ALLOWED_ROOTS.join(', ')}`);

/**
 * Connectors. A connector of an integration whose network server calls the
 * platform gets a webhook secret: it is in the create answer, once, as
 * `webhookSecret`, and only its SHA-256 is kept.
 */
export function connectorRoutes(deps: Deps): Router {
  const router = Router();

  router.post('/api/connectors', async (req, res) => {
    const body = req.body as ConnectorDoc;
    // Downlinks of an internal-broker connector go to its set's push topics: the caller must control the set.
    if (body.basicCredentialsSetId !== undefined) await requireReference(deps, principalOf(req), body.basicCredentialsSetId, 'write', unknownSet());
    const id = newResourceId();
    const context = requestContext(deps, req);
    const webhook = isIntegration(body.integration) && SETTINGS[body.integration].webhook;
    const webhookSecret = webhook ? randomBytes(24).toString('base64url') : null;
    const webhookSecretHash = webhookSecret ? createHash('sha256').update(webhookSecret).digest('hex') : undefined;
    await write(deps, context, connectorStream(id), connectorDecider, { type: 'CreateConnector', id, createdBy: context.actor, body, webhookSecretHash, at: context.now });
    const row = await deps.db.selectFrom('connectors').select(['id', 'doc']).where('id', '=', id).executeTakeFirstOrThrow();
    // The contract's create answer is the connector as given (the internal-broker case: `_id`, `name`, `basicCredentialsSetId`, `integration`); reads add its health.
    res.status(201).json({ _id: row.id, ...row.doc, ...(webhookSecret ? { webhookSecret } : {}) });
  });

  router.get('/api/connectors', async (req, res) => {
    const rows = await deps.db
      .selectFrom('connectors')
      .select(COLUMNS)
      .where(readableBy(principalOf(req), 'connectors.id'))
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    res.json(rows.map(presentConnector));
  });

  router.get('/api/connectors/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', CONNECTOR_NOT_FOUND);
    const row = await deps.db.selectFrom('connectors').select(COLUMNS).where('id', '=', id).executeTakeFirstOrThrow();
    res.json(presentConnector(row));
  });

  router.delete('/api/connectors/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', CONNECTOR_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, connectorStream(id), connectorDecider, { type: 'DeleteConnector', id, at: context.now });
    res.status(204).end();
  });

  return router;
}
