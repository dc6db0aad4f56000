import { causedId, derivedId } from '../../domain/shared/ids.js';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber, loadCheckpoint, type SubscriberCluster } from '../../domain/eventstore/subscriber.js';
import { comparePositions, type NewEvent, type Position, type RecordedEvent } from '../../domain/shared/events.js';
import { handle, toNewEvent, type CommandContext } from '../../domain/shared/decider.js';
import { NotFoundError } from '../../domain/shared/errors.js';
import { decideReport, deviceStream, type DeviceEvent } from '../../domain/devices/device.js';
import {
  calculationActor,
  calculationDecider,
  calculationStream,
  sourcesOf,
  type CalculationDefinition,
  type CalculationEvent,
  type CalculationState,
} from '../../domain/calculations/calculation.js';
import { lastValueResult, windowResult, type ResultValue } from '../../domain/calculations/aggregate.js';
import { satisfies } from '../../domain/access/scopes.js';
import { scopesOfUser } from '../../projections/access.js';
import type { Principals } from '../../projections/principals.js';
import { OwnerRights } from '../rights.js';
import { historyValues } from '../../projections/devices.js';
import type { Database } from '../../projections/database.js';
import { latestReadings, seedSeries, seriesWindowStats, windowStats } from './readings.js';
import { isoOfMicros, micros, Series, slackOf, WindowMemory, type WindowMemoryStats } from './windows.js';

/** The reactor's checkpoint; migration 0033 starts it at the end of the log of an existing installation. */
export const CALCULATIONS_CHECKPOINT = 'calculations';

/** How long a batch waits for the read models to hold its reports before it is offered again. */
const WAIT_MS = 30_000;

/** The readings the windows in memory may hold, across every series, unless `windowReadings` says otherwise. */
export const WINDOW_READINGS = 2_000_000;

const CALCULATION_EVENTS = new Set(['CalculationCreated', 'CalculationReplaced', 'CalculationHalted', 'CalculationResumed', 'CalculationDeleted']);

type WindowDefinition = Extract<CalculationDefinition, { type: 'window' }>;

/** A calculation as the reactor runs it. */
interface Live {
  id: string;
  owner: string;
  definition: CalculationDefinition;
  /** Why it does not run, or null. */
  halted: string | null;
}

/** One run of one calculation. */
interface Run {
  calc: Live;
  /** The time the result is for: the window's end and the latest readings' bound; the result's `reportedAt`. */
  at: string;
  /** The report that set it off (`onChange`), or null for an interval boundary. */
  trigger: RecordedEvent | null;
}

export interface CalculationReactorDeps {
  store: EventStore;
  db: Kysely<Database>;
  log: Logger;
  /** The projection runner: its name is the read models' checkpoint, which seeds of the windows in memory are read with. */
  projections: { readonly name: string; waitFor(position: Position, timeoutMs: number): Promise<void> };
  /** The platform clock: it decides when an interval boundary has come. */
  clock: () => Date;
  /** The enabled users: a calculation runs only while its owner is one. */
  principals: Principals;
  /** In a cluster: calculations run on the node that leads `calculations`. */
  cluster?: SubscriberCluster | null;
  /** The most readings the windows in memory hold (`WINDOW_READINGS` when left out); 0: every window is aggregated by the database. */
  windowReadings?: number;
}

/**
 * A result's event id, derived from the calculation and what set the run off
 * (the report, or the interval's boundary): a run handled again (a retry, a
 * restart) writes the same event, which the store then ignores.
 */
const resultId = (id: string, run: Run): string => (run.trigger ? causedId(run.trigger.id, [id, run.trigger.id]) : derivedId(id, `interval:${run.at}`));

