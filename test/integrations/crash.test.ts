import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '../support/cluster.js';
import { startPlatformProcess, type PlatformProcess } from '../bench/processes.js';
import { eventually } from '../ingest/support.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';

/**
 * The platform as its own process, killed with SIGKILL while a command is on
 * its way to the network server, then started again on the same database:
 * the command, stored before anything left, is delivered after the restart,
 * and queued exactly once, whether the killed attempt never reached the
 * network server or reached it and lost its answer.
 */
const EUI = '70b3d57ed0052b01';
const TOKEN = 'crash-api-token';

const crash = suite('Commands survive a crash');

async function given(ns: ChirpStackStandIn) {
  const databaseUrl = await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'command-crash-'));
  const first = await startPlatformProcess(databaseUrl, dataDir);
  const connector = await first.call<{ _id: string }>('POST', '/api/connectors', { name: 'network', integration: 'ChirpStack', chirpstack: { url: ns.url, apiToken: TOKEN } });
  const device = await first.call<{ _id: string }>('POST', '/api/iotnodes', { name: 'valve', connector: connector._id, devEui: EUI });
  return { databaseUrl, dataDir, first, device };
}

function kill(p: PlatformProcess): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => p.child.once('exit', () => resolve()));
  p.child.kill('SIGKILL');
  return exited;
}

async function commandOnItsWay(p: PlatformProcess, deviceId: string, ns: ChirpStackStandIn): Promise<void> {
  // The answer would come after the wait; the test kills the platform before it.
  void p.call('PUT', '/api/iotnodes/command', { command: 'loraAppServerQueueDownlink', iotnodeId: deviceId, data: { fPort: '5', data: 'c0ffee' } }).catch(() => undefined);
  await eventually(async () => ns.held > 0, 15_000, 'the command to reach the network server');
}

async function deliveredOnce(p: PlatformProcess, deviceId: string, ns: ChirpStackStandIn): Promise<void> {
  const item = await eventually(async () => {
    const items = await p.call<Record<string, unknown>[]>('GET', `/api/iotnodes/${deviceId}/downlinks`);
    return items[0]?.status === 'queued' ? items[0] : undefined;
  }, 30_000, 'the command to be queued after the restart');
  const queue = ns.queues.get(EUI) ?? [];
  assert.is(queue.length, 1, 'queued exactly once');
  assert.is(queue[0]!.data, Buffer.from('c0ffee', 'hex').toString('base64'));
  assert.is(item.networkItemId, queue[0]!.id);
}

crash('when the platform is killed while the network server holds the request unanswered and unprocessed, then after a restart the command is queued once', async () => {
  const ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
  const { databaseUrl, dataDir, first, device } = await given(ns);
  let second: PlatformProcess | null = null;
  try {
    ns.hold = 'before';
    await commandOnItsWay(first, device._id, ns);
    await kill(first);
    assert.is(ns.queues.get(EUI)?.length ?? 0, 0, 'nothing queued before the restart');
    ns.hold = 'none';
    second = await startPlatformProcess(databaseUrl, dataDir);
    await deliveredOnce(second, device._id, ns);
  } finally {
    await kill(first);
    await second?.stop();
    await ns.stop();
  }
});

crash('when the platform is killed after the network server queued the downlink but before its answer came back, then after a restart it is not queued again', async () => {
  const ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
  const { databaseUrl, dataDir, first, device } = await given(ns);
  let second: PlatformProcess | null = null;
  try {
    ns.hold = 'after';
    await commandOnItsWay(first, device._id, ns);
    await kill(first);
    assert.is(ns.queues.get(EUI)?.length, 1, 'the network server queued it before the crash');
    ns.hold = 'none';
    const posts = () => ns.requests.filter((r) => r.method === 'POST').length;
    const before = posts();
    second = await startPlatformProcess(databaseUrl, dataDir);
    await deliveredOnce(second, device._id, ns);
    assert.is(posts(), before, 'the restarted platform found the item and did not queue it again');
  } finally {
    await kill(first);
    await second?.stop();
    await ns.stop();
  }
});

crash.run();
