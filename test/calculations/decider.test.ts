import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deciderSpec } from '../support/decider.js';
import {
  calculationDecider,
  feedbackPath,
  type CalculationDefinition,
  type CalculationEvent,
  type CalculationLink,
} from '../../domain/calculations/calculation.js';
import { lastValueResult, windowResult, type WindowStats } from '../../domain/calculations/aggregate.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';

const at = '2026-03-01T10:00:00.000Z';
const later = '2026-03-01T11:00:00.000Z';
const id = 'c0000000000000000000000a';
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const [a, b, c] = ['d0000000000000000000000a', 'd0000000000000000000000b', 'd0000000000000000000000c'];

const sum: CalculationDefinition = {
  name: 'total',
  type: 'lastValue',
  sources: [{ deviceId: a, field: 'power' }, { deviceId: b, field: 'power' }],
  destination: { deviceId: c, field: 'totalPower' },
  aggregation: 'sum',
  schedule: { type: 'onChange' },
};
const hourly: CalculationDefinition = {
  name: 'hourly',
  type: 'window',
  source: { deviceId: a, field: 'temperature' },
  window: { seconds: 3600 },
  destination: { deviceId: c, field: 'temperatureHour' },
  aggregation: 'mean',
  schedule: { type: 'interval', seconds: 600 },
};

const created: CalculationEvent = { type: 'CalculationCreated', data: { id, createdBy: owner, definition: sum, at } };
const create = (definition: CalculationDefinition, others: CalculationLink[] = []) => ({ type: 'CreateCalculation' as const, id, definition, createdBy: owner, others, at });
const link = (lid: string, from: [string, string][], to: [string, string]): CalculationLink => ({
  id: lid,
  name: `calc ${lid.slice(-1)}`,
  sources: from.map(([deviceId, field]) => ({ deviceId, field })),
  destination: { deviceId: to[0], field: to[1] },
});

const deciders = suite('calculation decider');

deciders('given nothing, when a calculation is created, then CalculationCreated with its owner and definition', () => {
  deciderSpec(calculationDecider).given([]).when(create(sum)).then([created]);
});

deciders('given a chain of eight calculations, each reading the result of the one before, when a ninth reads the last result, then 422 names the chain', () => {
  const chain = Array.from({ length: 8 }, (_, i) => link(`c${i}`, [[a, `f${i}`]], [a, `f${i + 1}`]));
  deciderSpec(calculationDecider)
    .given([])
    .when(create({ ...sum, sources: [{ deviceId: a, field: 'f8' }], destination: { deviceId: a, field: 'f9' } }, chain))
    .thenThrows(ValidationError, `ERR - destination would make a chain of 9 calculations from ${a}/f0 (each reading the result of the one before); at most 8 are allowed`);
  // Eight long is allowed.
  deciderSpec(calculationDecider).given([]).when(create({ ...sum, sources: [{ deviceId: a, field: 'f7' }], destination: { deviceId: b, field: 'g' } }, chain.slice(0, 7))).events();
});

deciders('given layers of calculations, each reading every result of the layer before, when one more would let one report set off more than 1,000 runs, then 422 names the field', () => {
  // 30 read a.x; 30 more read all 30 results: one report of a.x sets off 30 × (1 + 30) = 930 runs.
  const first = Array.from({ length: 30 }, (_, i) => link(`l1-${i}`, [[a, 'x']], [b, `y${i}`]));
  const second = Array.from({ length: 30 }, (_, j) => link(`l2-${j}`, first.map((_, i) => [b, `y${i}`] as [string, string]), [c, `z${j}`]));
  const readsAll = (destination: string) => ({ ...sum, sources: first.map((_, i) => ({ deviceId: b, field: `y${i}` })), destination: { deviceId: c, field: destination } });
  // A 31st in the second layer: 30 × (1 + 31) = 960 runs, allowed.
  deciderSpec(calculationDecider).given([]).when(create(readsAll('z30'), [...first, ...second])).events();
  // With three more there already, the same one would make 30 × (1 + 34) = 1,050: refused.
  deciderSpec(calculationDecider)
    .given([])
    .when(create(readsAll('z30'), [...first, ...second, ...Array.from({ length: 3 }, (_, k) => link(`l2-extra-${k}`, first.map((_, i) => [b, `y${i}`] as [string, string]), [c, `w${k}`]))]))
    .thenThrows(ValidationError, `ERR - sources would let one report of ${a}/x set off 1050 calculation runs (the calculations that read it, those that read their results, and so on); at most 1000 are allowed`);
});