/**
 * Runs calculations and writes their results back as device reports.
 *
 * `onChange`: follows the event log from its own checkpoint; each report of a
 * source field runs the calculations that read it, over the readings up to
 * that report's `reportedAt` (after waiting for the read models to hold the
 * batch). `interval`: every `pollMs` it looks at the platform clock, and at
 * each boundary (a whole multiple of the interval since the Unix epoch) runs
 * the calculation over the readings up to the boundary.
 *
 * A result is one `ReportDevice` decision on the destination, by the actor
 * `calculation:<id>`, with an event id derived from the calculation and what
 * set it off (the report's event id, or the boundary), so a batch handled
 * again or a boundary run again after a restart stores nothing twice. Runs
 * are checked against the owner's rights at the time: a missing one halts the
 * calculation (`CalculationHalted`, logged on it) until a run finds the rights
 * back (`CalculationResumed`).
 */
export class CalculationReactor {
  readonly subscriber: CheckpointedSubscriber<Database>;
  /** Every live calculation, as of the subscriber's position. */
  private readonly live = new Map<string, Live>();
  /** `<deviceId>/<field>` → the `onChange` calculations that read it. */
  private readonly readers = new Map<string, Set<string>>();
  /** Interval calculation → the boundary (ms) it last ran for, in this process. */
  private readonly ran = new Map<string, number>();
  /** The windows of `onChange` window calculations, as of the subscriber's position (`windows.ts`). */
  private readonly windows: WindowMemory;
  /** The last event whose readings were fed to the windows: a seed must reach it, or it would miss readings. */
  private fed: Position | null = null;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;
  /** The owners as the REST API sees them (enabled, roles), cached until an event that may change them passes. */
  private readonly rights: OwnerRights;

  constructor(
    private readonly deps: CalculationReactorDeps,
    private readonly options: { pollMs?: number } = {},
  ) {
    this.windows = new WindowMemory(deps.windowReadings ?? WINDOW_READINGS);
    this.rights = new OwnerRights(deps.db, deps.principals, deps.projections);
    this.subscriber = new CheckpointedSubscriber<Database>({
      name: CALCULATIONS_CHECKPOINT,
      store: deps.store,
      db: deps.db,
      log: deps.log,
      batchSize: 1000,
      cluster: deps.cluster ?? null,
      handle: (batch) => this.handleBatch(batch),
      // Where this node leads `calculations` (a single process always does): the calculations as of the
      // checkpoint, then the interval clock. In a cluster the clock therefore runs on one node.
      leading: {
        gained: async () => {
          this.rights.clear();
          this.live.clear();
          this.readers.clear();
          this.windows.clear();
          const at = await loadCheckpoint(this.deps.db, CALCULATIONS_CHECKPOINT);
          if (at) await this.load(at);
          this.stopped = false;
          this.timer = setInterval(() => this.poll(), this.options.pollMs ?? 1000);
          this.timer.unref();
          this.poll();
        },
        lost: async () => {
          if (this.timer) clearInterval(this.timer);
          this.timer = null;
          await this.ticking;
          this.windows.clear();
        },
      },
    });
  }

  async start(): Promise<void> {
    await this.subscriber.start();
  }

  /** What the windows in memory hold, and how window runs were answered. */
  windowStats(): WindowMemoryStats {
    return this.windows.stats();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    await this.subscriber.stop();
  }

  /**
   * The calculations live at the checkpoint: every calculation the read model
   * has ever held (deleted ones are kept there), folded from its stream up
   * to the checkpoint. Later events come through the subscriber in order.
   */
  private async load(at: Position): Promise<void> {
    const rows = await this.deps.db.selectFrom('calculations').select('id').execute();
    for (const { id } of rows) {
      let state: CalculationState = calculationDecider.initialState();
      for (const e of await this.deps.store.readStream(calculationStream(id))) {
        if (comparePositions(e.position, at) > 0) break;
        state = calculationDecider.evolve(state, e as unknown as CalculationEvent);
      }
      if (state.status === 'active') this.put({ id, owner: state.createdBy, definition: state.definition, halted: state.halted });
    }
  }

  private put(calc: Live): void {
    this.remove(calc.id);
    this.live.set(calc.id, calc);
    if (calc.definition.schedule.type !== 'onChange') return;
    for (const s of sourcesOf(calc.definition)) {
      const key = `${s.deviceId}/${s.field}`;
      this.readers.set(key, (this.readers.get(key) ?? new Set()).add(calc.id));
      this.refollow(key);
    }
  }

