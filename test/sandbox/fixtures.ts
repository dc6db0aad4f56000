/**
 * Real translators the sandbox tests run, written the way uploads arrive:
 * code as a string, a spec, and helpers inside the code.
 */
import * as assert from 'uvu/assert';
import { TranslatorError, type TranslatorErrorKind, type TranslatorSpec } from '../../sandbox/index.js';

/**
 * A temperature/humidity sensor. Port 1 uplink, 5 bytes:
 * int16 BE temperature in 1/100 °C, uint8 relative humidity in 1/2 %,
 * uint16 BE battery in mV. Other ports carry nothing to decode.
 */
export const climateSensor = {
  code: `
function translate({ encodedData }) {
  if (encodedData.port !== 1) return {};
  const bytes = Buffer.from(encodedData.hexEncoded, 'hex');
  if (bytes.length < 5) throw new Error('expected 5 bytes, got ' + bytes.length);
  return {
    result: {
      temperature: bytes.readInt16BE(0) / 100,
      relativeHumidity: bytes.readUInt8(2) / 2,
      batteryVoltage: _.round(bytes.readUInt16BE(3) / 1000, 3),
    },
  };
}
`,
  spec: {
    temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
    relativeHumidity: { type: 'number', unit: '%', quantity: 'relativeHumidity' },
    batteryVoltage: { type: 'number', unit: 'V', quantity: 'batteryVoltage' },
  } satisfies TranslatorSpec,
};

/** Encodes one climate uplink the way the device does. */
export function climateHex(temperature: number, humidity: number, batteryMilliVolts: number): string {
  const bytes = Buffer.alloc(5);
  bytes.writeInt16BE(Math.round(temperature * 100), 0);
  bytes.writeUInt8(Math.round(humidity * 2), 2);
  bytes.writeUInt16BE(batteryMilliVolts, 3);
  return bytes.toString('hex');
}

/**
 * Chained analytics: the daily maximum and mean temperature. Its only memory
 * is its own previous output on the iotnode; the period comes from the
 * uplink's `reportedAt`, never the wall clock.
 */
export const dailyTemperature = {
  code: `
function dayOf(reportedAt) {
  return new Date(reportedAt).toISOString().slice(0, 10);
}

function translate(iotnode, parameters) {
  if (typeof iotnode.temperature !== 'number' || !iotnode.reportedAt) return {};
  const day = dayOf(iotnode.reportedAt);
  const sameDay = iotnode.temperatureDay === day;
  const count = sameDay ? iotnode.temperatureDayCount + 1 : 1;
  const previousMean = sameDay ? iotnode.temperatureDayMean : 0;
  const max = sameDay ? Math.max(iotnode.temperatureDayMax, iotnode.temperature) : iotnode.temperature;
  const mean = previousMean + (iotnode.temperature - previousMean) / count;
  return {
    result: {
      temperatureDay: day,
      temperatureDayCount: count,
      temperatureDayMax: max,
      temperatureDayMean: _.round(mean, 2),
      temperatureHighAlarm: max > parameters.highAlarmAbove,
    },
  };
}
`,
  spec: {
    temperatureDay: 'date',
    temperatureDayCount: { type: 'number', unit: '', quantity: 'count' },
    temperatureDayMax: { type: 'number', unit: '°C', quantity: 'temperature' },
    temperatureDayMean: { type: 'number', unit: '°C', quantity: 'temperature' },
    temperatureHighAlarm: 'boolean',
  } satisfies TranslatorSpec,
};

/**
 * A gateway relaying its sensors: byte 0 is the count, then per sensor a
 * 4-byte id and an int16 BE temperature in 1/10 °C. Sub-devices are named by
 * their secret, `sensor-<id hex>`.
 */
export const gateway = {
  code: `
function translate({ encodedData }) {
  const bytes = Buffer.from(encodedData.hexEncoded, 'hex');
  const count = bytes[0];
  const updates = _.times(count, (i) => {
    const offset = 1 + i * 6;
    return {
      identifier: 'sensor-' + bytes.slice(offset, offset + 4).toString('hex'),
      result: { temperature: bytes.readInt16BE(offset + 4) / 10 },
    };
  });
  return { result: { connectedSensors: count }, additionalDeviceUpdates: updates };
}
`,
  spec: {
    connectedSensors: { type: 'number', unit: '', quantity: 'count' },
    temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
  } satisfies TranslatorSpec,
};

/** Awaits a call that must fail with a TranslatorError of `kind`, and returns the error. */
export async function rejection(call: Promise<unknown>, kind: TranslatorErrorKind): Promise<TranslatorError> {
  let outcome: unknown;
  try {
    outcome = await call;
  } catch (error) {
    assert.instance(error, TranslatorError, `expected a TranslatorError, got ${String(error)}`);
    const translatorError = error as TranslatorError;
    assert.is(translatorError.kind, kind, `expected kind ${kind}, got ${translatorError.kind}: ${translatorError.message}`);
    return translatorError;
  }
  assert.unreachable(`expected a ${kind} error, got ${JSON.stringify(outcome)}`);
  throw new Error('unreachable');
}
