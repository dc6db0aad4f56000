import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../domain/eventstore/port.js';
import type { RecordedEvent } from '../domain/shared/events.js';
import { evolveDoc, foldReport, reportableFields, type DeviceDoc, type DeviceEvent } from '../domain/devices/device.js';
import { TRANSLATOR_ERROR_RETENTION_MS } from '../domain/logs/logEntry.js';
import { defaultParameters, type ParameterSpec, type TranslatorEvent } from '../domain/translators/translator.js';
import { preferencesOf, resolveModel, resolvePreference, type Candidate, type TranslatorPreference } from '../domain/translators/preferences.js';
import { parseSemver } from '../domain/translators/semver.js';
import { isTranslatorError, TimeoutBudget, type EncodedData, type FieldMap, type Program, type Sandbox, type Translation as Decoding, type TranslatorSpec, type UnmappedPolicy } from '../sandbox/index.js';
import { RecentMemory } from '../domain/shared/recentMemory.js';
import { TooManyRequestsError, ValidationError } from '../domain/shared/errors.js';
import type { Database } from '../projections/database.js';
import type { Projection } from '../projections/runner.js';
import { LogWriter } from '../domain/logs/writer.js';

/** What the decode stage turns one raw report into. */
export interface Decoded {
  /** The report to store on the device: its own fields, then the decoder's result, then each chained translator's result. */
  payload: DeviceDoc;
  /** Sub-devices a gateway's decoder updated, found by their `secret`. */
  updates: { deviceId: string; payload: DeviceDoc }[];
}

/** The ingest pipeline's view of the decode stage. */
export interface Decoder {
  /** Null, synchronously, when the device runs no translator on this report: it is then stored as it came. */
  decode(deviceId: string, payload: DeviceDoc, receivedAt: string): Promise<Decoded> | null;
  /**
   * The decode of a report that reads nothing of the device's earlier
   * reports (a decoder and no chained translator), which may therefore run
   * before the reports ahead of it are stored; null when it must wait its turn.
   */
  decodeAhead(deviceId: string, payload: DeviceDoc, receivedAt: string): Promise<Decoded> | null;
  /**
   * A decoded report takes its turn, in the order reports are stored: the
   * copies of its sub-devices that chained translators read get their
   * updates now, not when it was decoded (which may be ahead of its turn).
   */
  settled(decoded: Decoded, receivedAt: string): void;
  /** The reports decoded for these devices were not stored after all. */
  forget(deviceIds: Iterable<string>): void;
}

interface Loaded extends Candidate {
  spec: TranslatorSpec;
  code: string;
  fieldMap: FieldMap;
  unmapped: UnmappedPolicy;
  defaults: Record<string, unknown>;
}

interface TranslatorRow {
  id: string;
  name: string;
  version: string;
  createdBy: string;
  match: Record<string, unknown>;
  spec: TranslatorSpec;
  code: string;
  parameters: Record<string, ParameterSpec>;
  fieldMap: FieldMap;
  unmapped: UnmappedPolicy;
}

interface DeviceInfo {
  preferences: TranslatorPreference[] | null;
  model: string | null;
  createdBy: string;
  secret: string | null;
}

interface Strikes {
  /** Times of the recent time-outs, within the window. */
  at: number[];
  /** When the suspension ends; 0 or past when not suspended. */
  until: number;
}

interface Link {
  translator: Loaded;
  parameters: Record<string, unknown>;
}

interface Chain {
  generation: number;
  /** The hardware decoder: the first preference, or the model match; undefined when not (yet) uploaded. */
  decoder: Link | undefined;
  chained: Link[];
}

/**
 * Who a translator's failures on a device count against, besides the device: the translator version on every
 * device of the device's owner (its creator). One owner's many devices cannot make a version stall the platform
 * more often than one device could make it stall for long, and neither that version on other owners' devices
 * nor the owner's other translators stop.
 */
