import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkSpec, createSandbox, type Program, type Sandbox, type TranslatorSpec } from '../../sandbox/index.js';
import { climateSensor, rejection } from './fixtures.js';

const specCheck = suite('sandbox: checking a spec at upload');

specCheck('given a spec of type strings and measurement descriptors, when checked, then it has no issues', () => {
  assert.equal(checkSpec(climateSensor.spec), []);
  assert.equal(
    checkSpec({
      lnglat: 'geoJsonPoint',
      errorMessage: 'string',
      measuredAt: 'date',
      doorOpen: 'boolean',
      assetList: 'array',
      assetUpdate: 'object',
      co2: { type: 'number', unit: 'ppm', quantity: 'co2' },
      acceleration: { type: 'number', unit: 'm/s²', quantity: 'acceleration' },
      occupancy: { type: 'number', unit: '', quantity: 'peopleCount' },
    }),
    [],
  );
});

specCheck('given an unknown type, when checked, then the issue names the field and the type', () => {
  assert.equal(checkSpec({ temperature: 'float' }), [
    { field: 'temperature', problem: "has unknown type 'float' (expected one of string, number, boolean, date, object, array, geoJsonPoint)" },
  ]);
});

specCheck('given units that are not accepted SI symbols, when checked, then each is named', () => {
  const issues = checkSpec({
    temperature: { type: 'number', unit: 'C', quantity: 'temperature' },
    pressure: { type: 'number', unit: 'hPa', quantity: 'pressure' },
    volume: { type: 'number', unit: 'm3', quantity: 'volume' },
  });
  assert.equal(issues.map((i) => i.field), ['temperature', 'pressure', 'volume']);
  assert.match(issues[1]!.problem, "unit 'hPa'");
});

specCheck('given a second unit for a kind of quantity that already has one, when checked, then it is refused (conversions belong in the translator)', () => {
  const accepted = { distance: 'm', temperature: '°C', energy: 'kWh', mass: 'kg', volume: 'm³', heading: '°', co2: 'ppm' };
  for (const [quantity, unit] of Object.entries(accepted)) {
    assert.equal(checkSpec({ [quantity]: { type: 'number', unit, quantity } }), [], unit);
  }
  const refused = { distance: 'mm', temperature: 'K', energy: 'Wh', work: 'J', mass: 'g', volume: 'l', heading: 'rad', voc: 'ppb' };
  for (const [quantity, unit] of Object.entries(refused)) {
    const issues = checkSpec({ [quantity]: { type: 'number', unit, quantity } });
    assert.is(issues.length, 1, unit);
    assert.match(issues[0]!.problem, `has unit '${unit}', which is not an accepted SI symbol`);
  }
});

specCheck('given a unit on a non-number, when checked, then it is refused', () => {
  assert.equal(checkSpec({ doorOpen: { type: 'boolean', unit: '', quantity: 'doorOpen' } }), []);
  assert.equal(checkSpec({ doorOpen: { type: 'boolean', unit: '%', quantity: 'doorOpen' } }).length, 1);
});

specCheck('given field names that are not flat lowerCamelCase, when checked, then each is named', () => {
  const issues = checkSpec({ Temperature: 'number', battery_voltage: 'number', 'gps.lat': 'number', '2ndProbe': 'number' });
  assert.equal(issues.map((i) => i.field), ['Temperature', 'battery_voltage', 'gps.lat', '2ndProbe']);
  assert.match(issues[0]!.problem, 'lowerCamelCase');
});

specCheck('given reserved names, when checked, then they are refused', () => {
  const issues = checkSpec({ constructor: 'object', toString: 'string', secret: 'string' });
  assert.equal(issues.map((i) => i.field), ['constructor', 'toString', 'secret']);
  assert.equal(checkSpec(JSON.parse('{"__proto__": "object"}')).map((i) => i.field), ['__proto__']);
});

specCheck('given a descriptor missing its quantity or with extra keys, when checked, then it is refused', () => {
  assert.equal(checkSpec({ temperature: { type: 'number', unit: '°C' } }).map((i) => i.problem), [
    'needs a lowerCamelCase quantity, e.g. temperature or relativeHumidity',
  ]);
  assert.equal(checkSpec({ temperature: { type: 'number', unit: '°C', quantity: 'temperature', scale: 100 } }).length, 1);
  assert.equal(checkSpec({ temperature: { type: 'number', quantity: 'temperature' } }).length, 1);
});

