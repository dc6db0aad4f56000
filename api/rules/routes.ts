import { Router } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess, scopesOn } from '../access.js';
import type { Principal } from '../../domain/access/principal.js';
import { schemaChecks, type OpenApiDocument } from '../openapi.js';
import { ForbiddenError, ValidationError } from '../../domain/shared/errors.js';
import { newEventId, newResourceId } from '../../domain/shared/ids.js';
import { satisfies } from '../../domain/access/scopes.js';
import { clientFields, PROTECTED_FROM_REPORTS } from '../../domain/devices/device.js';
import { COMMANDS, isIntegration } from '../../domain/integrations/catalog.js';
import { RULE_NOT_FOUND, checkDefinition, referencesOf, ruleDecider, ruleStream, type RuleDefinition, type RuleNode, type RuleState } from '../../domain/rules/rule.js';
import { conditionDevices, decideStart, runDecider, runStream } from '../../domain/rules/run.js';
import type { RulesTable } from '../../projections/rules.js';
import type { Registry } from '../../ingest/registry.js';
import { resourceRevisions } from '../history.js';
import { deviceViews } from '../../reactors/rules/views.js';

const TRIGGER_SCHEMAS: Record<string, string> = { button: 'RuleButtonTrigger', device: 'RuleDeviceTrigger', schedule: 'RuleScheduleTrigger', geofence: 'RuleGeofenceTrigger' };
const ACTION_SCHEMAS: Record<string, string> = { command: 'RuleCommandAction', setField: 'RuleSetFieldAction', channel: 'RuleChannelAction', log: 'RuleLogAction' };
const KIND_NAMES = { device: 'iotnode', geofence: 'geofence', channel: 'channel' } as const;

export const presentRule = (r: RulesTable) => ({
  _id: r.id,
  name: r.name,
  definition: r.definition,
  owner: r.created_by,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  revision: r.revision,
});

/**
 * Rules (rule v2): create, read, replace, delete, and run one from its
 * button trigger. The request validator checks the outer shape; each node's
 * config is checked here against the schema of its kind, the graph by the
 * decider, and what the definition names against the caller's rights, so
 * nobody can make a rule act on something they could not act on themselves.
 */
