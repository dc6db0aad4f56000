import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import type { PlatformOptions } from '../../api/platform.js';
import { eventually } from '../ingest/support.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';
import { commandStream } from '../../domain/commands/command.js';
import { saveCheckpoint } from '../../domain/eventstore/subscriber.js';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import { COMMANDS_CHECKPOINT } from '../../reactors/commands/delivery.js';
import { refusing } from '../support/refusing.js';

/**
 * A command's retries, where an attempt's outcome goes missing: the retry
 * looks in the network server's queue before it sends, and a retry asked for
 * by an attempt the read models do not show yet still happens.
 */
const EUI = '70b3d57ed0052c21';
const TOKEN = 'retries-api-token';

interface Ctx {
  t: TestPlatform;
  ns: ChirpStackStandIn;
  databaseUrl: string;
  device: Record<string, any>;
}

/**
 * The first retry 1 s after the first attempt, as in production (the tests see the command wait for it), the next
 * ones after 0.5 s instead of 5 s and more; a request waits 1 s for its outcome instead of 8 s.
 */
const COMMANDS: PlatformOptions = { commandRetry: { delaysMs: [1_000, 500] }, commandWaitMs: 1_000 };

const retries = suite<Ctx>('Command retries whose outcome went missing');

retries.before(async (ctx) => {
  ctx.t = await startTestPlatform({}, COMMANDS);
  ctx.databaseUrl = ctx.t.platform.deps.config.databaseUrl!;
  ctx.ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
  const connector = await ctx.t.call('POST', '/api/connectors', { body: { name: 'network', integration: 'ChirpStack', chirpstack: { url: ctx.ns.url, apiToken: TOKEN } } });
  assert.is(connector.status, 201, connector.text);
  const device = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'valve', connector: connector.body._id, devEui: EUI } });
  assert.is(device.status, 201, device.text);
  ctx.device = device.body;
});
retries.after(async (ctx) => {
  await ctx.t.stop();
  await ctx.ns.stop();
});

const queueDownlink = (t: TestPlatform, deviceId: string, hex: string) =>
  t.call('PUT', '/api/iotnodes/command', { body: { command: 'loraAppServerQueueDownlink', iotnodeId: deviceId, data: { fPort: 4, data: hex } } });
const held = (ns: ChirpStackStandIn, hex: string) => (ns.queues.get(EUI) ?? []).filter((i) => i.data === Buffer.from(hex, 'hex').toString('base64'));
const downlinkOf = async (t: TestPlatform, deviceId: string, commandId: string) =>
  ((await t.call('GET', `/api/iotnodes/${deviceId}/downlinks`)).body as Record<string, any>[]).find((d) => d.commandId === commandId);

/** A command that ChirpStack, down or busy, made wait for its first retry; its read model shows it `pending`. */
async function givenPending(ctx: Ctx, hex: string, mode: 'down' | 'busy'): Promise<string> {
  ctx.ns.mode = mode;
  // The request itself waits for an outcome for several seconds; the retries go on meanwhile.
  const answered = queueDownlink(ctx.t, ctx.device._id, hex);
  const pending = await eventually(async () => {
    const all = (await ctx.t.call('GET', `/api/iotnodes/${ctx.device._id}/downlinks`)).body as Record<string, any>[];
    return all.find((d) => d.data === hex && d.status === 'pending' && d.attempts === 1);
  }, 10_000, 'the command to wait for its first retry');
  void answered.catch(() => undefined);
  return pending.commandId as string;
}

retries('given a retry that reaches ChirpStack but whose outcome the database fails to store once, when it is tried again, then it is found in the queue and not queued twice', async (ctx) => {
  // (busy: a refusal that says the request was not taken, so the retry alone would not look in the queue first)
  const commandId = await givenPending(ctx, 'a1a1', 'busy');
  // Given the next CommandAccepted refused by the database, once,
  const tried = await refusing(ctx.t.platform.deps.db, 'es.events', `NEW.type = 'CommandAccepted'`, async () => {
    // when ChirpStack is back and the retries go on,
    ctx.ns.mode = 'up';
    const queued = await eventually(async () => {
      const d = await downlinkOf(ctx.t, ctx.device._id, commandId);
      return d?.status === 'queued' ? d : undefined;
    }, 20_000, 'the command queued after the failed record');
    // then ChirpStack holds it once, under the id the command shows.
    const items = held(ctx.ns, 'a1a1');
    assert.is(items.length, 1, 'queued once');
    assert.is(queued.networkItemId, items[0]!.id);
  });
  assert.ok(tried >= 2, 'the failed record was retried');
});

retries('given a failed attempt that delivery handled but the read models do not show yet (a node that died in between), when delivery starts, then the retry still happens', async (ctx) => {
  const commandId = await givenPending(ctx, 'b2b2', 'down');
  await ctx.t.stop();
  // Given the state a crash leaves: delivery's checkpoint just past the request, the read model still at `requested`.
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: 1 });
  const direct = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
  try {
    const events = await createPostgresStore(pool).readStream(commandStream(commandId));
    assert.is(events[0]!.type, 'CommandRequested');
    assert.is(events.at(-1)!.type, 'CommandAttemptFailed');
    await saveCheckpoint(direct, COMMANDS_CHECKPOINT, events[0]!.position);
    await sql`UPDATE commands SET status = 'requested', attempts = 0, retry_at = NULL WHERE id = ${commandId}`.execute(direct);
  } finally {
    await direct.destroy();
  }
  // when ChirpStack is up and the platform starts again,
  ctx.ns.mode = 'up';
  ctx.t = await startTestPlatform({ databaseUrl: ctx.databaseUrl }, COMMANDS);
  // then the command is sent and queued once.
  await eventually(async () => held(ctx.ns, 'b2b2').length === 1, 20_000, 'the retry to reach ChirpStack');
  await eventually(async () => (await downlinkOf(ctx.t, ctx.device._id, commandId))?.status === 'queued', 10_000, 'the command queued');
  assert.is(held(ctx.ns, 'b2b2').length, 1, 'queued once');
});

retries.run();