deciders('given a calculation, when it is created again, then a conflict', () => {
  deciderSpec(calculationDecider).given([created]).when(create(sum)).thenThrows(ConflictError);
});

deciders('given a calculation, when it is replaced by another type, then CalculationReplaced with the new definition', () => {
  deciderSpec(calculationDecider)
    .given([created])
    .when({ type: 'ReplaceCalculation', id, definition: hourly, others: [], at: later })
    .then([{ type: 'CalculationReplaced', data: { id, definition: hourly, at: later } }]);
});

deciders('given a deleted calculation, when it is replaced, halted or deleted, then not found', () => {
  const gone = deciderSpec(calculationDecider).given([created, { type: 'CalculationDeleted', data: { id, at: later } }]);
  gone.when({ type: 'ReplaceCalculation', id, definition: hourly, others: [], at: later }).thenThrows(NotFoundError, 'Calculation not found');
  gone.when({ type: 'HaltCalculation', id, reason: 'x', at: later }).thenThrows(NotFoundError);
  gone.when({ type: 'DeleteCalculation', id, at: later }).thenThrows(NotFoundError);
});

deciders('given a running calculation, when it is halted, then CalculationHalted; halted again for the same reason, then nothing', () => {
  const halted: CalculationEvent = { type: 'CalculationHalted', data: { id, reason: `its owner cannot read the source iotnode ${a}`, at: later } };
  deciderSpec(calculationDecider).given([created]).when({ type: 'HaltCalculation', id, reason: halted.data.reason, at: later }).then([halted]);
  deciderSpec(calculationDecider).given([created, halted]).when({ type: 'HaltCalculation', id, reason: halted.data.reason, at: later }).then([]);
  deciderSpec(calculationDecider)
    .given([created, halted])
    .when({ type: 'HaltCalculation', id, reason: 'the destination iotnode x does not exist', at: later })
    .then([{ type: 'CalculationHalted', data: { id, reason: 'the destination iotnode x does not exist', at: later } }]);
});

deciders('given a halted calculation, when it is resumed, then CalculationResumed; a running one resumed, then nothing', () => {
  const halted: CalculationEvent = { type: 'CalculationHalted', data: { id, reason: 'r', at } };
  deciderSpec(calculationDecider).given([created, halted]).when({ type: 'ResumeCalculation', id, at: later }).then([{ type: 'CalculationResumed', data: { id, at: later } }]);
  deciderSpec(calculationDecider).given([created]).when({ type: 'ResumeCalculation', id, at: later }).then([]);
  deciderSpec(calculationDecider).given([created, halted, { type: 'CalculationResumed', data: { id, at } }]).when({ type: 'ResumeCalculation', id, at: later }).then([]);
});

deciders('given a halted calculation, when it is replaced, then it stays halted until a run resumes it', () => {
  const spec = deciderSpec(calculationDecider).given([created, { type: 'CalculationHalted', data: { id, reason: 'r', at } }, { type: 'CalculationReplaced', data: { id, definition: hourly, at } }]);
  assert.equal(spec.state, { status: 'active', id, createdBy: owner, definition: hourly, halted: 'r' });
});

// ---- the definition's rules ----

const refused = (name: string, definition: CalculationDefinition, message: string | RegExp, others: CalculationLink[] = []) =>
  deciders(`when ${name}, then a ValidationError naming it`, () => {
    deciderSpec(calculationDecider).given([]).when(create(definition, others)).thenThrows(ValidationError, message);
    deciderSpec(calculationDecider).given([created]).when({ type: 'ReplaceCalculation', id, definition, others, at }).thenThrows(ValidationError, message);
  });

