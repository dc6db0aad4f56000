import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createSandbox,
  MAX_CODE_BYTES,
  MAX_LOG_LINE_LENGTH,
  MAX_LOG_LINES,
  type Sandbox,
  type TranslatorSpec,
} from '../../sandbox/index.js';
import { climateHex, climateSensor, dailyTemperature, gateway, rejection } from './fixtures.js';

const translate = suite<{ sandbox: Sandbox }>('sandbox: translating');

translate.before((context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
});
translate.after((context) => {
  context.sandbox.dispose();
});

let versions = 0;
/** Loads `code` under a fresh key, so tests never share contexts. */
function load(sandbox: Sandbox, code: string, spec: TranslatorSpec) {
  return sandbox.load({ key: `test-translator@1.0.${versions++}`, code, spec });
}

translate('given a climate sensor decoder, when an uplink arrives on port 1, then it yields temperature, humidity and battery', async ({ sandbox }) => {
  const program = await load(sandbox, climateSensor.code, climateSensor.spec);
  const out = await program.decode({ hexEncoded: climateHex(21.5, 48.5, 3012), port: 1 });
  assert.equal(out, { result: { temperature: 21.5, relativeHumidity: 48.5, batteryVoltage: 3.012 }, logs: [] });
  const cold = await program.decode({ hexEncoded: climateHex(-5.25, 90, 2750), port: 1 });
  assert.equal(cold.result, { temperature: -5.25, relativeHumidity: 90, batteryVoltage: 2.75 });
});

translate('given a climate sensor decoder, when an uplink arrives on another port, then nothing is emitted', async ({ sandbox }) => {
  const program = await load(sandbox, climateSensor.code, climateSensor.spec);
  const out = await program.decode({ hexEncoded: '00', port: 2 });
  assert.equal(out, { result: {}, logs: [] });
});

translate('given a climate sensor decoder, when the payload is short, then the call fails as a runtime error with the line', async ({ sandbox }) => {
  const program = await load(sandbox, climateSensor.code, climateSensor.spec);
  const error = await rejection(program.decode({ hexEncoded: '0102', port: 1 }), 'runtime');
  assert.match(error.message, 'expected 5 bytes, got 2');
  assert.is(error.line, 5);
});

translate('given a chained daily analytics translator, when uplinks arrive over two days, then it accumulates from its own previous output', async ({ sandbox }) => {
  const program = await load(sandbox, dailyTemperature.code, dailyTemperature.spec);
  const parameters = { highAlarmAbove: 24 };
  let iotnode: Record<string, unknown> = { _id: 'a'.repeat(24), name: 'office' };
  const uplinks: Array<[string, number]> = [
    ['2024-05-01T08:00:00Z', 20],
    ['2024-05-01T12:00:00Z', 25],
    ['2024-05-01T18:00:00Z', 21],
    ['2024-05-02T00:30:00Z', 18],
  ];
  const outputs = [];
  for (const [reportedAt, temperature] of uplinks) {
    const out = await program.chain({ ...iotnode, reportedAt, temperature }, parameters);
    iotnode = { ...iotnode, reportedAt, temperature, ...out.result };
    outputs.push(out.result);
  }
  assert.equal(outputs[2], {
    temperatureDay: '2024-05-01',
    temperatureDayCount: 3,
    temperatureDayMax: 25,
    temperatureDayMean: 22,
    temperatureHighAlarm: true,
  });
  assert.equal(outputs[3], {
    temperatureDay: '2024-05-02',
    temperatureDayCount: 1,
    temperatureDayMax: 18,
    temperatureDayMean: 18,
    temperatureHighAlarm: false,
  });
});

translate('given a gateway decoder, when an uplink relays two sensors, then each sensor gets an additional device update', async ({ sandbox }) => {
  const program = await load(sandbox, gateway.code, gateway.spec);
  const out = await program.decode({ hexEncoded: '02' + '0000aa01' + '00d7' + '0000aa02' + 'ffce', port: 1 });
  assert.equal(out, {
    result: { connectedSensors: 2 },
    additionalDeviceUpdates: [
      { identifier: 'sensor-0000aa01', result: { temperature: 21.5 } },
      { identifier: 'sensor-0000aa02', result: { temperature: -5 } },
    ],
    logs: [],
  });
});