  private remove(id: string): void {
    const calc = this.live.get(id);
    if (!calc) return;
    this.live.delete(id);
    for (const s of sourcesOf(calc.definition)) {
      const key = `${s.deviceId}/${s.field}`;
      const set = this.readers.get(key);
      set?.delete(id);
      if (set?.size === 0) this.readers.delete(key);
      this.refollow(key);
    }
  }

  /** Tells the windows in memory the longest `onChange` window over a series now (0: none). */
  private refollow(key: string): void {
    let horizon = 0;
    for (const id of this.readers.get(key) ?? []) {
      const d = this.live.get(id)?.definition;
      if (d?.type === 'window') horizon = Math.max(horizon, d.window.seconds);
    }
    this.windows.follow(key, horizon);
  }

  private apply(e: CalculationEvent): void {
    const calc = this.live.get(e.data.id);
    switch (e.type) {
      case 'CalculationCreated':
        this.put({ id: e.data.id, owner: e.data.createdBy, definition: e.data.definition, halted: null });
        return;
      case 'CalculationReplaced':
        if (calc) this.put({ ...calc, definition: e.data.definition });
        return;
      case 'CalculationHalted':
        if (calc) calc.halted = e.data.reason;
        return;
      case 'CalculationResumed':
        if (calc) calc.halted = null;
        return;
      case 'CalculationDeleted':
        this.remove(e.data.id);
        return;
      default: {
        const _: never = e;
        return _;
      }
    }
  }

  /** False when the batch neither changes a calculation nor sets one off. */
  private async handleBatch(batch: RecordedEvent[]): Promise<boolean> {
    // A batch that changes rights: the read models hold the change before an owner is checked again.
    await this.rights.follow(batch);
    const runs: Run[] = [];
    let changed = false;
    for (const e of batch) {
      if (CALCULATION_EVENTS.has(e.type)) {
        this.apply(e as unknown as CalculationEvent);
        changed = true;
        continue;
      }
      if (e.type === 'DeviceDeleted' || e.type === 'DeviceRegistered') {
        // The read models drop a deleted device's readings: its series are seeded again, should a run need them.
        this.windows.dropDevice((e.data as { id: string }).id);
        continue;
      }
      if (e.type !== 'DeviceReported' || this.readers.size === 0) continue;
      const report = (e as unknown as DeviceEvent & { type: 'DeviceReported' }).data;
      const started = new Set<string>();
      // The fields a report brings are the ones history keeps: top-level values and dotted paths into nested ones.
      for (const [field, value] of historyValues(report.path, report.payload)) {
        const key = `${report.id}/${field}`;
        this.windows.feed(key, e.position, e.id, report.reportedAt, value, performance.now());
        for (const id of this.readers.get(key) ?? []) {
          // A calculation never runs on its own result; cycles through others are refused when they are defined.
          if (started.has(id) || e.metadata.actor === calculationActor(id)) continue;
          started.add(id);
          runs.push({ calc: { ...this.live.get(id)! }, at: report.reportedAt, trigger: e });
        }
      }
    }
    if (runs.length === 0) return changed;
    this.fed = batch[batch.length - 1]!.position;
    await this.deps.projections.waitFor(this.fed, WAIT_MS);
    await this.execute(runs);
    return true;
  }

  /** Interval boundaries, one look at a time. */
  private poll(): void {
    if (this.ticking || this.stopped) return;
    this.ticking = this.tick()
      .catch((err: unknown) => this.deps.log.error({ err }, 'running interval calculations failed; trying again at the next look'))
      .finally(() => {
        this.ticking = null;
      });
  }