const payerOf = (translatorId: string, info: DeviceInfo) => `${translatorId}\u0000${info.createdBy}`;

/** Device documents kept for chained translators (each reads the device it runs on). */
const MAX_CACHED_DOCS = 20_000;
/** Strike records kept per translator version before stale ones are swept. */
const MAX_STRIKE_RECORDS = 1_000;
/**
 * A translator version that runs into its deadline, or costs the sandbox its
 * warm context (out of memory or stack, an engine fault, promise jobs left
 * pending), this many times within the window on one device's uplinks is
 * suspended for that device for the window: every time-out holds the ingest
 * pipeline for a whole second and every lost context takes tens of
 * milliseconds to rebuild, so one device whose payloads make its decoder loop
 * or exhaust its heap must not stall every other device's data. Strikes count
 * per (translator version, device), so the other devices using the same
 * version keep decoding.
 */
export const SUSPEND_AFTER_TIMEOUTS = 3;
export const SUSPEND_WINDOW_MS = 60_000;
/**
 * A codec's data dropped under `unmapped: drop` is counted per device and
 * translator version, and written to the device's log at most this often:
 * dropping is the declared intent, so one entry per uplink would be noise.
 */
export const DROPPED_LOG_INTERVAL_MS = 3600_000;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * `{...base, ...fields}`: a report with a translator's result merged in, once
 * per uplink. Written as assignments to a fresh literal because V8 (Node 20)
 * gives the copy a spread makes of a parsed payload a hidden class of its own,
 * so every field added after it built new hidden classes again: about 4 µs
 * per uplink for six fields, against well under 1 µs this way, and the
 * merged reports share one hidden class for the code that reads them after.
 * `fields` passed the spec check, so its keys are declared lowerCamelCase
 * names, for which assigning is defining; a payload's own `__proto__` key is
 * defined, never assigned.
 */
function withFields<T extends Record<string, unknown>>(base: T, fields: Record<string, unknown>): T {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(base)) {
    if (key === '__proto__') Object.defineProperty(out, key, { value: base[key], enumerable: true, writable: true, configurable: true });
    else out[key] = base[key];
  }
  for (const key of Object.keys(fields)) out[key] = fields[key];
  return out as T;
}

function encodedDataOf(value: unknown): EncodedData | 'invalid' | null {
  if (value === undefined) return null;
  if (!isRecord(value) || typeof value.hexEncoded !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(value.hexEncoded)) return 'invalid';
  const port = value.port ?? 0;
  if (typeof port !== 'number' || !Number.isFinite(port)) return 'invalid';
  return { hexEncoded: value.hexEncoded, port };
}

/**
 * Decoding at ingest. Which translators a device runs is resolved here, from
 * an in-memory index that a projection keeps current (uploads, deletions,
 * device preferences and model names), so a new upload is picked up by the
 * next uplink. The results are merged into the report before it becomes an
 * event: the event carries the decided fields, and replaying it never runs
 * translator code again.
 *
 * A device with `translatorPreferences` runs the first preference as its
 * hardware decoder, on reports that carry `encodedData: {hexEncoded, port}`,
 * then the others in order on every report on its own topic, each seeing the
 * device with the fields decided so far (and its own earlier output). A
 * device without preferences runs the translator its `deviceModelName`
 * matches as its decoder. The hardware decoder's failure (throw, time-out,
 * memory, spec or result violation) stores the report undecoded and writes a
 * `debug`/`system` log entry on the device kept 6 hours; a chained
 * translator's failure ends the chain, keeps what came before, and logs nothing.
 * A translator version that times out, or costs the sandbox its context,
 * `SUSPEND_AFTER_TIMEOUTS` times within `SUSPEND_WINDOW_MS` on one device is
 * not run for that device for the next window, whatever its payloads (its raw
 * uplinks are stored undecoded, with a log entry), so one device's looping or
 * heap-filling payloads cannot hold up every device's data; other devices
 * keep running the same version.
 *
 * `additionalDeviceUpdates[i].identifier` is the `secret` of a device created
 * by the same user as the gateway (for MQTT devices: the creator of the
 * credentials set); its `result` is stored on that device as its own report.
 */