refused('the destination is a source', { ...sum, destination: { deviceId: b, field: 'power' } }, "ERR - destination is also the calculation's sources.1: the calculation would feed itself");
refused('a window writes its source', { ...hourly, destination: { deviceId: a, field: 'temperature' } }, "ERR - destination is also the calculation's source: the calculation would feed itself");
refused('an interval has no seconds', { ...sum, schedule: { type: 'interval' } as never }, 'ERR - schedule.seconds is required when schedule.type is interval');
refused('an interval is 9 s', { ...sum, schedule: { type: 'interval', seconds: 9 } }, /^ERR - schedule\.seconds must be a whole number of seconds from 10 to 2678400$/);
refused('an onChange schedule has seconds', { ...sum, schedule: { type: 'onChange', seconds: 10 } as never }, /^ERR - schedule\.seconds is only for schedule\.type interval/);
refused('a lastValue asks for a difference', { ...sum, aggregation: 'difference' } as never, /^ERR - aggregation must be one of sum, mean, min, max, count for a lastValue calculation$/);
refused('a source repeats', { ...sum, sources: [{ deviceId: a, field: 'power' }, { deviceId: b, field: 'power' }, { deviceId: a, field: 'power' }] } as never, 'ERR - sources.2 repeats sources.0');
refused('the destination is a platform field', { ...sum, destination: { deviceId: c, field: 'reportedAt' } }, /^ERR - destination\.field reportedAt is kept by the platform/);
refused('the destination is lnglat', { ...sum, destination: { deviceId: c, field: 'lnglat' } }, /^ERR - destination\.field lnglat/);
refused('a window is longer than 31 days', { ...hourly, window: { seconds: 31 * 86400 + 1 } } as never, /^ERR - window\.seconds must be a whole number of seconds from 1 to 2678400$/);
refused(
  'the result would come back through another calculation',
  sum,
  /^ERR - destination feeds back into this calculation's sources through calculation e0000000000000000000000e \(calc e\): calculations must not form a cycle$/,
  [link('e0000000000000000000000e', [[c, 'totalPower']], [b, 'power'])],
);

deciders('given other calculations, when the path back is long, then every calculation on it is named, in order', () => {
  const others = [link('e00000000000000000000001', [[c, 'totalPower']], [c, 'step1']), link('e00000000000000000000002', [[c, 'step1']], [c, 'step2']), link('e00000000000000000000003', [[c, 'step2']], [a, 'power'])];
  assert.equal(feedbackPath(id, sum, others)?.map((l) => l.id), ['e00000000000000000000001', 'e00000000000000000000002', 'e00000000000000000000003']);
});

deciders('given other calculations that read the destination but never lead back, when created, then accepted', () => {
  const others = [link('e00000000000000000000001', [[c, 'totalPower']], [c, 'daily']), link('e00000000000000000000002', [[c, 'daily']], [b, 'weekly']), link('e00000000000000000000003', [[b, 'weekly']], [c, 'daily'])];
  assert.is(feedbackPath(id, sum, others), null, 'a cycle among others that this one does not join is not its cycle');
  deciderSpec(calculationDecider).given([]).when(create(sum, others)).then([created]);
});

deciders('given the calculation itself among the others (a replace), when checked, then its old definition does not count', () => {
  const old = link(id, [[c, 'totalPower']], [a, 'power']);
  assert.is(feedbackPath(id, sum, [old]), null);
});

// ---- results ----

const stats = (over: Partial<WindowStats>): WindowStats => ({ count: 0, numbers: 0, sum: null, mean: null, min: null, max: null, first: null, last: null, firstNum: null, lastNum: null, before: null, ...over });

deciders('given window statistics, when each aggregation is taken, then its value', () => {
  const s = stats({ count: 4, numbers: 3, sum: 9, mean: 3, min: 1, max: 5, first: 'warming', last: 5, firstNum: 1, lastNum: 5, before: 0.5 });
  assert.equal(
    (['count', 'sum', 'mean', 'min', 'max', 'first', 'last', 'difference'] as const).map((agg) => windowResult(agg, s)),
    [4, 9, 3, 1, 5, 'warming', 5, 4.5],
  );
  assert.is(windowResult('difference', { ...s, before: null }), 4, 'without a reading before, the change since the first in the window');
});

deciders('given an empty window, then count is 0 and nothing else has a value; without numbers, no numeric aggregation', () => {
  const empty = stats({});
  assert.equal((['count', 'sum', 'mean', 'min', 'max', 'first', 'last', 'difference'] as const).map((agg) => windowResult(agg, empty)), [0, null, null, null, null, null, null, null]);
  const text = stats({ count: 2, first: 'a', last: 'b' });
  assert.equal([windowResult('sum', text), windowResult('mean', text), windowResult('last', text)], [null, null, 'b']);
});

deciders('given the latest readings of sources, when aggregated, then over the numeric ones; count counts the sources with a reading', () => {
  const latest = [{ num: 2, value: 2 }, null, { num: 1, value: true }, { num: null, value: 'off' }, { num: 7, value: 7 }];
  assert.equal((['sum', 'mean', 'min', 'max', 'count'] as const).map((agg) => lastValueResult(agg, latest)), [10, 10 / 3, 1, 7, 4]);
  assert.equal((['sum', 'mean', 'min', 'max', 'count'] as const).map((agg) => lastValueResult(agg, [null, { num: null, value: 'x' }])), [null, null, null, null, 1]);
});

deciders.run();