  private async tick(): Promise<void> {
    const now = this.deps.clock().getTime();
    const rows = await this.deps.db
      .selectFrom('calculations')
      .select(['id', 'created_by', 'definition', 'halted', 'updated_at'])
      .where('deleted_at', 'is', null)
      .where('schedule', '=', 'interval')
      .execute();
    const runs: Run[] = [];
    for (const row of rows) {
      const schedule = row.definition.schedule as { type: 'interval'; seconds: number };
      const boundary = Math.floor(now / (schedule.seconds * 1000)) * schedule.seconds * 1000;
      // The first boundary is the first after the definition was set; one missed while the platform was down is run once, late.
      if (boundary <= row.updated_at.getTime() || this.ran.get(row.id) === boundary) continue;
      runs.push({ calc: { id: row.id, owner: row.created_by, definition: row.definition, halted: row.halted }, at: new Date(boundary).toISOString(), trigger: null });
    }
    const current = new Set(rows.map((r) => r.id));
    for (const id of this.ran.keys()) if (!current.has(id)) this.ran.delete(id);
    if (runs.length === 0) return;
    await this.execute(runs);
    for (const r of runs) this.ran.set(r.calc.id, Date.parse(r.at));
  }

  /** Checks the owners' rights, computes every run's value in two statements, and stores the results together. */
  private async execute(runs: Run[]): Promise<void> {
    const allowed = await this.allowed(runs);
    const ready: Run[] = [];
    for (const run of runs) {
      const problem = allowed.get(run);
      if (problem) await this.record(run, { type: 'HaltCalculation', id: run.calc.id, reason: problem, at: this.now() });
      else ready.push(run);
    }
    const values = await this.values(ready);
    const streams = new Map<string, NewEvent[]>();
    for (const [i, run] of ready.entries()) {
      if (this.haltedNow(run.calc) !== null) await this.record(run, { type: 'ResumeCalculation', id: run.calc.id, at: this.now() });
      const value = values[i];
      if (value === null || value === undefined) continue;
      const { id, definition } = run.calc;
      const { events } = decideReport({ type: 'ReportDevice', id: definition.destination.deviceId, source: calculationActor(id), path: [], payload: { [definition.destination.field]: value }, reportedAt: run.at });
      const context = this.context(run);
      const stream = deviceStream(definition.destination.deviceId);
      const list = streams.get(stream) ?? [];
      for (const event of events) list.push(toNewEvent(event, context, resultId(id, run)));
      streams.set(stream, list);
    }
    await this.store(streams);
  }

  /**
   * For each run that may not go ahead, why. Its owner must be an enabled user whose roles allow PUT on `device` (a
   * result is a change of the destination), who can read every source and write the destination, which must exist:
   * the checks a rule's owner passes before it changes a device.
   */
  private async allowed(runs: Run[]): Promise<Map<Run, string>> {
    const owners = new Map<string, string | null>();
    const byOwner = new Map<string, Set<string>>();
    for (const { calc } of runs) {
      if (!owners.has(calc.owner)) {
        const owner = await this.rights.owner(calc.owner);
        owners.set(calc.owner, !owner ? 'its owner no longer exists or is disabled' : (await this.rights.roleAllows(owner, 'device', 'PUT')) ? null : 'its owner has no role that may change devices (PUT on device)');
      }
      if (owners.get(calc.owner)) continue;
      const ids = byOwner.get(calc.owner) ?? new Set();
      for (const s of sourcesOf(calc.definition)) ids.add(s.deviceId);
      ids.add(calc.definition.destination.deviceId);
      byOwner.set(calc.owner, ids);
    }
    const held = new Map<string, Map<string, Set<string>>>();
    for (const [owner, ids] of byOwner) held.set(owner, await scopesOfUser(this.deps.db, owner, [...ids]));
    const destinations = [...new Set(runs.map((r) => r.calc.definition.destination.deviceId))];
    const existing = new Set((await this.deps.db.selectFrom('devices').select('id').where('id', 'in', destinations).execute()).map((r) => r.id));
    const problems = new Map<Run, string>();
    for (const run of runs) {
      const refused = owners.get(run.calc.owner);
      if (refused) {
        problems.set(run, refused);
        continue;
      }
      const scopes = held.get(run.calc.owner)!;
      const d = run.calc.definition;
      const unreadable = sourcesOf(d).find((s) => !satisfies(scopes.get(s.deviceId) ?? [], 'read'));
      if (unreadable) problems.set(run, `its owner cannot read the source iotnode ${unreadable.deviceId}`);
      else if (!existing.has(d.destination.deviceId)) problems.set(run, `the destination iotnode ${d.destination.deviceId} does not exist`);
      else if (!satisfies(scopes.get(d.destination.deviceId) ?? [], 'write')) problems.set(run, `its owner cannot write the destination iotnode ${d.destination.deviceId}`);
    }
    return problems;
  }

