import type { Example, FieldMap, TranslatorSpec, UnmappedPolicy } from '../../../sandbox/index.js';

/**
 * A real device's codec in the device-repository form, written for this test
 * suite from the vendor's public payload documentation, with everything a
 * test needs to bring it onto the platform and check what it decodes:
 * - `codec`, `codecYaml`, `deviceYaml`: the files a device repository holds
 *   (the codec's JavaScript, its `*-codec.yaml` with examples in the vendor's
 *   own field names, the device's `*.yaml`);
 * - `fieldMap`, `spec`, `unmapped`: the reviewed mapping onto canonical fields;
 * - `uplinks`: raw frames with the canonical fields they decode to;
 * - `downlinks`: what `encodeDownlink` makes of a command, for codecs that have one.
 * Reusable by any path that decodes uplinks (MQTT, HTTP, network-server integrations).
 */
export interface DeviceCodec {
  /** The translator name it is uploaded under. */
  name: string;
  vendor: string;
  model: string;
  /** The vendor document the codec follows. */
  document: string;
  codec: string;
  codecYaml: string;
  deviceYaml: string;
  spec: TranslatorSpec;
  fieldMap: FieldMap;
  unmapped?: UnmappedPolicy;
  uplinks: { description: string; fPort: number; hex: string; canonical: Record<string, unknown> }[];
  /** A frame the codec refuses, with the errors it reports. */
  refused?: { fPort: number; hex: string; errors: string[] };
  downlinks?: { data: Record<string, unknown>; fPort?: number; hexEncoded: string; port: number }[];
}

/** The reviewed translator's examples: each uplink with its canonical output. */
export function examplesOf(codec: DeviceCodec): Example[] {
  return [
    ...codec.uplinks.map((u) => ({ description: u.description, input: { fPort: u.fPort, bytes: [...Buffer.from(u.hex, 'hex')] }, output: u.canonical })),
    ...(codec.refused ? [{ description: 'refused frame', input: { fPort: codec.refused.fPort, bytes: [...Buffer.from(codec.refused.hex, 'hex')] }, errors: codec.refused.errors }] : []),
  ];
}

/** The upload body of the reviewed translator. */
export function reviewedTranslator(codec: DeviceCodec, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: codec.name,
    version: '1.0.0',
    description: `${codec.vendor} ${codec.model}, decoded by the vendor-format codec.\n\n### Decoded output\n${Object.keys(codec.spec)
      .map((f) => `- \`${f}\``)
      .join('\n')}`,
    match: { deviceModelName: codec.name },
    spec: codec.spec,
    fieldMap: codec.fieldMap,
    ...(codec.unmapped ? { unmapped: codec.unmapped } : {}),
    examples: examplesOf(codec),
    code: codec.codec,
    ...overrides,
  };
}