export class Translation implements Decoder {
  private translators = new Map<string, Loaded>();
  private byName = new Map<string, Set<Loaded>>();
  private devices = new Map<string, DeviceInfo>();
  private bySecret = new Map<string, string>();
  private chains = new Map<string, Chain>();
  private docs = new RecentMemory<string, DeviceDoc>(MAX_CACHED_DOCS);
  private generation = 0;
  /** Translator id → device id → its recent strikes (time-outs, lost contexts) on that device's uplinks, and when its suspension ends. */
  private timeouts = new Map<string, Map<string, Strikes>>();
  /** `<translator id> <device id>` → data dropped since the last log entry about it. */
  private drops = new RecentMemory<string, { since: number; logged: number; count: number; paths: Set<string> }>(MAX_CACHED_DOCS);
  private readonly logs: LogWriter;
  /** Translator calls made, hardware decoders and chained alike. */
  calls = 0;

  constructor(
    store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly sandbox: Sandbox,
    private readonly log: Logger,
    /** Time-outs and lost contexts per translator version and device owner (`sandbox/budget.ts`). */
    private readonly budget: TimeoutBudget = new TimeoutBudget(),
  ) {
    this.logs = new LogWriter(store, log);
  }

  /** Resolves once every log entry the translations wrote so far is appended. */
  logsWritten(): Promise<void> {
    return this.logs.idle();
  }

  async load(): Promise<void> {
    for (const r of await this.db.selectFrom('translators').selectAll().execute()) {
      this.putTranslator({ id: r.id, name: r.name, version: r.version, createdBy: r.created_by, match: r.match, spec: r.spec, code: r.code, parameters: r.parameters, fieldMap: r.field_map, unmapped: r.unmapped });
    }
    const { rows } = await sql<{ id: string; secret: string | null; created_by: string; prefs: unknown; model: string | null }>`
      SELECT id, secret, created_by, doc->'translatorPreferences' AS prefs, doc->>'deviceModelName' AS model FROM devices`.execute(this.db);
    for (const r of rows) this.putDevice(r.id, { preferences: preferencesOf(r.prefs), model: r.model, createdBy: r.created_by, secret: r.secret });
  }

  /** The devices whose preferences or model name currently resolve to this translator version. */
  usersOf(translatorId: string): string[] {
    const users: string[] = [];
    for (const [id, info] of this.devices) {
      if (!info.preferences && !info.model) continue;
      const chain = this.chainOf(id, info);
      if (chain.decoder?.translator.id === translatorId || chain.chained.some((l) => l.translator.id === translatorId)) users.push(id);
    }
    return users;
  }

  /**
   * A downlink's payload encoded by the device's decoder (its first
   * preference, or its model's translator) with the codec's `encodeDownlink`:
   * the command carries an object, and the device model knows its bytes.
   * Throws a `ValidationError` naming `field` when the device has no such
   * translator or the codec refuses the object.
   */
  async encodeDownlink(deviceId: string, data: Record<string, unknown>, fPort: number | undefined, field: string): Promise<{ hexEncoded: string; fPort: number }> {
    const info = this.devices.get(deviceId);
    const link = info ? this.chainOf(deviceId, info).decoder : undefined;
    if (!link) throw ValidationError.field(field, 'needs a translator on the iotnode to encode it (translatorPreferences or deviceModelName); send the payload as hex instead');
    const program = await this.program(link.translator);
    if (!program.encodes) throw ValidationError.field(field, `cannot be encoded: the translator ${link.translator.name} ${link.translator.version.text} defines no encodeDownlink`);
    const payer = payerOf(link.translator.id, info!);
    const blocked = this.budget.blockedUntil(payer);
    if (blocked) throw new TooManyRequestsError(`ERR - ${field} cannot be encoded now: ${link.translator.name} ${link.translator.version.text} is ${this.budgetSpent(blocked)}`, Math.max(1, Math.ceil((blocked - Date.now()) / 1000)));
    try {
      return await program.encode(fPort === undefined ? { data } : { data, fPort });
    } catch (error) {
      if (!isTranslatorError(error)) throw error;
      if (error.kind === 'timeout' || error.discarded) this.budget.charge(payer);
      throw ValidationError.field(field, `was refused by ${link.translator.name} ${link.translator.version.text}: ${error.message}`.slice(0, 1000));
    }
  }