  /** Each run's result, or null when there is nothing to write. */
  private async values(runs: Run[]): Promise<(ResultValue | null)[]> {
    const out: (ResultValue | null)[] = new Array(runs.length).fill(null);
    const windows: { i: number; run: Run; d: WindowDefinition }[] = [];
    const lasts: { i: number; run: Run }[] = [];
    runs.forEach((run, i) => (run.calc.definition.type === 'window' ? windows.push({ i, run, d: run.calc.definition as WindowDefinition }) : lasts.push({ i, run })));
    const database = await this.fromMemory(windows, out);
    this.windows.runs.database += database.length;
    // Windows over a series that reported more than once in the batch share one read of its readings; a lone one is aggregated by the database.
    const series = new Map<string, { i: number; run: Run; d: WindowDefinition }[]>();
    for (const w of database) {
      const key = `${w.d.source.deviceId}/${w.d.source.field}/${w.d.window.seconds}`;
      series.set(key, [...(series.get(key) ?? []), w]);
    }
    const lone = [...series.values()].filter((runs) => runs.length === 1).map((runs) => runs[0]!);
    const shared = [...series.values()].filter((runs) => runs.length > 1);
    const [single, many] = await Promise.all([
      windowStats(this.deps.db, lone.map(({ run, d }) => ({ deviceId: d.source.deviceId, field: d.source.field, end: run.at, seconds: d.window.seconds }))),
      seriesWindowStats(this.deps.db, shared.map((runs) => ({ deviceId: runs[0]!.d.source.deviceId, field: runs[0]!.d.source.field, seconds: runs[0]!.d.window.seconds, ends: runs.map(({ run }) => run.at) }))),
    ]);
    lone.forEach(({ i, d }, k) => (out[i] = windowResult(d.aggregation, single[k]!)));
    shared.forEach((runs, k) => runs.forEach(({ i, d }, j) => (out[i] = windowResult(d.aggregation, many[k]![j]!))));
    const queries = lasts.flatMap(({ run }) => sourcesOf(run.calc.definition).map((s) => ({ deviceId: s.deviceId, field: s.field, at: run.at })));
    const readings = await latestReadings(this.deps.db, queries);
    let k = 0;
    for (const { i, run } of lasts) {
      const d = run.calc.definition as Extract<CalculationDefinition, { type: 'lastValue' }>;
      out[i] = lastValueResult(d.aggregation, readings.slice(k, k + d.sources.length));
      k += d.sources.length;
    }
    return out;
  }