translate('given a gateway decoder, when a sub-device result breaks the spec, then the whole translation is rejected naming the path', async ({ sandbox }) => {
  const code = `function translate() {
    return { result: { connectedSensors: 1 }, additionalDeviceUpdates: [{ identifier: 's1', result: { humidity: 40 } }] };
  }`;
  const program = await load(sandbox, code, gateway.spec);
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.is(error.key, 'additionalDeviceUpdates[0].result.humidity');
});

translate('given a gateway decoder, when an update has no identifier, then the translation is rejected', async ({ sandbox }) => {
  const program = await load(sandbox, `function translate() { return { additionalDeviceUpdates: [{ result: { temperature: 1 } }] }; }`, gateway.spec);
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'result');
  assert.is(error.key, 'additionalDeviceUpdates[0].identifier');
});

translate('given lodash and Buffer in the sandbox, when a translator uses them, then they behave like their npm packages', async ({ sandbox }) => {
  const code = `function translate({ encodedData }) {
    const bytes = Buffer.from(encodedData.hexEncoded, 'hex');
    return { result: {
      signed: Buffer.from(encodedData.hexEncoded, 'hex').readInt16BE(0),
      float: _.round(bytes.readFloatLE(2), 2),
      base64: bytes.toString('base64'),
      chunks: _.chunk([1, 2, 3, 4, 5], 2),
      summary: _.pick({ a: 1, b: 2, c: 3 }, ['a', 'c']),
    } };
  }`;
  const spec: TranslatorSpec = { signed: 'number', float: 'number', base64: 'string', chunks: 'array', summary: 'object' };
  const program = await load(sandbox, code, spec);
  const float = Buffer.alloc(4);
  float.writeFloatLE(3.14159);
  const hex = 'ff38' + float.toString('hex');
  const out = await program.decode({ hexEncoded: hex, port: 1 });
  assert.equal(out.result, {
    signed: -200,
    float: 3.14,
    base64: Buffer.from(hex, 'hex').toString('base64'),
    chunks: [[1, 2], [3, 4], [5]],
    summary: { a: 1, c: 3 },
  });
});

translate('given a translator that logs, when it is called, then console.log lines come back with that call only', async ({ sandbox }) => {
  const code = `function translate({ encodedData }) {
    console.log('port', encodedData.port, { hex: encodedData.hexEncoded });
    console.error(new TypeError('shown as text'));
    return {};
  }`;
  const program = await load(sandbox, code, {});
  const first = await program.decode({ hexEncoded: 'ab', port: 3 });
  assert.equal(first.logs, ['port 3 {"hex":"ab"}', 'TypeError: shown as text']);
  const second = await program.decode({ hexEncoded: 'cd', port: 4 });
  assert.equal(second.logs, ['port 4 {"hex":"cd"}', 'TypeError: shown as text']);
});

translate('given a translator that logs without end, when it is called, then the logs are bounded', async ({ sandbox }) => {
  const code = `function translate() {
    console.log('x'.repeat(5000));
    for (let i = 0; i < 1000; i++) console.log('line ' + i);
    return {};
  }`;
  const program = await load(sandbox, code, {});
  const { logs } = await program.decode({ hexEncoded: '', port: 1 });
  assert.is(logs.length, MAX_LOG_LINES + 1);
  assert.is(logs[0]!.length, MAX_LOG_LINE_LENGTH + 1);
  assert.is(logs[1], 'line 0');
  assert.is(logs[MAX_LOG_LINES], `… ${1001 - MAX_LOG_LINES} more log lines dropped`);
});

translate('given a translator that throws after logging, when it is called, then the error carries the logs', async ({ sandbox }) => {
  const program = await load(sandbox, `function translate() { console.log('before'); null.x; }`, {});
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'runtime');
  assert.equal(error.logs, ['before']);
  assert.match(error.message, /TypeError/);
  assert.is(error.line, 1);
});

translate('given the same key and content, when loaded twice, then the same program is returned; new content replaces it', async ({ sandbox }) => {
  const source = { key: 'replaced@1.0.0', code: `function translate() { return { result: { v: 1 } }; }`, spec: { v: 'number' } satisfies TranslatorSpec };
  const first = await sandbox.load(source);
  assert.is(await sandbox.load({ ...source, spec: { v: 'number' } }), first);
  const second = await sandbox.load({ ...source, code: `function translate() { return { result: { v: 2 } }; }` });
  assert.is.not(second, first);
  assert.equal((await second.decode({ hexEncoded: '', port: 1 })).result, { v: 2 });
  try {
    await first.decode({ hexEncoded: '', port: 1 });
    assert.unreachable('the replaced program still ran');
  } catch (error) {
    assert.match(String(error), 'unloaded');
  }
  sandbox.unload('replaced@1.0.0');
  assert.is(sandbox.get('replaced@1.0.0'), undefined);
});