  /** The translator versions a device runs now, decoder first, as `name@version`. */
  resolved(deviceId: string): string[] {
    const info = this.devices.get(deviceId);
    if (!info) return [];
    const chain = this.chainOf(deviceId, info);
    return [chain.decoder, ...chain.chained].filter((l): l is Link => !!l).map((l) => `${l.translator.name}@${l.translator.version.text}`);
  }

  decode(deviceId: string, payload: DeviceDoc, receivedAt: string): Promise<Decoded> | null {
    return this.begin(deviceId, payload, receivedAt, false);
  }

  decodeAhead(deviceId: string, payload: DeviceDoc, receivedAt: string): Promise<Decoded> | null {
    return this.begin(deviceId, payload, receivedAt, true);
  }

  /** Starts a report's decode; `ahead`, only one that reads nothing of the device's earlier reports, and otherwise nothing changes. */
  private begin(deviceId: string, payload: DeviceDoc, receivedAt: string, ahead: boolean): Promise<Decoded> | null {
    const info = this.devices.get(deviceId);
    if (!info || (!info.preferences && !info.model)) return null;
    const chain = this.chainOf(deviceId, info);
    const raw = encodedDataOf(payload.encodedData);
    const decodes = raw !== null && chain.decoder !== undefined;
    if (ahead && (!decodes || chain.chained.length > 0)) return null;
    if (!decodes && chain.chained.length === 0) {
      // The cached document (read by chained translators) would miss this report.
      this.docs.delete(deviceId);
      return null;
    }
    return this.run(deviceId, info, chain, raw, payload, receivedAt).catch((err: unknown) => {
      // A fault of the host, not of a translator: store the report as it came.
      this.log.error({ err, deviceId }, 'decoding an uplink failed');
      return this.undecoded(deviceId, payload, receivedAt);
    });
  }

  settled(decoded: Decoded, receivedAt: string): void {
    for (const { deviceId, payload } of decoded.updates) {
      const cached = this.docs.get(deviceId);
      if (cached) this.docs.set(deviceId, foldReport(cached, deviceId, payload, receivedAt));
    }
  }

  forget(deviceIds: Iterable<string>): void {
    for (const id of deviceIds) this.docs.delete(id);
  }