  /**
   * Answers the window runs set off by reports from the windows in memory,
   * seeding the series they need first (one snapshot for all); the runs it
   * cannot answer exactly are returned, for the database. Interval runs
   * always go to the database: the clock runs them apart from the log, so
   * the memory, which follows the log, may not hold their readings yet.
   */
  private async fromMemory(windows: { i: number; run: Run; d: WindowDefinition }[], out: (ResultValue | null)[]): Promise<{ i: number; run: Run; d: WindowDefinition }[]> {
    if (!this.windows.enabled) return windows;
    const now = performance.now();
    const rest: { i: number; run: Run; d: WindowDefinition }[] = [];
    const mine: { i: number; d: WindowDefinition; key: string; end: number; run: Run }[] = [];
    for (const w of windows) {
      const end = micros(w.run.at);
      if (w.run.trigger && !Number.isNaN(end)) mine.push({ ...w, key: `${w.d.source.deviceId}/${w.d.source.field}`, end });
      else rest.push(w);
    }
    // The earliest end each series not yet held needs, to seed it from there.
    const seeds = new Map<string, number>();
    for (const { key, end } of mine) if (this.windows.wants(key, now)) seeds.set(key, Math.min(end, seeds.get(key) ?? end));
    if (seeds.size && this.windows.room() > 0) {
      const queries = [...seeds].map(([key, end]) => {
        const horizon = this.windows.horizonOf(key);
        const slash = key.indexOf('/');
        return { key, horizon, from: end - (horizon + slackOf(horizon)) * 1e6, deviceId: key.slice(0, slash), field: key.slice(slash + 1) };
      });
      const limit = this.windows.room();
      const { position, seeds: got } = await seedSeries(this.deps.db, this.deps.projections.name, queries.map((q) => ({ deviceId: q.deviceId, field: q.field, after: isoOfMicros(q.from), limit })));
      // The read models hold the batch before any run (`waitFor`); should they not, the seed would lack readings fed before it.
      const behind = !position || !this.fed || comparePositions(position, this.fed) < 0;
      for (const [k, q] of queries.entries()) {
        const seed = got[k]!;
        if (behind || !seed.exists || seed.unfit) {
          this.windows.drop(q.key, now);
          continue;
        }
        const series = new Series(q.from, position, q.horizon);
        series.seed(seed.rows, seed.before);
        this.windows.admit(q.key, series, now);
      }
    }
    const touched = new Set<string>();
    for (const w of mine) {
      const series = this.windows.get(w.key);
      const stats = series?.stats(w.end - w.d.window.seconds * 1e6, w.end, w.d.aggregation) ?? null;
      if (!series || !stats) {
        rest.push(w);
        continue;
      }
      out[w.i] = windowResult(w.d.aggregation, stats);
      this.windows.runs.memory++;
      series.lastEnd = Math.max(series.lastEnd, w.end);
      touched.add(w.key);
    }
    // Only after every run of the batch: readings one of them needs are never let go before it is answered.
    const clock = this.deps.clock().getTime() * 1000;
    for (const key of touched) this.windows.forget(key, clock);
    return rest;
  }

  /** What the reactor last knew of a calculation's halt: its own record, or what the run was started with. */
  private haltedNow(calc: Live): string | null {
    const live = this.live.get(calc.id);
    return live ? live.halted : calc.halted;
  }

  /** A halt or a resumption, decided on the calculation's stream (the decider drops a repeat); skipped when already so. */
  private async record(run: Run, command: { type: 'HaltCalculation'; id: string; reason: string; at: string } | { type: 'ResumeCalculation'; id: string; at: string }): Promise<void> {
    const halted = this.haltedNow(run.calc);
    if (command.type === 'HaltCalculation' ? halted === command.reason : halted === null) return;
    try {
      const { state } = await handle(this.deps.store, calculationStream(run.calc.id), calculationDecider, command, this.context(run), { retries: 5 });
      const live = this.live.get(run.calc.id);
      if (live && state.status === 'active') live.halted = state.halted;
      run.calc.halted = state.status === 'active' ? state.halted : null;
    } catch (err) {
      // Deleted meanwhile: nothing left to halt or resume.
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  private context(run: Run): CommandContext {
    const context: CommandContext = {
      actor: calculationActor(run.calc.id),
      correlationId: run.trigger ? run.trigger.metadata.correlationId : `calculation:${run.calc.id}:${run.at}`,
      now: this.now(),
    };
    if (run.trigger) context.causationId = run.trigger.id;
    return context;
  }

  private now(): string {
    return this.deps.clock().toISOString();
  }

  /**
   * All results in one append when the store can; when some were stored
   * already (a batch handled again), event by event, so the stored ones are
   * recognised and the others added.
   */
  private async store(streams: Map<string, NewEvent[]>): Promise<void> {
    if (streams.size === 0) return;
    const appends = [...streams].map(([streamId, events]) => ({ streamId, events }));
    if (this.deps.store.appendMany) {
      try {
        await this.deps.store.appendMany(appends);
        return;
      } catch (err) {
        if ((err as { code?: string }).code !== '23505') throw err;
      }
    }
    for (const { streamId, events } of appends) for (const event of events) await this.deps.store.append(streamId, [event], 'any');
  }
}