translate('given more translators than the context cap, when each is called, then idle contexts of others are dropped and all still decode', async () => {
  const sandbox = createSandbox({ poolSize: 1, maxContexts: 2 });
  try {
    const programs = [];
    for (let i = 0; i < 3; i++) {
      programs.push(await sandbox.load({ key: `capped-${i}@1.0.0`, code: `function translate() { return { result: { n: ${i} } }; }`, spec: { n: 'number' } }));
      assert.ok(sandbox.stats().contexts <= 2, `contexts ${sandbox.stats().contexts}`);
    }
    for (const [i, program] of programs.entries()) {
      assert.equal((await program.decode({ hexEncoded: '', port: 1 })).result, { n: i });
      assert.ok(sandbox.stats().contexts <= 2, `contexts ${sandbox.stats().contexts}`);
    }
  } finally {
    sandbox.dispose();
  }
  assert.is(sandbox.stats().contexts, 0);
});

translate("given hex strings of every kind, when Buffer.from(…, 'hex') reads them, then it gives the buffer the buffer package's general path gives", async ({ sandbox }) => {
  const cases = ['', '00', '09c43c0b54', '0A0b0C', 'ABCDEF', 'aBcDeF', 'abc', '0g12', 'zz', '12 34', '\u00e912', 'ff'.repeat(40)];
  // 'HEX' is the same encoding to the package, and never takes the table.
  const program = await load(
    sandbox,
    `function translate() {
      ${JSON.stringify(cases)}.forEach(function (s) {
        var read = Buffer.from(s, 'hex'), general = Buffer.from(s, 'HEX');
        console.log(JSON.stringify([Array.from(read), Array.from(general), read instanceof Buffer, read.length > 1 ? read.readUInt16BE(0) : null]));
      });
      return { result: {} };
    }`,
    {},
  );
  const lines = (await program.decode({ hexEncoded: '', port: 1 })).logs.map((line) => JSON.parse(line) as [number[], number[], boolean, number | null]);
  assert.is(lines.length, cases.length);
  lines.forEach(([read, general, isBuffer, first], i) => {
    assert.equal(read, general, `case ${JSON.stringify(cases[i])}`);
    assert.ok(isBuffer, `case ${JSON.stringify(cases[i])} is a Buffer`);
    if (/^([0-9a-f]{2})*$/i.test(cases[i]!)) {
      assert.equal(read, [...Buffer.from(cases[i]!, 'hex')], `case ${JSON.stringify(cases[i])} as Node reads it`);
      if (read.length > 1) assert.is(first, Buffer.from(cases[i]!, 'hex').readUInt16BE(0));
    }
  });
  assert.equal(lines[6]![0], [0xab], 'a trailing odd digit is ignored');
  assert.equal(lines[9]![0], [0x12, 0x03], "the package's own reading of a string that is not all hex digits");
});

translate("given numbers of every size and precisions of every kind, when _.round, _.floor and _.ceil take them, then each gives what lodash's own gives", async ({ sandbox }) => {
  // A fresh lodash (`runInContext`) still has its own rounding, to compare with.
  const program = await load(
    sandbox,
    `function translate() {
      var own = _.runInContext(), seed = 7, checked = 0, differ = [];
      function next() { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; }
      var numbers = [0, -0, 1, -1, 0.5, -0.5, 1.005, 2.675, -2.675, 1e-7, -1e-7, 1.23e21, 5e-324, 1.7976931348623157e308, 4060, -4060, 3.012, NaN, Infinity, -Infinity, '2.345', null];
      for (var i = 0; i < 600; i++) numbers.push((next() - 0.5) * Math.pow(10, Math.floor(next() * 40 - 20)));
      var precisions = [undefined, 0, 1, 2, 3, 4, 7, 15, 20, 292, 300, -1, -2, -5, -300, 1.5, '2', null];
      ['round', 'floor', 'ceil'].forEach(function (name) {
        numbers.forEach(function (x) {
          precisions.forEach(function (p) {
            checked++;
            var mine = _[name](x, p), theirs = own[name](x, p);
            if (!Object.is(mine, theirs) && differ.length < 5) differ.push([name, String(x), String(p), String(mine), String(theirs)]);
          });
        });
      });
      console.log(JSON.stringify({ checked: checked, differ: differ, sample: [_.round(1.005, 2), _.round(4060, -2), _.floor(-0.5, 0), _.ceil(0.0001, 3)] }));
      return { result: {} };
    }`,
    {},
  );
  const out = JSON.parse((await program.decode({ hexEncoded: '', port: 1 })).logs[0]!) as { checked: number; differ: unknown[]; sample: number[] };
  assert.is(out.checked, 3 * 622 * 18);
  assert.equal(out.differ, []);
  assert.equal(out.sample, [1.01, 4100, -1, 0.001]);
});