  private async run(deviceId: string, info: DeviceInfo, chain: Chain, raw: EncodedData | 'invalid' | null, payload: DeviceDoc, receivedAt: string): Promise<Decoded> {
    let merged: DeviceDoc = payload;
    let updates: { identifier: string; result: Record<string, unknown> }[] = [];
    if (raw !== null && chain.decoder) {
      const { translator } = chain.decoder;
      if (raw === 'invalid') {
        this.logFailure(deviceId, translator, 'encodedData must be {hexEncoded: <hex string of whole bytes>, port: <number>}', 'input');
        return this.undecoded(deviceId, payload, receivedAt);
      }
      const suspension = this.suspension(translator.id, deviceId, info);
      if (suspension) {
        this.logFailure(deviceId, translator, `${suspension}; the uplink is stored undecoded`, 'suspended');
        return this.undecoded(deviceId, payload, receivedAt);
      }
      try {
        const loaded = this.program(translator);
        const program = loaded instanceof Promise ? await loaded : loaded;
        this.calls++;
        const out = await program.decode(raw, { receivedAt, parameters: chain.decoder.parameters });
        if (out.discarded) this.strike(translator.id, deviceId, info);
        merged = withFields(payload, out.result);
        updates = out.additionalDeviceUpdates ?? [];
        if (out.warnings || out.dropped) this.logCodecNotes(deviceId, translator, out);
      } catch (error) {
        if (!isTranslatorError(error)) throw error;
        if (error.kind === 'timeout' || error.discarded) this.strike(translator.id, deviceId, info);
        // The sandbox's message already ends with the line and column, when it has them.
        this.logFailure(deviceId, translator, error.message, error.kind, {
          ...(error.key ? { key: error.key } : {}),
          ...(error.codecErrors.length ? { errors: error.codecErrors } : {}),
          ...(error.logs.length ? { console: error.logs } : {}),
        });
        return this.undecoded(deviceId, payload, receivedAt);
      }
    }
    if (chain.chained.length > 0) {
      const doc = await this.docOf(deviceId);
      let iotnode: DeviceDoc = { ...doc, ...reportableFields(merged, false).kept, _id: deviceId, reportedAt: receivedAt };
      for (const link of chain.chained) {
        if (this.suspension(link.translator.id, deviceId, info)) break;
        try {
          const program = await this.program(link.translator);
          this.calls++;
          const out = await program.chain(iotnode, link.parameters);
          if (out.discarded) this.strike(link.translator.id, deviceId, info);
          iotnode = withFields(iotnode, out.result);
          merged = withFields(merged, out.result);
          if (out.additionalDeviceUpdates) updates = [...updates, ...out.additionalDeviceUpdates];
        } catch (error) {
          if (!isTranslatorError(error)) throw error;
          if (error.kind === 'timeout' || error.discarded) this.strike(link.translator.id, deviceId, info);
          break;
        }
      }
      this.docs.set(deviceId, foldReport(doc, deviceId, merged, receivedAt));
    }
    return { payload: merged, updates: this.subDevices(deviceId, info, updates) };
  }

  /**
   * The report is stored as it came (the decoder failed, is suspended, or
   * the encodedData is invalid). Its fields still reach the device, so the
   * cached document that chained translators read is brought up to date with
   * them, as after a decoded report; the read model may not have them yet
   * when the next uplink arrives.
   */
  private undecoded(deviceId: string, payload: DeviceDoc, receivedAt: string): Decoded {
    const cached = this.docs.get(deviceId);
    if (cached) this.docs.set(deviceId, foldReport(cached, deviceId, payload, receivedAt));
    return { payload, updates: [] };
  }

  private subDevices(gatewayId: string, gateway: DeviceInfo, updates: { identifier: string; result: Record<string, unknown> }[]): Decoded['updates'] {
    const out: Decoded['updates'] = [];
    for (const { identifier, result } of updates) {
      const id = this.bySecret.get(identifier);
      const target = id ? this.devices.get(id) : undefined;
      if (!id || !target || target.createdBy !== gateway.createdBy) {
        this.logs.write(
          {
            resourceId: gatewayId,
            resourceType: 'device',
            type: 'debug',
            priority: 'low',
            category: 'system',
            message: `Sub-device update for identifier ${JSON.stringify(identifier.slice(0, 200))} ignored: no device of the same owner has this secret`,
            expiresAt: new Date(Date.now() + TRANSLATOR_ERROR_RETENTION_MS).toISOString(),
          },
          'unknown sub-device',
        );
        continue;
      }
      const { kept } = reportableFields(result, false);
      if (Object.keys(kept).length === 0) continue;
      out.push({ deviceId: id, payload: kept });
    }
    return out;
  }

