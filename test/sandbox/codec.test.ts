import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  MAX_RESULT_DEPTH,
  checkFieldMap,
  createSandbox,
  formatPath,
  parsePath,
  type FieldMap,
  type Sandbox,
  type TranslatorSource,
  type TranslatorSpec,
} from '../../sandbox/index.js';
import { deviceCodecs, draginoLht65, milesightEm300Th } from '../translators/codecs/index.js';
import { rejection } from './fixtures.js';

const codecs = suite<{ sandbox: Sandbox }>('sandbox: device-repository codecs and field maps');

codecs.before((context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
});
codecs.after((context) => {
  context.sandbox.dispose();
});

let versions = 0;
const load = (sandbox: Sandbox, source: Omit<TranslatorSource, 'key'>) => sandbox.load({ key: `codec@1.0.${versions++}`, ...source });

const energy: TranslatorSpec = {
  activeEnergyImportT1: { type: 'number', unit: 'kWh', quantity: 'activeEnergy' },
  waterTemperature: { type: 'number', unit: '°C', quantity: 'temperature' },
  firstChannel: { type: 'number', unit: 'V', quantity: 'voltage' },
  dotted: 'string',
  serial: 'string',
};
const energyCodec = `function decodeUplink(input) {
  return { data: {
    'Active Energy Import T1': 1234,
    water: { kelvin: 293.15 },
    channels: [{ mV: 3301 }, { mV: 12 }],
    'a.b': { c: 'dotted' },
    serial: 'A1',
  } };
}`;

codecs('given a codec with spaced, nested, array and dotted keys, when a field map names them, then each becomes its canonical field with its conversion', async ({ sandbox }) => {
  const program = await load(sandbox, {
    code: energyCodec,
    spec: energy,
    unmapped: 'drop',
    fieldMap: {
      'Active Energy Import T1': { field: 'activeEnergyImportT1', unit: 'kWh', scale: 0.001 },
      'water.kelvin': { field: 'waterTemperature', unit: '°C', offset: -273.15 },
      'channels[0].mV': { field: 'firstChannel', unit: 'V', scale: 0.001 },
      '["a.b"].c': { field: 'dotted' },
    },
  });
  assert.is(program.decoder, 'decodeUplink');
  const out = await program.decode({ hexEncoded: '', port: 1 });
  // 1234 × 0.001 and 293.15 − 273.15 come out as written, not 1.2340000000000002 and 19.999999999999977.
  assert.equal(out.result, { activeEnergyImportT1: 1.234, waterTemperature: 20, firstChannel: 3.301, dotted: 'dotted', serial: 'A1' });
  assert.equal(out.dropped, ['channels[1]'], 'the unmapped part is reported as dropped, once');
});

codecs('given unmapped: reject (the default), when the codec emits a path neither mapped nor in the spec, then the whole translation is rejected naming it', async ({ sandbox }) => {
  const program = await load(sandbox, { code: energyCodec, spec: energy, fieldMap: { 'Active Energy Import T1': { field: 'activeEnergyImportT1', scale: 0.001 } } });
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.is(error.key, 'water');
  assert.match(error.message, 'neither in the fieldMap nor declared in the spec');
});

codecs('given a codec without a field map, when its keys are in the spec, then they pass through; a null fails as in any result', async ({ sandbox }) => {
  const program = await load(sandbox, { code: `function decodeUplink(i) { return { data: i.fPort === 1 ? { temperature: 21 } : { temperature: null } }; }`, spec: { temperature: 'number' } });
  assert.equal((await program.decode({ hexEncoded: '', port: 1 })).result, { temperature: 21 });
  const error = await rejection(program.decode({ hexEncoded: '', port: 2 }), 'spec');
  assert.match(error.message, 'null is not a valid number');
});

