/**
 * The integrations the platform speaks: a closed set. Each names the commands
 * it takes (what `PUT /api/iotnodes/command` and `PUT /api/connectors/command`
 * accept for it) and what each command does to a device's downlink queue.
 * Their adapters (what the network server sends, what it is sent) live in
 * `reactors/integrations/<name>/`; the shapes of their connector settings and
 * command data are schemas in the OpenAPI document.
 */
export const INTEGRATIONS = ['ChirpStack', 'TheThingsStack', 'Generic', 'GenericHttp', 'Loriot', 'ThingPark'] as const;
export type IntegrationName = (typeof INTEGRATIONS)[number];

export const isIntegration = (name: unknown): name is IntegrationName => typeof name === 'string' && (INTEGRATIONS as readonly string[]).includes(name);

/**
 * What a command does, whatever its integration calls it:
 * - `queue`: adds one downlink to the device's queue at the network server;
 * - `read`: reads the device's queue (answered with the items, changes nothing);
 * - `flush`: empties the device's queue;
 * - `publish`: hands a message to a broker (the Generic connector's `sendDownlink`).
 */
export type CommandKind = 'queue' | 'read' | 'flush' | 'publish';

export interface CommandSpec {
  kind: CommandKind;
  /** The OpenAPI schema (`#/components/schemas/<dataSchema>`) of the command's `data`. */
  dataSchema: string;
  /** Where the command is addressed: a device (`PUT /api/iotnodes/command`) or a connector (`PUT /api/connectors/command`). */
  target: 'device' | 'connector';
}

/**
 * The generic form of the spec's LoRa commands: `apiCall` with a `callName`.
 * Every LoRaWAN integration takes it; the data's `callName` picks the kind.
 */
export const API_CALL = 'apiCall';
export const API_CALLS: Record<string, CommandKind> = { sendDownlink: 'queue', getDownlinks: 'read', clearDownlinks: 'flush' };

const LORA_GENERIC: Record<string, CommandSpec> = {
  [API_CALL]: { kind: 'queue', dataSchema: 'ApiCallData', target: 'device' },
};

export const COMMANDS: Record<IntegrationName, Record<string, CommandSpec>> = {
  ChirpStack: {
    loraAppServerQueueDownlink: { kind: 'queue', dataSchema: 'LoraQueueDownlinkData', target: 'device' },
    loraAppServerGetDeviceQueue: { kind: 'read', dataSchema: 'NoCommandData', target: 'device' },
    loraAppServerFlushQueue: { kind: 'flush', dataSchema: 'NoCommandData', target: 'device' },
    ...LORA_GENERIC,
  },
  TheThingsStack: { ...LORA_GENERIC },
  Loriot: { ...LORA_GENERIC },
  ThingPark: { ...LORA_GENERIC },
  Generic: {
    sendDownlink: { kind: 'publish', dataSchema: 'GenericDownlinkData', target: 'connector' },
  },
  GenericHttp: {},
};

/**
 * The kinds of command an integration's network server has no API for, and
 * why: such a command is refused (422) before it is stored, rather than
 * failing at the network server.
 */
export const UNAVAILABLE: Partial<Record<IntegrationName, Partial<Record<CommandKind, string>>>> = {
  Loriot: { read: "LORIOT's API has no read of a device's downlink queue" },
  ThingPark: {
    read: "ThingPark's DX API has no read of a device's downlink queue",
    flush: "ThingPark's DX API empties a device's queue only while it queues a new downlink",
  },
};

/** The kind of a command with its data: `apiCall` takes its kind from `data.callName`. */
export function kindOf(spec: CommandSpec, data: Record<string, unknown>): CommandKind {
  if (spec.dataSchema === 'ApiCallData') return API_CALLS[String(data.callName)] ?? spec.kind;
  return spec.kind;
}

/** A LoRaWAN DevEUI: 16 hexadecimal digits, stored lower case. */
export const DEV_EUI = /^[0-9a-fA-F]{16}$/;
export const normalizeDevEui = (value: string) => value.toLowerCase();