export function ruleRoutes(deps: Deps, openapi: OpenApiDocument, registry: Registry): Router {
  const router = Router();
  const check = schemaChecks(openapi);

  const configs = (definition: RuleDefinition) => {
    definition.nodes.forEach((node: RuleNode, i) => {
      const at = `definition.nodes.${i}.config`;
      const config = node.config as Record<string, unknown>;
      if (node.type === 'condition') return check('RuleCondition', config, at);
      const [key, schemas] = node.type === 'trigger' ? (['resourceType', TRIGGER_SCHEMAS] as const) : (['action', ACTION_SCHEMAS] as const);
      const schema = typeof config[key] === 'string' ? schemas[config[key] as string] : undefined;
      if (!schema) throw ValidationError.field(`${at}.${key}`, `must be one of ${Object.keys(schemas).join(', ')}`);
      check(schema, config, at);
    });
  };

  /** What the definition names, against the caller's rights; and the actions' own rules that need the platform's state. */
  const references = async (principal: Principal, definition: RuleDefinition) => {
    for (const ref of referencesOf(definition)) {
      const held = await scopesOn(deps, principal, ref.id);
      const name = KIND_NAMES[ref.kind];
      if (!satisfies(held, 'read')) throw ValidationError.field(ref.field, `names no ${name} you can read`);
      if (ref.need === 'write' && !satisfies(held, 'write')) throw new ForbiddenError(`ERR - ${ref.field} names ${name} ${ref.id}, which you may read but not change; a rule acts only on what its writers may change`);
    }
    definition.nodes.forEach((node, i) => {
      if (node.type !== 'action') return;
      const at = `definition.nodes.${i}.config`;
      const config = node.config;
      if (config.action === 'setField') {
        if (PROTECTED_FROM_REPORTS.has(config.field) || config.field === 'rabbitRouting') throw ValidationError.field(`${at}.field`, `${config.field} names or identifies the device and is not set by rules`);
        try {
          clientFields({ [config.field]: config.value }, false);
        } catch (error) {
          if (error instanceof ValidationError) throw new ValidationError(error.message.replace(/^ERR - \S+/, `ERR - ${at}.value`));
          throw error;
        }
      }
      if (config.action === 'command') {
        // Checked now where the integration is known; otherwise when the rule runs, as a request would be.
        const connector = registry.connector(String(registry.bindingOf(config.iotnodeId).connector ?? ''));
        const integration = config.integrationName ?? connector?.integration;
        if (!integration || !isIntegration(integration)) return;
        const spec = COMMANDS[integration][config.command];
        if (!spec) throw ValidationError.field(`${at}.command`, `is not a command of the ${integration} integration; it takes ${Object.keys(COMMANDS[integration]).join(', ') || 'none'}`);
        if (spec.target !== 'device') throw ValidationError.field(`${at}.command`, `${config.command} is a connector command`);
        check(spec.dataSchema, config.data ?? {}, `${at}.data`);
      }
    });
  };

  const load = (id: string) => deps.db.selectFrom('rules_v2').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  router.post('/api/rules-v2', async (req, res) => {
    const { name, definition } = req.body as { name: string; definition: RuleDefinition };
    const principal = principalOf(req);
    configs(definition);
    checkDefinition(definition, deps.clock());
    await references(principal, definition);
    const id = newResourceId();
    const context = requestContext(deps, req);
    await write(deps, context, ruleStream(id), ruleDecider, { type: 'CreateRule', id, createdBy: principal.id, name, definition, at: context.now });
    res.status(201).json(presentRule(await load(id)));
  });

  router.get('/api/rules-v2', async (req, res) => {
    const principal = principalOf(req);
    const limit = Number(req.query.limit ?? 100);
    const offset = Number(req.query.offset ?? 0);
    const rows = await deps.db.selectFrom('rules_v2').selectAll().where(readableBy(principal, 'rules_v2.id')).orderBy('name').orderBy('id').limit(limit).offset(offset).execute();
    if (req.query.options === 'count') {
      const { rows: count } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM rules_v2 WHERE ${readableBy(principal, 'rules_v2.id')}`.execute(deps.db);
      res.setHeader('X-Total-Count', String(count[0]!.n));
    }
    res.json(rows.map(presentRule));
  });

  router.get('/api/rules-v2/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', RULE_NOT_FOUND);
    res.json(presentRule(await load(id)));
  });

  router.get('/api/rules-v2/:id/revisions', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', RULE_NOT_FOUND);
    const view = (s: RuleState) => (s.status === 'active' ? { name: s.name, definition: s.definition, owner: s.createdBy } : undefined);
    res.json(await resourceRevisions(deps, ruleStream(id), ruleDecider, view));
  });

  router.put('/api/rules-v2/:id', async (req, res) => {
    const id = req.params.id as string;
    const principal = principalOf(req);
    await requireAccess(deps, principal, id, 'write', RULE_NOT_FOUND);
    const { name, definition } = req.body as { name: string; definition: RuleDefinition };
    configs(definition);
    checkDefinition(definition, deps.clock());
    await references(principal, definition);
    const context = requestContext(deps, req);
    // A whole replacement: the last writer wins, so a concurrent change is decided again.
    await write(deps, context, ruleStream(id), ruleDecider, { type: 'ReplaceRule', id, name, definition, at: context.now }, { retries: 3 });
    res.json(presentRule(await load(id)));
  });

  router.delete('/api/rules-v2/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', RULE_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, ruleStream(id), ruleDecider, { type: 'DeleteRule', id, at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  router.post('/api/rules-v2/:id/execute', async (req, res) => {
    const id = req.params.id as string;
    const principal = principalOf(req);
    await requireAccess(deps, principal, id, 'write', RULE_NOT_FOUND);
    const { triggerNodeId } = req.body as { triggerNodeId: string };
    const rule = await load(id);
    const node = rule.definition.nodes.find((n) => n.id === triggerNodeId);
    if (!node) throw ValidationError.field('triggerNodeId', `'${triggerNodeId}' names no node of rule ${id}`);
    if (node.type !== 'trigger' || node.config.resourceType !== 'button') throw ValidationError.field('triggerNodeId', `'${triggerNodeId}' is not a button trigger (its type is ${node.type === 'trigger' ? `a ${node.config.resourceType} trigger` : node.type}); only a trigger with resourceType button is run by execute`);
    const owner = await deps.principals.get(rule.created_by);
    const views = await deviceViews(deps.db, owner, conditionDevices(rule.definition));
    const context = requestContext(deps, req);
    const runId = newEventId();
    const run = decideStart({ id, name: rule.name, owner: rule.created_by, definition: rule.definition }, { type: 'button', nodeId: triggerNodeId, userId: principal.id }, runId, 0, context.now, {
      device: (deviceId) => views.get(deviceId) ?? { doc: null, why: `iotnode ${deviceId} does not exist` },
      changed: () => false,
    });
    await write(deps, context, runStream(runId), runDecider, { type: 'StartRun', run }, { eventIds: [runId] });
    res.status(202).json({ runId, status: run.actions.length ? 'started' : 'conditionsNotMet', actions: run.actions.map((a) => a.nodeId), conditions: run.conditions });
  });

  return router;
}