  /**
   * A codec's `warnings` with a decoded uplink: an entry of the failures'
   * type and category, one priority lower. Data dropped under `unmapped:
   * drop`: counted, and written at most once per DROPPED_LOG_INTERVAL_MS.
   */
  private logCodecNotes(deviceId: string, translator: Loaded, out: Decoding): void {
    const name = `${translator.name} ${translator.version.text}`;
    const data = { translatorId: translator.id, translator: translator.name, version: translator.version.text };
    const expiresAt = new Date(Date.now() + TRANSLATOR_ERROR_RETENTION_MS).toISOString();
    if (out.warnings) {
      this.logs.write(
        { resourceId: deviceId, resourceType: 'device', type: 'debug', priority: 'low', category: 'system', message: `Translator ${name} warned: ${out.warnings.join('; ')}`.slice(0, 2000), expiresAt, data: { ...data, warnings: out.warnings } },
        `translator ${translator.id} warnings`,
      );
    }
    if (out.dropped) {
      const key = `${translator.id} ${deviceId}`;
      const now = Date.now();
      const seen = this.drops.get(key) ?? { since: now, logged: 0, count: 0, paths: new Set<string>() };
      seen.count++;
      for (const path of out.dropped) if (seen.paths.size < 50) seen.paths.add(path);
      if (now - seen.logged >= DROPPED_LOG_INTERVAL_MS) {
        const paths = [...seen.paths];
        this.logs.write(
          {
            resourceId: deviceId,
            resourceType: 'device',
            type: 'debug',
            priority: 'low',
            category: 'system',
            message: `Translator ${name} dropped data neither in its fieldMap nor in its spec from ${seen.count} uplink${seen.count === 1 ? '' : 's'} since ${new Date(seen.since).toISOString()}: ${paths.join(', ')}`.slice(0, 2000),
            expiresAt,
            data: { ...data, dropped: paths, uplinks: seen.count },
          },
          `translator ${translator.id} dropped`,
        );
        this.drops.set(key, { since: now, logged: now, count: 0, paths: new Set() });
      } else {
        this.drops.set(key, seen);
      }
    }
  }

  private logFailure(deviceId: string, translator: Loaded, why: string, kind: string, data: Record<string, unknown> = {}): void {
    const name = `${translator.name} ${translator.version.text}`;
    this.logs.write(
      {
        resourceId: deviceId,
        resourceType: 'device',
        type: 'debug',
        priority: 'medium',
        category: 'system',
        message: `Translator ${name} failed (${kind}): ${why}`.slice(0, 2000),
        expiresAt: new Date(Date.now() + TRANSLATOR_ERROR_RETENTION_MS).toISOString(),
        data: { translatorId: translator.id, translator: translator.name, version: translator.version.text, kind, ...data },
      },
      `translator ${translator.id} ${kind}`,
    );
  }

  /** Why the translator does not run on this device's uplinks now: suspended for the device, or its owner's budget spent; null when it runs. */
  private suspension(translatorId: string, deviceId: string, info: DeviceInfo): string | null {
    const suspended = this.suspendedUntil(translatorId, deviceId);
    if (suspended) {
      return `suspended for this device until ${new Date(suspended).toISOString()} after ${SUSPEND_AFTER_TIMEOUTS} time-outs, or other failures that cost a new sandbox context, on its uplinks within ${SUSPEND_WINDOW_MS / 1000} s`;
    }
    const blocked = this.budget.blockedUntil(payerOf(translatorId, info));
    return blocked ? this.budgetSpent(blocked) : null;
  }

  private budgetSpent(until: number): string {
    return `suspended for every iotnode of this owner until ${new Date(until).toISOString()} after ${this.budget.limit} time-outs, or other failures that cost a new sandbox context, on their uplinks and downlinks within ${this.budget.windowMs / 1000} s`;
  }

