import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ValidationError } from '../../domain/shared/errors.js';
import { proposeTranslator } from '../../domain/translators/proposal.js';

/**
 * Proposing a translator from what a codec gave for its examples: pure, so
 * given the codec's output directly.
 */
const proposal = suite('Translator import: the proposal from a codec\'s output');

const codecYaml = { uplinkDecoder: { examples: [{ description: 'one frame', input: { fPort: 1, bytes: [1] }, output: { data: {} } }] } };
const decodedAs = (data: Record<string, unknown>) => [{ ok: { data, warnings: [] } }];

proposal('given values that propose one name several times, when proposed, then the repeats are numbered past the names taken, each with a note', () => {
  const { translator, review } = proposeTranslator({ code: '', codecYaml, decoded: decodedAs({ temperature2: 1, temp: 2, Temp: 3, TEMP: 4 }) });
  assert.equal(Object.keys(translator.spec), ['temperature2', 'temperature', 'temperature3', 'temperature4']);
  assert.equal(translator.fieldMap.Temp, { field: 'temperature3', unit: '°C' });
  assert.equal(translator.fieldMap.TEMP, { field: 'temperature4', unit: '°C' });
  assert.is(review.filter((r) => /already proposed for another path: numbered/.test(r.note)).length, 2);
  assert.match(translator.description, "- `temperature3` (°C): the codec's `Temp`");
});

proposal('given a codec giving more values than a spec may declare, when proposed, then it is refused naming the count and the cap', () => {
  const data = Object.fromEntries(Array.from({ length: 501 }, (_unused, i) => [`k${i}`, i]));
  try {
    proposeTranslator({ code: '', codecYaml, decoded: decodedAs(data) });
    assert.unreachable('a proposal with 501 fields was made');
  } catch (error) {
    assert.instance(error, ValidationError);
    assert.is((error as Error).message, 'ERR - code gives 501 values on the examples of codecYaml, more than the 500 fields a spec may declare; declare the spec and fieldMap by hand');
  }
});

proposal('given 500 values that all propose one name, when proposed, then numbering them takes no longer than naming them', () => {
  const data = Object.fromEntries(Array.from({ length: 500 }, (_unused, i) => [`v${' '.repeat(i + 1)}v`, i]));
  const started = performance.now();
  const { translator } = proposeTranslator({ code: '', codecYaml, decoded: decodedAs(data) });
  assert.is(Object.keys(translator.spec).length, 500);
  assert.ok(translator.spec.vV500 !== undefined, Object.keys(translator.spec).slice(-3).join());
  // A generous bound: it fails only if numbering grows far worse than linear in the names that share one.
  assert.ok(performance.now() - started < 5000, `${Math.round(performance.now() - started)} ms`);
});

proposal.run();