specCheck('given something that is not an object, when checked, then the spec as a whole is refused', () => {
  for (const spec of [null, [], 'number', 42]) {
    assert.equal(checkSpec(spec).map((i) => i.field), ['']);
  }
});

specCheck.run();

/** Every declared type, to check emitted values against. */
const allTypes: TranslatorSpec = {
  label: 'string',
  temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
  doorOpen: 'boolean',
  measuredAt: 'date',
  settings: 'object',
  readings: 'array',
  lnglat: 'geoJsonPoint',
};

const output = suite<{ sandbox: Sandbox; program: Program }>('sandbox: checking output against the spec');

// One translator returns whatever result expression the test passes as `hexEncoded`.
output.before(async (context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
  context.program = await context.sandbox.load({
    key: 'echo@1.0.0',
    code: `function translate({ encodedData }) { return eval('(' + encodedData.hexEncoded + ')'); }`,
    spec: allTypes,
  });
});
output.after((context) => {
  context.sandbox.dispose();
});

function emit(program: Program, expression: string) {
  return program.decode({ hexEncoded: expression, port: 1 });
}

output('given values of every declared type, when emitted, then they pass unchanged', async ({ program }) => {
  const out = await emit(
    program,
    `{ result: { label: 'hall', temperature: -3.5, doorOpen: false, measuredAt: '2024-05-01T12:00:00.123+02:00',
       settings: { a: { b: [1] } }, readings: [1, 'two', null], lnglat: { type: 'Point', coordinates: [13.4, 52.5] } } }`,
  );
  assert.equal(out.result, {
    label: 'hall',
    temperature: -3.5,
    doorOpen: false,
    measuredAt: '2024-05-01T12:00:00.123+02:00',
    settings: { a: { b: [1] } },
    readings: [1, 'two', null],
    lnglat: { type: 'Point', coordinates: [13.4, 52.5] },
  });
});

output('given a Date object for a date field, when emitted, then it arrives as its ISO string', async ({ program }) => {
  const out = await emit(program, `{ result: { measuredAt: new Date(Date.UTC(2024, 4, 1)) } }`);
  assert.equal(out.result, { measuredAt: '2024-05-01T00:00:00.000Z' });
});

output('given undefined and NaN values, when emitted, then those keys are removed and the rest passes', async ({ program }) => {
  const out = await emit(program, `{ result: { temperature: NaN, label: undefined, doorOpen: true, undeclared: undefined } }`);
  assert.equal(out.result, { doorOpen: true });
  assert.equal(Object.keys(out.result), ['doorOpen']);
});

output('given results with nothing written as null, when emitted, then they cross as the cleaned result would: undefined dropped, toJSON and getters honoured, a throwing getter a result error', async ({ program }) => {
  assert.equal((await emit(program, `{ result: { temperature: 20, label: undefined, doorOpen: true } }`)).result, { temperature: 20, doorOpen: true });
  assert.equal((await emit(program, `{ result: { get temperature() { return 21; } } }`)).result, { temperature: 21 });
  const own = await emit(program, `{ result: { temperature: 22 }, toJSON: function () { return { result: { temperature: 99 } }; } }`);
  assert.equal(own.result, { temperature: 99 }, "the returned object's own toJSON is what crosses, as JSON.stringify has it");
  const error = await rejection(emit(program, `{ result: { get temperature() { throw new Error('sensor gone'); } } }`), 'result');
  assert.match(error.message, 'sensor gone');
});

output('given NaN or an infinity inside an object or a list, when emitted, then an infinity anywhere and NaN in a list are refused by their path, NaN under a key is dropped', async ({ program }) => {
  const cases: Array<[string, string]> = [
    [`{ result: { settings: { a: { b: Infinity } } } }`, 'settings.a.b: Infinity is not a finite number'],
    [`{ result: { readings: [1, -Infinity] } }`, 'readings[1]: -Infinity is not a finite number'],
    [`{ result: { readings: [1, { x: [NaN] }] } }`, 'readings[1].x[0]: NaN is not a finite number'],
    [`{ result: { readings: [NaN] }, additionalDeviceUpdates: [] }`, 'readings[0]: NaN is not a finite number'],
  ];
  for (const [expression, why] of cases) {
    const error = await rejection(emit(program, expression), 'spec');
    assert.is(error.message, why, expression);
  }
  assert.equal((await emit(program, `{ result: { settings: { a: NaN, b: 1, c: { d: NaN } } } }`)).result, { settings: { b: 1, c: {} } });
});