codecs('given omitNull on a map entry, when the codec gives null there, then the field is left out; without it the null is refused with the remedy', async ({ sandbox }) => {
  const code = `function decodeUplink() { return { data: { probe: null, air: 20 } }; }`;
  const spec: TranslatorSpec = { externalTemperature: 'number', temperature: 'number' };
  const omitting = await load(sandbox, { code, spec, fieldMap: { probe: { field: 'externalTemperature', omitNull: true }, air: { field: 'temperature' } } });
  assert.equal((await omitting.decode({ hexEncoded: '', port: 1 })).result, { temperature: 20 });
  const strict = await load(sandbox, { code, spec, fieldMap: { probe: { field: 'externalTemperature' }, air: { field: 'temperature' } } });
  const error = await rejection(strict.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.match(error.message, 'probe (fieldMap to externalTemperature): null is not a valid number (set omitNull: true');
});

codecs('given a scale on a value that is not a number, when decoded, then the translation is rejected naming the path', async ({ sandbox }) => {
  const program = await load(sandbox, { code: `function decodeUplink() { return { data: { vdd: '3600' } }; }`, spec: { batteryVoltage: 'number' }, fieldMap: { vdd: { field: 'batteryVoltage', scale: 0.001 } } });
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.match(error.message, 'vdd (fieldMap to batteryVoltage): scale and offset convert numbers, got string "3600"');
});

codecs('given a mapped field that the codec also emits under its own name, when decoded, then the translation is rejected: one field, one source', async ({ sandbox }) => {
  const program = await load(sandbox, { code: `function decodeUplink() { return { data: { temp: 1, temperature: 2 } }; }`, spec: { temperature: 'number' }, fieldMap: { temp: { field: 'temperature' } } });
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.match(error.message, 'temperature: given both by');
});

codecs('given decodeUplink, when called, then it gets bytes as numbers, fPort, recvTime as a Date and the parameters as variables', async ({ sandbox }) => {
  const program = await load(sandbox, {
    code: `function decodeUplink(input) {
      return { data: { bytes: input.bytes, fPort: input.fPort, isArray: Array.isArray(input.bytes), year: input.recvTime.getUTCFullYear(), limit: input.variables.limit } };
    }`,
    spec: { bytes: 'array', fPort: 'number', isArray: 'boolean', year: 'number', limit: 'number' },
  });
  const out = await program.decode({ hexEncoded: '00ff10', port: 7 }, { receivedAt: '2031-05-01T10:00:00Z', parameters: { limit: 5 } });
  assert.equal(out.result, { bytes: [0, 255, 16], fPort: 7, isArray: true, year: 2031, limit: 5 });
});

codecs('given decodeUplink returning errors, when decoded, then the call fails as a codec error carrying them; warnings travel with a result', async ({ sandbox }) => {
  const program = await load(sandbox, {
    code: `function decodeUplink(input) {
      if (input.fPort === 9) return { errors: ['unknown FPort', 'second'] };
      return { data: { temperature: 1 }, warnings: ['battery low'] };
    }`,
    spec: { temperature: 'number' },
  });
  const error = await rejection(program.decode({ hexEncoded: '', port: 9 }), 'codec');
  assert.equal(error.codecErrors, ['unknown FPort', 'second']);
  assert.is(error.message, 'decodeUplink reported 2 errors: unknown FPort; second');
  const out = await program.decode({ hexEncoded: '', port: 1 });
  assert.equal(out.warnings, ['battery low']);
});

codecs('given data that JSON writes with null in it, when decoded, then real nulls, NaN and infinities are each told apart, whatever else is in the text', async ({ sandbox }) => {
  const program = await load(sandbox, {
    code: `function decodeUplink(input) {
      switch (input.fPort) {
        case 1: return { data: { label: 'nullable', air: 20 } };
        case 2: return { data: { probe: null, air: NaN, soil: 7 } };
        case 3: return { data: { probe: null, depth: [1, NaN, 3] } };
        case 4: return { data: { probe: null, depth: [1, -Infinity] } };
        case 5: return { data: { at: new Date(Date.UTC(2030, 0, 2)), air: 21 }, warnings: [] };
        case 6: return { data: { air: 22 }, errors: [null] };
        case 8: return { data: { air: 24 }, warnings: function () {}, errors: undefined, extra: { get boom() { throw new Error('never read'); } } };
        default: return { data: { probe: null, air: 23 } };
      }
    }`,
    spec: { label: 'string', air: 'number', soil: 'number', depth: 'array', at: 'date', externalTemperature: 'number' },
    fieldMap: { probe: { field: 'externalTemperature', omitNull: true } },
  });
  assert.equal((await program.decode({ hexEncoded: '', port: 1 })).result, { label: 'nullable', air: 20 }, 'a string holding "null" is only a string');
  assert.equal((await program.decode({ hexEncoded: '', port: 2 })).result, { soil: 7 }, 'a null beside a NaN: the NaN is dropped, the null left out by omitNull');
  assert.match((await rejection(program.decode({ hexEncoded: '', port: 3 }), 'spec')).message, 'data.depth[1]: NaN is not a finite number', 'a list keeps its places, so NaN in it cannot be left out');
  assert.match((await rejection(program.decode({ hexEncoded: '', port: 4 }), 'spec')).message, 'data.depth[1]: -Infinity is not a finite number');
  assert.equal((await program.decode({ hexEncoded: '', port: 5 })).result, { at: '2030-01-02T00:00:00.000Z', air: 21 }, 'a Date arrives as its ISO text');
  assert.equal((await rejection(program.decode({ hexEncoded: '', port: 6 }), 'codec')).codecErrors, ['null']);
  assert.equal((await program.decode({ hexEncoded: '', port: 7 })).result, { air: 23 }, 'a real null alone is left out by omitNull');
  const odd = await program.decode({ hexEncoded: '', port: 8 });
  assert.equal([odd.result, odd.warnings], [{ air: 24 }, undefined], 'warnings that are a function are left out, as JSON leaves them; keys other than data, warnings and errors are not read');
});

codecs('given decodeUplink returning a non-object or throwing, when decoded, then each is a clear error and the next uplink decodes', async ({ sandbox }) => {
  const program = await load(sandbox, {
    code: `function decodeUplink(input) {
      switch (input.fPort) {
        case 1: return 42;
        case 2: return { data: [1, 2] };
        case 3: throw new Error('frame too short');
        case 4: return { data: { temperature: NaN, humidity: 50 } };
        case 5: return { data: { nested: { value: Infinity } } };
        default: return { data: { temperature: 20 } };
      }
    }`,
    spec: { temperature: 'number', humidity: 'number' },
    fieldMap: { 'nested.value': { field: 'temperature' } },
  });
  assert.match((await rejection(program.decode({ hexEncoded: '', port: 1 }), 'result')).message, 'decodeUplink must return an object like {data: {...}}, it returned number');
  assert.match((await rejection(program.decode({ hexEncoded: '', port: 2 }), 'result')).message, 'data as an object of values, got an array');
  const thrown = await rejection(program.decode({ hexEncoded: '', port: 3 }), 'runtime');
  assert.match(thrown.message, 'Error: frame too short (line 5');
  assert.equal((await program.decode({ hexEncoded: '', port: 4 })).result, { humidity: 50 }, 'NaN is dropped, as from any result');
  assert.match((await rejection(program.decode({ hexEncoded: '', port: 5 }), 'spec')).message, 'data.nested.value: Infinity is not a finite number');
  assert.equal((await program.decode({ hexEncoded: '', port: 6 })).result, { temperature: 20 });
  assert.is(program.stats().discarded, 0, 'none of these discards the warm context');
});

codecs('given a field map whose scale or offset takes a value past the largest number, when decoded, then the decoding fails naming the path and the conversion', async ({ sandbox }) => {
  const program = await load(sandbox, {
    code: `function decodeUplink(input) { return { data: input.fPort === 1 ? { v: 1e300 } : { w: -1e300 } }; }`,
    spec: { temperature: { type: 'number', unit: '°C', quantity: 'temperature' }, airPressure: { type: 'number', unit: 'Pa', quantity: 'airPressure' } },
    fieldMap: { v: { field: 'temperature', scale: 1e10 }, w: { field: 'airPressure', scale: 1e8, offset: -1e308 } },
  });
  const up = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.is(up.message, 'v (fieldMap to temperature): 1e+300 × 10000000000 + 0 is Infinity, not a finite number');
  assert.is(up.key, 'temperature');
  assert.match((await rejection(program.decode({ hexEncoded: '', port: 2 }), 'spec')).message, 'w (fieldMap to airPressure): -1e+300 × 100000000 + -1e+308 is -Infinity');
});

codecs('given code defining translate beside decodeUplink, when an uplink is decoded, then translate decodes it, as before codecs existed', async ({ sandbox }) => {
  const program = await load(sandbox, {
    code: `function decodeUplink() { return { data: { 'Temp C': 1 } }; }\nfunction translate() { return { result: { temperature: decodeUplink().data['Temp C'] + 1 } }; }`,
    spec: { temperature: 'number' },
  });
  assert.is(program.decoder, 'translate');
  assert.equal((await program.decode({ hexEncoded: '', port: 1 })).result, { temperature: 2 });
});

codecs('given a codec with encodeDownlink, when a downlink is encoded, then it gives hex and port; its errors and bad bytes are codec and result errors', async ({ sandbox }) => {
  const program = await load(sandbox, { code: draginoLht65.codec, spec: draginoLht65.spec, fieldMap: draginoLht65.fieldMap });
  assert.is(program.encodes, true);
  const encoded = await program.encode({ data: { interval: 600 } });
  assert.equal({ hexEncoded: encoded.hexEncoded, fPort: encoded.fPort }, { hexEncoded: '01000258', fPort: 2 });
  const refused = await rejection(program.encode({ data: { interval: -1 } }), 'codec');
  assert.equal(refused.codecErrors, ['interval must be 1 to 16777215 seconds']);

  const odd = await load(sandbox, {
    code: `function decodeUplink() { return {}; }
    function encodeDownlink(input) {
      switch (input.data.kind) {
        case 'buffer': return { bytes: Buffer.from([1, 2]) };
        case 'big': return { bytes: [256], fPort: 1 };
        case 'port': return { bytes: [1], fPort: 0 };
        default: return { bytes: [1] };
      }
    }`,
    spec: {},
  });
  assert.equal((await odd.encode({ data: { kind: 'buffer' }, fPort: 10 })).hexEncoded, '0102', 'a Buffer is taken as bytes, and the asked port used');
  assert.match((await rejection(odd.encode({ data: { kind: 'big' } }), 'result')).message, 'whole numbers 0 to 255');
  assert.match((await rejection(odd.encode({ data: { kind: 'port' } }), 'result')).message, '1 to 223');
  assert.match((await rejection(odd.encode({ data: {} }), 'result')).message, 'no fPort');
  const none = await load(sandbox, { code: `function decodeUplink() { return {}; }`, spec: {} });
  assert.is(none.encodes, false);
  assert.match((await rejection(none.encode({ data: {} }), 'codec')).message, 'no encodeDownlink');
});

codecs('given each of the five real codecs, when their uplinks are decoded through their field maps, then they give the canonical fields', async ({ sandbox }) => {
  for (const codec of deviceCodecs) {
    const program = await load(sandbox, { code: codec.codec, spec: codec.spec, fieldMap: codec.fieldMap, ...(codec.unmapped ? { unmapped: codec.unmapped } : {}) });
    for (const uplink of codec.uplinks) {
      const out = await program.decode({ hexEncoded: uplink.hex, port: uplink.fPort });
      assert.equal(out.result, uplink.canonical, `${codec.name}: ${uplink.description}`);
    }
    if (codec.refused) {
      const error = await rejection(program.decode({ hexEncoded: codec.refused.hex, port: codec.refused.fPort }), 'codec');
      assert.equal(error.codecErrors, codec.refused.errors, codec.name);
    }
    for (const downlink of codec.downlinks ?? []) {
      const out = await program.encode({ data: downlink.data });
      assert.equal({ hexEncoded: out.hexEncoded, fPort: out.fPort }, { hexEncoded: downlink.hexEncoded, fPort: downlink.port }, codec.name);
    }
  }
});

codecs('given a codec that loops on every input, when sampled for an import, then inputs past the examples budget are not run', async () => {
  const sandbox = createSandbox({ poolSize: 1, timeoutMs: 100, examplesBudgetMs: 300 });
  try {
    const uplink = { encodedData: { hexEncoded: '01', port: 1 }, receivedAt: '2024-05-01T00:00:00Z' };
    let turns = 0;
    const timer = setInterval(() => turns++, 1);
    const samples = await sandbox.sample('function decodeUplink() { for (;;) {} }\nfunction encodeDownlink() { for (;;) {} }', {
      uplinks: Array.from({ length: 20 }, () => uplink),
      downlinks: Array.from({ length: 20 }, () => ({ data: {} })),
    });
    clearInterval(timer);
    assert.ok(turns >= 2, `the event loop turned ${turns} times while the examples ran`);
    const all = [...samples.uplinks, ...samples.downlinks];
    const skipped = all.filter((s) => 'error' in s && s.error === 'not run: the examples before it took more than 0.3 s');
    assert.ok(all.slice(0, 2).every((s) => 'error' in s && s.kind === 'timeout' && /timed out/.test(s.error)), JSON.stringify(all.slice(0, 2)));
    assert.ok(skipped.length >= 30, `${skipped.length} of 40 skipped`);
  } finally {
    sandbox.dispose();
  }
});

for (const at of ['upload', 'import'] as const) {
  codecs(`given examples that each take 50 ms, when run at ${at}, then the event loop turns between them and those past the budget are not run`, async () => {
    const sandbox = createSandbox({ poolSize: 1, examplesBudgetMs: 300 });
    try {
      const code = 'function decodeUplink() { var t = Date.now(); while (Date.now() - t < 50) {} return { data: { air: 1 } }; }';
      await sandbox.compile(code);
      // A timer due every millisecond fires at each turn of the event loop: one between every two examples.
      let turns = 0;
      const timer = setInterval(() => turns++, 1);
      const problems =
        at === 'upload'
          ? (await sandbox.check({ code, spec: { air: 'number' } }, Array.from({ length: 20 }, () => ({ input: { hexEncoded: '01', port: 1 }, output: { air: 1 } })), { at: '2024-05-01T00:00:00Z' })).examples.map((e) => e.problem ?? '')
          : (await sandbox.sample(code, { uplinks: Array.from({ length: 20 }, () => ({ encodedData: { hexEncoded: '01', port: 1 }, receivedAt: '2024-05-01T00:00:00Z' })), downlinks: [] })).uplinks.map((u) => ('error' in u ? u.error : ''));
      clearInterval(timer);
      const ran = problems.filter((p) => !/^not run/.test(p)).length;
      assert.ok(turns >= ran - 1, `the event loop turned ${turns} times while ${ran} examples ran`);
      assert.ok(problems.filter((p) => /^not run/.test(p)).length >= 10, problems.join('; '));
    } finally {
      sandbox.dispose();
    }
  });
}

codecs.run();

const storable = suite<{ sandbox: Sandbox }>('sandbox: results must be storable');

storable.before((context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
});
storable.after((context) => {
  context.sandbox.dispose();
});

storable('given results holding NUL, lone surrogates or nesting past the limit, when returned, then each translation is rejected like a spec violation and the next decodes', async ({ sandbox }) => {
  const program = await sandbox.load({
    key: 'storable@1.0.0',
    code: `function translate({ encodedData }) {
      var deep = 'bottom';
      for (var i = 0; i < encodedData.port; i++) deep = { d: deep };
      switch (encodedData.hexEncoded) {
        case '01': return { result: { label: 'a\\u0000b' } };
        case '02': return { result: { label: '\\ud800' } };
        case '03': return { result: { settings: { ok: ['x', '\\udc00y'] } } };
        case '04': return { result: { settings: { ['k\\u0000']: 1 } } };
        case '05': return { result: { settings: deep } };
        default: return { result: { label: 'fine \\ud83d\\ude00' } };
      }
    }`,
    spec: { label: 'string', settings: 'object' },
  });
  const cases: [string, number, string][] = [
    ['01', 0, 'label: contains a NUL character (\\u0000), which cannot be stored'],
    ['02', 0, 'label: contains a lone surrogate'],
    ['03', 0, 'settings.ok[1]: contains a lone surrogate'],
    ['04', 0, 'settings: has a key that contains a NUL character'],
    ['05', MAX_RESULT_DEPTH + 1, `nests deeper than ${MAX_RESULT_DEPTH} levels`],
  ];
  for (const [hex, port, message] of cases) {
    const error = await rejection(program.decode({ hexEncoded: hex, port }), 'spec');
    assert.match(error.message, message);
  }
  // 32 objects, settings itself the outermost: the most allowed.
  assert.ok((await program.decode({ hexEncoded: '05', port: MAX_RESULT_DEPTH })).result.settings);
  assert.equal((await program.decode({ hexEncoded: '00', port: 0 })).result, { label: 'fine 😀' }, 'a surrogate pair is a character like any other');
});

storable('given a codec whose data nests past the limit on a mapped path, when decoded, then it is refused; logs with NUL are made storable', async ({ sandbox }) => {
  const program = await sandbox.load({
    key: 'storable-codec@1.0.0',
    code: `function decodeUplink() {
      console.log('raw \\u0000 \\ud800');
      var deep = 1;
      for (var i = 0; i < 40; i++) deep = { d: deep };
      return { data: { deep: deep, ok: 1 } };
    }`,
    spec: { ok: 'number', deep: 'number' },
    fieldMap: { [`deep${'.d'.repeat(40)}`]: { field: 'deep' } },
  });
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.match(error.message, `nests deeper than ${MAX_RESULT_DEPTH} levels`);
  assert.equal(error.logs, ['raw \ufffd \ufffd']);
});

storable.run();

const maps = suite('sandbox: checking a field map at upload');

const spec: TranslatorSpec = {
  batteryVoltage: { type: 'number', unit: 'V', quantity: 'batteryVoltage' },
  temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
  label: 'string',
};

maps('given paths, when parsed and written back, then keys, indexes and quoted keys round-trip', () => {
  assert.equal(parsePath('a.b[2].c'), ['a', 'b', 2, 'c']);
  assert.equal(parsePath('Active Energy Import T1'), ['Active Energy Import T1']);
  assert.equal(parsePath('["a.b"]["x[0]"].c'), ['a.b', 'x[0]', 'c']);
  for (const path of ['a.b[2].c', 'Active Energy Import T1', '["a.b"].c', '[0].x']) assert.is(formatPath(parsePath(path) as (string | number)[]), path);
  for (const bad of ['', 'a.', 'a..b', 'a[x]', 'a[01]', '["open', 'a]b']) assert.type(parsePath(bad), 'string', bad);
});

maps('given a valid field map, when checked, then it has no issues', () => {
  assert.equal(checkFieldMap(milesightEm300Th.fieldMap, milesightEm300Th.spec), []);
  assert.equal(checkFieldMap({ vdd: { field: 'batteryVoltage', unit: 'V', scale: 0.001 }, 'probe.value': { field: 'temperature', offset: -273.15, omitNull: true } }, spec), []);
});

maps('given a field map with every kind of mistake, when checked, then every problem is named at once', () => {
  const fieldMap = {
    a: { field: 'temperature' },
    b: { field: 'temperature' },
    c: { field: 'reportedAt' },
    d: { field: 'humidity' },
    e: { field: 'batteryVoltage', unit: 'mV', scale: 0.001 },
    f: { field: 'label', scale: 2 },
    'g[x]': { field: 'Not Camel' },
    h: { field: 'batteryVoltage', unit: '%' },
    'n.v': { field: 'label' },
    n: { field: 'label', scale: 0 },
  } as unknown as FieldMap;
  const reserved = (field: string) => (field === 'reportedAt' ? 'is set by the platform' : undefined);
  const issues = checkFieldMap(fieldMap, spec, reserved);
  const problems = issues.map((i) => `${i.field} ${i.problem}`);
  const expect = [
    `fieldMap["b"].field maps to 'temperature', as fieldMap["a"] does`,
    `fieldMap["c"].field maps to 'reportedAt', which is set by the platform`,
    `fieldMap["d"].field maps to 'humidity', which the spec does not declare`,
    `fieldMap["e"].unit is 'mV', which is not an accepted SI symbol`,
    `fieldMap["f"].scale converts numbers, but the spec declares label as string`,
    'fieldMap["g[x]"] has an array index',
    `fieldMap["g[x]"].field maps to 'Not Camel', which is not a flat lowerCamelCase name`,
    `fieldMap["h"].unit is '%' but the spec gives batteryVoltage the unit 'V'`,
    'fieldMap["n"].scale must be a finite number other than 0',
    'fieldMap["n"] is mapped, and so is fieldMap["n.v"] inside it',
  ];
  for (const text of expect) assert.ok(problems.some((p) => p.startsWith(text)), `missing: ${text}\n${problems.join('\n')}`);
});

maps.run();