  /** A time-out or a lost context: counted for the (translator, device) pair, and for the translator on every device of the device's owner. */
  private strike(translatorId: string, deviceId: string, info: DeviceInfo): void {
    if (this.budget.charge(payerOf(translatorId, info))) this.log.warn({ owner: info.createdBy, translatorId, deviceId }, 'translator suspended for every device of an owner after repeated time-outs or lost sandbox contexts');
    const now = Date.now();
    let devices = this.timeouts.get(translatorId);
    if (!devices) this.timeouts.set(translatorId, (devices = new Map()));
    const entry = devices.get(deviceId) ?? { at: [], until: 0 };
    entry.at = [...entry.at.filter((t) => now - t < SUSPEND_WINDOW_MS), now];
    if (entry.at.length >= SUSPEND_AFTER_TIMEOUTS) {
      entry.until = now + SUSPEND_WINDOW_MS;
      entry.at = [];
      this.log.warn({ translatorId, deviceId }, 'translator suspended for a device after repeated time-outs or lost sandbox contexts');
    }
    devices.set(deviceId, entry);
    if (devices.size > MAX_STRIKE_RECORDS) {
      for (const [id, e] of devices) if (e.until <= now && e.at.every((t) => now - t >= SUSPEND_WINDOW_MS)) devices.delete(id);
    }
  }

  /** When the translator's suspension for this device ends, or 0 when it runs. */
  private suspendedUntil(translatorId: string, deviceId: string): number {
    const devices = this.timeouts.get(translatorId);
    const entry = devices?.get(deviceId);
    if (!entry) return 0;
    const now = Date.now();
    if (entry.until > now) return entry.until;
    if (entry.at.every((t) => now - t >= SUSPEND_WINDOW_MS)) {
      devices!.delete(deviceId);
      if (devices!.size === 0) this.timeouts.delete(translatorId);
    }
    return 0;
  }

  /** The loaded program, as a value when it is (every uplink after the first), so the hot path awaits one promise less. */
  private program(translator: Loaded): Program | Promise<Program> {
    return (
      this.sandbox.get(translator.id) ??
      this.sandbox.load({ key: translator.id, code: translator.code, spec: translator.spec, fieldMap: translator.fieldMap, unmapped: translator.unmapped })
    );
  }

  private async docOf(deviceId: string): Promise<DeviceDoc> {
    const cached = this.docs.get(deviceId);
    if (cached) return cached;
    const row = await this.db.selectFrom('devices').select('doc').where('id', '=', deviceId).executeTakeFirst();
    const doc = row?.doc ?? {};
    this.docs.set(deviceId, doc);
    return doc;
  }

  private chainOf(deviceId: string, info: DeviceInfo): Chain {
    const cached = this.chains.get(deviceId);
    if (cached?.generation === this.generation) return cached;
    const link = (t: Candidate | undefined, preference?: TranslatorPreference): Link | undefined => {
      const translator = t && this.translators.get(t.id);
      return translator && { translator, parameters: { ...translator.defaults, ...(preference?.parameters ?? {}) } };
    };
    let chain: Chain;
    if (info.preferences) {
      const links = info.preferences.map((p) => link(resolvePreference(p, this.byName.get(p.name) ?? []), p));
      chain = { generation: this.generation, decoder: links[0], chained: links.slice(1).filter((l): l is Link => !!l) };
    } else {
      chain = { generation: this.generation, decoder: info.model ? link(resolveModel(info.model, this.translators.values())) : undefined, chained: [] };
    }
    this.chains.set(deviceId, chain);
    return chain;
  }

  private putTranslator(t: TranslatorRow): void {
    const version = parseSemver(t.version);
    if (!version) return;
    const loaded: Loaded = {
      id: t.id,
      name: t.name,
      version,
      createdBy: t.createdBy,
      deviceModelName: typeof t.match.deviceModelName === 'string' ? t.match.deviceModelName : null,
      spec: t.spec,
      code: t.code,
      fieldMap: t.fieldMap,
      unmapped: t.unmapped,
      defaults: defaultParameters(t.parameters),
    };
    this.translators.set(t.id, loaded);
    let set = this.byName.get(t.name);
    if (!set) this.byName.set(t.name, (set = new Set()));
    set.add(loaded);
    this.generation++;
  }