translate.run();

const upload = suite<{ sandbox: Sandbox }>('sandbox: upload checks');

upload.before((context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
});
upload.after((context) => {
  context.sandbox.dispose();
});

upload('given code with a syntax error, when compiled, then the error names the message and the line', async ({ sandbox }) => {
  const code = `function translate({ encodedData }) {\n  const x = 1;\n  return { result: { x: } };\n}`;
  const error = await rejection(sandbox.compile(code), 'upload');
  assert.match(error.message, /SyntaxError/);
  assert.is(error.line, 3);
  assert.match(error.message, '(line 3');
});

upload('given code that never defines translate, when compiled, then it is rejected', async ({ sandbox }) => {
  const error = await rejection(sandbox.compile(`function decode() { return {}; }`), 'upload');
  assert.match(error.message, 'defines no function named translate or decodeUplink');
  await rejection(sandbox.compile(`var translate = 5;`), 'upload');
});

upload('given translate as a top-level const arrow function, when compiled, then it is accepted', async ({ sandbox }) => {
  await sandbox.compile(`const translate = ({ encodedData }) => ({ result: {} });`);
});

upload('given code just over the size cap, when compiled, then it is rejected before it runs', async ({ sandbox }) => {
  const filler = `// ${'x'.repeat(MAX_CODE_BYTES)}\n`;
  const error = await rejection(sandbox.compile(`${filler}function translate() { return {}; }`), 'upload');
  assert.match(error.message, `${MAX_CODE_BYTES / 1024} KiB`);
  // Measured in UTF-8 bytes: 'é' counts twice.
  await rejection(sandbox.compile(`// ${'é'.repeat(MAX_CODE_BYTES / 2)}\nfunction translate() { return {}; }`), 'upload');
});

upload('given code nested deeper than the host\'s stack lets the engine parse, when compiled, then it is refused at upload and the sandbox goes on', async ({ sandbox }) => {
  const deep = `var x = ${'['.repeat(100_000)}${']'.repeat(100_000)};\nfunction translate() { return {}; }`;
  const error = await rejection(sandbox.compile(deep), 'upload');
  assert.match(error.message, 'the code nests too deeply to be compiled');
  assert.equal(await sandbox.compile('function translate() { return {}; }'), { translate: true, decodeUplink: false, encodeDownlink: false });
});

upload('given code whose top level throws null or an InternalError of its own, when compiled, then it is a runtime error, not a memory failure', async ({ sandbox }) => {
  assert.match((await rejection(sandbox.compile('throw null;\nfunction translate() { return {}; }'), 'runtime')).message, 'Thrown value: null');
  assert.match((await rejection(sandbox.compile('throw new InternalError("out of memory");\nfunction translate() { return {}; }'), 'runtime')).message, 'InternalError: out of memory (line 1');
});

upload('given code whose top level throws, when compiled, then it is a runtime error with the line', async ({ sandbox }) => {
  const error = await rejection(sandbox.compile(`function translate() { return {}; }\nthrow new RangeError('bad setup');`), 'runtime');
  assert.match(error.message, 'RangeError: bad setup');
  assert.is(error.line, 2);
});

upload('given code that imports a module, when compiled, then it is a syntax error', async ({ sandbox }) => {
  await rejection(sandbox.compile(`import fs from 'fs';\nfunction translate() { return {}; }`), 'upload');
});

upload('given an invalid spec, when loaded, then loading fails naming the field', async ({ sandbox }) => {
  const error = await rejection(
    sandbox.load({ key: 'bad-spec@1.0.0', code: climateSensor.code, spec: { temperature: { type: 'number', unit: 'C', quantity: 'temperature' } } as unknown as TranslatorSpec }),
    'upload',
  );
  assert.is(error.key, 'temperature');
  assert.match(error.message, "unit 'C'");
});

upload.run();
