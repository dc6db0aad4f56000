import type { DeviceCodec } from './types.js';

/**
 * Decentlab DL-PR26 (pressure and temperature transmitter). Follows the
 * DL-PR26 datasheet and Decentlab's uplink protocol version 2: byte 0 the
 * protocol version, bytes 1-2 the device id, bytes 3-4 flags saying which
 * sensors follow, then each present sensor's 16-bit words. Sensor 0 (two
 * words): pressure (x0 - 16384) / 32768 × (Pmax - Pmin) + Pmin in bar, and
 * temperature (x1 - 384) × 0.003125 - 50 in °C; sensor 1 (one word): battery
 * voltage x / 1000 in V. Pmin and Pmax depend on the probe's range and come
 * from the device's variables. Written for this test suite; its output has
 * the vendor decoder's nested shape, `{displayName, unit, value}` per value.
 */
export const decentlabDlPr26: DeviceCodec = {
  name: 'decentlab-dl-pr26',
  vendor: 'Decentlab',
  model: 'DL-PR26',
  document: 'Decentlab DL-PR26 datasheet, uplink protocol version 2',
  codec: `// Decentlab DL-PR26, uplink protocol version 2 (see the DL-PR26 datasheet).
function word(b, at) { return (b[at] << 8) | b[at + 1]; }
function round6(x) { return Math.round(x * 1e6) / 1e6; }

function decodeUplink(input) {
  var b = input.bytes;
  var vars = input.variables || {};
  var pmin = Number(vars.pmin !== undefined ? vars.pmin : 0), pmax = Number(vars.pmax !== undefined ? vars.pmax : 1);
  if (b[0] !== 2) return { errors: ['protocol version ' + b[0] + ' is not 2'] };
  var flags = word(b, 3), at = 5;
  var data = { protocol_version: 2, device_id: word(b, 1) };
  if (flags & 1) {
    data.pressure = { displayName: 'Pressure', unit: 'bar', value: round6((word(b, at) - 16384) / 32768 * (pmax - pmin) + pmin) };
    data.temperature = { displayName: 'Temperature', unit: '°C', value: round6((word(b, at + 2) - 384) * 0.003125 - 50) };
    at += 4;
  }
  if (flags & 2) {
    data.battery_voltage = { displayName: 'Battery voltage', unit: 'V', value: word(b, at) / 1000 };
    at += 2;
  }
  if (at !== b.length) return { errors: ['payload of ' + b.length + ' bytes, flags say ' + at] };
  return { data: data };
}
`,
  codecYaml: `uplinkDecoder:
  fileName: dl-pr26.js
  examples:
    - description: Pressure, temperature and battery
      input:
        fPort: 1
        bytes: [0x02, 0x0B, 0x2C, 0x00, 0x03, 0x4C, 0xCD, 0x62, 0xA0, 0x0B, 0xB8]
      output:
        data:
          protocol_version: 2
          device_id: 2860
          pressure:
            displayName: Pressure
            unit: bar
            value: 0.100006
          temperature:
            displayName: Temperature
            unit: "°C"
            value: 27.7
          battery_voltage:
            displayName: Battery voltage
            unit: V
            value: 3
    - description: Battery only
      input:
        fPort: 1
        bytes: [0x02, 0x0B, 0x2C, 0x00, 0x02, 0x0B, 0xB8]
      output:
        data:
          protocol_version: 2
          device_id: 2860
          battery_voltage:
            displayName: Battery voltage
            unit: V
            value: 3
`,
  deviceYaml: `name: DL-PR26 Pressure / liquid level and temperature sensor
description: Pressure transmitter with temperature for liquid level measurement
sensors:
  - pressure
  - temperature
  - battery
`,
  unmapped: 'drop',
  spec: {
    pressure: { type: 'number', unit: 'Pa', quantity: 'pressure' },
    externalTemperature: { type: 'number', unit: '°C', quantity: 'temperature' },
    batteryVoltage: { type: 'number', unit: 'V', quantity: 'batteryVoltage' },
    sensorId: { type: 'number', unit: '', quantity: 'sensorId' },
  },
  fieldMap: {
    'pressure.value': { field: 'pressure', unit: 'Pa', scale: 100000 },
    'temperature.value': { field: 'externalTemperature', unit: '°C' },
    'battery_voltage.value': { field: 'batteryVoltage', unit: 'V' },
    device_id: { field: 'sensorId', unit: '' },
  },
  uplinks: [
    {
      description: 'Pressure, temperature and battery',
      fPort: 1,
      hex: '020b2c00034ccd62a00bb8',
      canonical: { sensorId: 2860, pressure: 10000.6, externalTemperature: 27.7, batteryVoltage: 3 },
    },
    {
      description: 'Battery only',
      fPort: 1,
      hex: '020b2c00020bb8',
      canonical: { sensorId: 2860, batteryVoltage: 3 },
    },
  ],
  refused: { fPort: 1, hex: '030b2c00020bb8', errors: ['protocol version 3 is not 2'] },
};