output('given a key that is not in the spec, when emitted, then the whole translation is rejected naming the key', async ({ program }) => {
  const error = await rejection(emit(program, `{ result: { temperature: 20, humidity: 40 } }`), 'spec');
  assert.is(error.key, 'humidity');
  assert.match(error.message, "humidity: not declared in the translator's spec");
});

output('given a key that differs only in case, when emitted, then it is rejected', async ({ program }) => {
  const error = await rejection(emit(program, `{ result: { Temperature: 20 } }`), 'spec');
  assert.is(error.key, 'Temperature');
});

output('given null for a declared key, when emitted, then it is rejected', async ({ program }) => {
  const error = await rejection(emit(program, `{ result: { label: null } }`), 'spec');
  assert.is(error.key, 'label');
  assert.match(error.message, 'null');
});

output('given values of the wrong type, when emitted, then each is rejected naming the key and why', async ({ program }) => {
  const cases: Array<[string, string, string]> = [
    [`{ result: { temperature: '21.5' } }`, 'temperature', 'expected number, got string "21.5"'],
    [`{ result: { label: 5 } }`, 'label', 'expected string, got number 5'],
    [`{ result: { doorOpen: 'false' } }`, 'doorOpen', 'expected boolean'],
    [`{ result: { settings: [1] } }`, 'settings', 'expected object, got an array'],
    [`{ result: { readings: { a: 1 } } }`, 'readings', 'expected array, got an object'],
    [`{ result: { measuredAt: 1714564800000 } }`, 'measuredAt', 'ISO 8601'],
    [`{ result: { measuredAt: 'yesterday' } }`, 'measuredAt', 'ISO 8601'],
    [`{ result: { measuredAt: '2024-02-30' } }`, 'measuredAt', 'ISO 8601'],
    [`{ result: { measuredAt: new Date(NaN) } }`, 'measuredAt', 'null'],
    [`{ result: { lnglat: [13.4, 52.5] } }`, 'lnglat', 'GeoJSON point'],
    [`{ result: { lnglat: { type: 'Point', coordinates: [52.5, 113.4] } } }`, 'lnglat', 'latitude 113.4 is outside -90..90'],
    [`{ result: { lnglat: { type: 'Point', coordinates: [200, 10] } } }`, 'lnglat', 'longitude 200'],
    [`{ result: { lnglat: { type: 'Polygon', coordinates: [1, 2] } } }`, 'lnglat', 'got type string "Polygon"'],
    [`{ result: { temperature: Infinity } }`, 'temperature', 'Infinity is not a finite number'],
    [`{ result: { temperature: -Infinity } }`, 'temperature', '-Infinity is not a finite number'],
  ];
  for (const [expression, key, why] of cases) {
    const error = await rejection(emit(program, expression), 'spec');
    assert.is(error.key, key, expression);
    assert.match(error.message, why, `${expression} -> ${error.message}`);
  }
});

output('given return values that are not objects, when returned, then each is a result error', async ({ program }) => {
  for (const expression of ['42', `'text'`, 'null', 'undefined', '[1, 2]', 'true', '(function () {})', 'Promise.resolve({})']) {
    const error = await rejection(emit(program, expression), 'result');
    assert.match(error.message, 'translate must return an object', expression);
  }
});

output('given a result that is not an object, or an unknown top-level key, when returned, then it is a result error', async ({ program }) => {
  await rejection(emit(program, `{ result: 5 }`), 'result');
  await rejection(emit(program, `{ result: [] }`), 'result');
  const error = await rejection(emit(program, `{ results: { temperature: 1 } }`), 'result');
  assert.match(error.message, "unexpected key 'results'");
});

output('given a value JSON cannot carry, when returned, then it is a result error and the context stays usable', async ({ program }) => {
  await rejection(emit(program, `{ result: { temperature: 1n } }`), 'result');
  await rejection(emit(program, `(() => { const o = {}; o.self = o; return { result: { settings: o } }; })()`), 'result');
  assert.equal((await emit(program, `{ result: { temperature: 1 } }`)).result, { temperature: 1 });
  assert.is(program.stats().discarded, 0);
});

output('given an empty return, when returned, then the result is empty', async ({ program }) => {
  assert.equal(await emit(program, '{}'), { result: {}, logs: [] });
  assert.equal(await emit(program, '{ result: {}, additionalDeviceUpdates: [] }'), { result: {}, logs: [] });
});

output.run();
