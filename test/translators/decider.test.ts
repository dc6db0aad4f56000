import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deciderSpec } from '../support/decider.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { translatorDecider, type TranslatorEvent, type TranslatorFields } from '../../domain/translators/translator.js';
import { elsysErsCo2, examplesOf } from './codecs/index.js';

const decider = suite('Translator decider: examples, field maps and versioning');

const at = '2026-01-01T00:00:00.000Z';
const given = (events: TranslatorEvent[]) => deciderSpec(translatorDecider).given(events);

const fields = (overrides: Partial<TranslatorFields> = {}): TranslatorFields => ({
  name: 'elsys',
  version: '1.0.0',
  apiVersion: '1.0',
  description: 'Elsys ERS CO2.',
  match: {},
  parameters: {},
  spec: elsysErsCo2.spec,
  code: elsysErsCo2.codec,
  fieldMap: elsysErsCo2.fieldMap,
  unmapped: 'reject',
  examples: examplesOf(elsysErsCo2),
  ...overrides,
});

const passed = (f: TranslatorFields) => f.examples.map((e) => ({ passed: true, ranAt: at, ...(e.output ? { output: e.output } : {}) }));
const upload = (id: string, f: TranslatorFields, exampleResults = passed(f)) => ({ type: 'UploadTranslator' as const, id, createdBy: 'u1', fields: f, exampleResults, at });

function uploaded(id: string, f: TranslatorFields): TranslatorEvent {
  const [event] = given([]).when(upload(id, f)).events();
  return event!;
}

decider('given no version, when one is uploaded with passing examples, then the event stores each example with its last result', () => {
  const f = fields();
  const [event] = given([]).when(upload('a'.repeat(24), f)).events();
  assert.is(event!.type, 'TranslatorUploaded');
  const data = event!.data as { examples: { lastResult: { passed: boolean } }[]; fieldMap: unknown };
  assert.equal(data.fieldMap, elsysErsCo2.fieldMap);
  assert.is(data.examples.length, f.examples.length);
  assert.ok(data.examples.every((e) => e.lastResult.passed));
});

decider('given no version, when an upload comes with a failing or missing example result, then it is refused', () => {
  const f = fields();
  const failing = passed(f).map((r, i) => (i === 1 ? { ...r, passed: false, problem: 'differs' } : r));
  given([]).when(upload('a'.repeat(24), f, failing)).thenThrows(ValidationError, 'ERR - examples[1] did not pass in the sandbox');
  given([]).when(upload('a'.repeat(24), f, [])).thenThrows(ValidationError, 'ERR - examples did not pass in the sandbox');
});

decider('given 1.0.0, when 1.1.0 changes several fields, then the error lists every change', () => {
  const { temperature, co2, ...rest } = elsysErsCo2.spec;
  void temperature;
  void co2;
  const next = fields({ version: '1.1.0', spec: { ...rest, soundLevel: { type: 'number', unit: 'dB', quantity: 'soundLevel' } }, examples: [] });
  const error = given([uploaded('a'.repeat(24), fields())]).when(upload('b'.repeat(24), next)).thenThrows(ValidationError) as ValidationError;
  assert.equal(error.problems?.map((p) => p.field).sort(), ['spec.co2', 'spec.soundLevel', 'spec.temperature']);
  assert.is(error.message, `ERR - ${error.problems![0]!.field} ${error.problems![0]!.problem}`);
});

decider('given 1.0.0 mapping vdd with scale 0.001, when 1.1.0 scales it by 0.01, then a major release is needed; 2.0.0 is accepted', () => {
  const first = uploaded('a'.repeat(24), fields());
  const rescaled = { ...elsysErsCo2.fieldMap, vdd: { field: 'batteryVoltage', unit: 'V', scale: 0.01 } };
  given([first])
    .when(upload('b'.repeat(24), fields({ version: '1.1.0', fieldMap: rescaled, examples: [] })))
    .thenThrows(ValidationError, /^ERR - spec\.batteryVoltage changed its scaling from ×0\.001 to ×0\.01 compared to version 1\.0\.0/);
  const [major] = given([first]).when(upload('b'.repeat(24), fields({ version: '2.0.0', fieldMap: rescaled, examples: [] }))).events();
  assert.is(major!.type, 'TranslatorUploaded');
  // A map that only renames a source path is the same data model.
  const [minor] = given([first]).when(upload('c'.repeat(24), fields({ version: '1.1.0', fieldMap: { ...elsysErsCo2.fieldMap, light: { field: 'illuminance', unit: 'lx', scale: 1 } }, examples: [] }))).events();
  assert.is(minor!.type, 'TranslatorUploaded');
});

decider('given a version uploaded before field maps existed, when a newer one with a field map follows, then versioning compares the specs alone', () => {
  const legacy = uploaded('a'.repeat(24), fields({ fieldMap: {}, examples: [] }));
  delete (legacy.data as Partial<TranslatorFields>).fieldMap;
  const [event] = given([legacy]).when(upload('b'.repeat(24), fields({ version: '1.1.0', examples: [] }))).events();
  assert.is(event!.type, 'TranslatorUploaded');
});

decider.run();