  private dropTranslator(id: string): void {
    const t = this.translators.get(id);
    if (!t) return;
    this.translators.delete(id);
    const set = this.byName.get(t.name);
    set?.delete(t);
    if (set?.size === 0) this.byName.delete(t.name);
    this.sandbox.unload(id);
    this.timeouts.delete(id);
    this.generation++;
  }

  private putDevice(id: string, info: DeviceInfo): void {
    const old = this.devices.get(id);
    if (old?.secret && this.bySecret.get(old.secret) === id) this.bySecret.delete(old.secret);
    this.devices.set(id, info);
    if (info.secret) this.bySecret.set(info.secret, id);
    this.chains.delete(id);
  }

  private dropDevice(id: string): void {
    const old = this.devices.get(id);
    if (old?.secret && this.bySecret.get(old.secret) === id) this.bySecret.delete(old.secret);
    this.devices.delete(id);
    this.chains.delete(id);
    this.docs.delete(id);
    for (const devices of this.timeouts.values()) devices.delete(id);
  }

  /** Keeps the index current; applied by the projection runner in global order. Every step is idempotent. */
  readonly projection: Projection = {
    name: 'translation-index',
    tables: [],
    apply: async (_tx, batch: RecordedEvent[]) => {
      for (const e of batch as (RecordedEvent & (DeviceEvent | TranslatorEvent))[]) {
        switch (e.type) {
          case 'TranslatorUploaded':
            this.putTranslator(e.data);
            break;
          case 'TranslatorDeleted':
            this.dropTranslator(e.data.id);
            break;
          case 'DeviceRegistered': {
            const doc = e.data.doc;
            this.putDevice(e.data.id, {
              preferences: preferencesOf(doc.translatorPreferences),
              model: typeof doc.deviceModelName === 'string' ? doc.deviceModelName : null,
              createdBy: e.data.createdBy,
              secret: typeof doc.secret === 'string' ? doc.secret : null,
            });
            break;
          }
          case 'DeviceUpdated': {
            const info = this.devices.get(e.data.id);
            if (!info) break;
            const { set, unset } = e.data;
            const touches = (k: string) => k in set || unset.includes(k);
            if (touches('translatorPreferences') || touches('deviceModelName') || touches('secret')) {
              this.putDevice(e.data.id, {
                preferences: touches('translatorPreferences') ? preferencesOf(set.translatorPreferences) : info.preferences,
                model: touches('deviceModelName') ? (typeof set.deviceModelName === 'string' ? set.deviceModelName : null) : info.model,
                createdBy: info.createdBy,
                secret: touches('secret') ? (typeof set.secret === 'string' ? set.secret : null) : info.secret,
              });
              this.docs.delete(e.data.id);
            } else {
              const doc = this.docs.get(e.data.id);
              if (doc) this.docs.set(e.data.id, evolveDoc(doc, e));
            }
            break;
          }
          case 'DeviceReported': {
            const info = this.devices.get(e.data.id);
            if (!info) break;
            const { path, payload } = e.data;
            if (path.length === 0 && typeof payload.deviceModelName === 'string' && payload.deviceModelName !== info.model) {
              this.putDevice(e.data.id, { ...info, model: payload.deviceModelName });
              this.docs.delete(e.data.id);
            } else if (path.length > 0) {
              // Reports on the device's own topic that it decodes are already in the cached document.
              const doc = this.docs.get(e.data.id);
              if (doc) this.docs.set(e.data.id, evolveDoc(doc, e));
            }
            break;
          }
          case 'DeviceDeleted':
            this.dropDevice(e.data.id);
            break;
        }
      }
    },
  };
}
