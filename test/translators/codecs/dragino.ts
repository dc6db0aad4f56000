import type { DeviceCodec } from './types.js';

/**
 * Dragino LHT65 (temperature and humidity, with an optional external probe).
 * Follows the "LHT65 LoRaWAN Temperature & Humidity Sensor User Manual",
 * uplink payload on fPort 2, 11 bytes: battery (2 bits status, 14 bits mV),
 * built-in temperature int16 BE in 0.01 °C, humidity uint16 BE in 0.1 %,
 * the external sensor type (low nibble, 1 = temperature probe), the probe's
 * temperature int16 BE in 0.01 °C (0x7FFF: no probe connected, reported as
 * null). Downlinks, as in the manual's "Set Transmit Interval" (0x01 and the
 * interval in seconds, 3 bytes) and "Reset" (0x04 0xFF). Written for this
 * test suite; field names as the vendor's own decoder writes them.
 */
export const draginoLht65: DeviceCodec = {
  name: 'dragino-lht65',
  vendor: 'Dragino',
  model: 'LHT65',
  document: 'Dragino LHT65 LoRaWAN Temperature & Humidity Sensor User Manual (uplink payload, downlink commands)',
  codec: `// Dragino LHT65, see the LHT65 user manual: uplink payload and downlink commands.
function int16(hi, lo) {
  var v = (hi << 8) | lo;
  return v & 0x8000 ? v - 0x10000 : v;
}

function decodeUplink(input) {
  var b = input.bytes;
  if (input.fPort !== 2) return { errors: ['unknown FPort'] };
  if (b.length < 11) return { errors: ['payload of ' + b.length + ' bytes, expected 11'] };
  var data = {
    BatV: (((b[0] << 8) | b[1]) & 0x3fff) / 1000,
    Bat_status: b[0] >> 6,
    TempC_SHT: int16(b[2], b[3]) / 100,
    Hum_SHT: ((b[4] << 8) | b[5]) / 10,
  };
  var ext = b[6] & 0x0f;
  if (ext === 0) {
    data.Ext_sensor = 'No external sensor';
  } else if (ext === 1) {
    data.Ext_sensor = 'Temperature Sensor';
    var probe = (b[7] << 8) | b[8];
    data.TempC_DS = probe === 0x7fff ? null : int16(b[7], b[8]) / 100;
  } else {
    return { data: data, warnings: ['external sensor type ' + ext + ' is not decoded'] };
  }
  return { data: data };
}

function encodeDownlink(input) {
  if (input.data.reset === true) return { bytes: [0x04, 0xff], fPort: 2 };
  var seconds = input.data.interval;
  if (typeof seconds !== 'number' || seconds < 1 || seconds > 0xffffff) {
    return { errors: ['interval must be 1 to 16777215 seconds'] };
  }
  return { bytes: [0x01, (seconds >> 16) & 0xff, (seconds >> 8) & 0xff, seconds & 0xff], fPort: 2 };
}
`,
  codecYaml: `uplinkDecoder:
  fileName: lht65.js
  examples:
    - description: Built-in sensor and temperature probe
      input:
        fPort: 2
        bytes: [0xCB, 0xF6, 0x0B, 0x0D, 0x03, 0x76, 0x01, 0x0A, 0xDD, 0x7F, 0xFF]
      output:
        data:
          BatV: 3.062
          Bat_status: 3
          TempC_SHT: 28.29
          Hum_SHT: 88.6
          Ext_sensor: Temperature Sensor
          TempC_DS: 27.81
    - description: Probe disconnected
      input:
        fPort: 2
        bytes: [0xCB, 0xB8, 0xF8, 0x30, 0x02, 0x58, 0x01, 0x7F, 0xFF, 0x7F, 0xFF]
      output:
        data:
          BatV: 3.0
          Bat_status: 3
          TempC_SHT: -20
          Hum_SHT: 60
          Ext_sensor: Temperature Sensor
          TempC_DS: null
    - description: Unknown FPort
      input:
        fPort: 42
        bytes: [0xCB, 0xF6, 0x0B, 0x0D, 0x03, 0x76, 0x01, 0x0A, 0xDD, 0x7F, 0xFF]
      output:
        errors:
          - unknown FPort
downlinkEncoder:
  fileName: lht65.js
  examples:
    - description: Transmit every 10 minutes
      input:
        data:
          interval: 600
      output:
        bytes: [0x01, 0x00, 0x02, 0x58]
        fPort: 2
`,
  deviceYaml: `name: LHT65 LoRaWAN Temperature & Humidity Sensor
description: Temperature and humidity sensor with a built-in SHT20 and an optional external DS18B20 probe
sensors:
  - temperature
  - humidity
  - battery
`,
  spec: {
    batteryVoltage: { type: 'number', unit: 'V', quantity: 'batteryVoltage' },
    batteryStatus: { type: 'number', unit: '', quantity: 'batteryStatus' },
    temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
    relativeHumidity: { type: 'number', unit: '%', quantity: 'relativeHumidity' },
    externalSensor: 'string',
    externalTemperature: { type: 'number', unit: '°C', quantity: 'temperature' },
  },
  fieldMap: {
    BatV: { field: 'batteryVoltage', unit: 'V' },
    Bat_status: { field: 'batteryStatus', unit: '' },
    TempC_SHT: { field: 'temperature', unit: '°C' },
    Hum_SHT: { field: 'relativeHumidity', unit: '%' },
    Ext_sensor: { field: 'externalSensor' },
    TempC_DS: { field: 'externalTemperature', unit: '°C', omitNull: true },
  },
  uplinks: [
    {
      description: 'Built-in sensor and temperature probe',
      fPort: 2,
      hex: 'cbf60b0d0376010add7fff',
      canonical: { batteryVoltage: 3.062, batteryStatus: 3, temperature: 28.29, relativeHumidity: 88.6, externalSensor: 'Temperature Sensor', externalTemperature: 27.81 },
    },
    {
      description: 'Probe disconnected: its null is left out',
      fPort: 2,
      hex: 'cbb8f830025801 7fff7fff'.replace(/ /g, ''),
      canonical: { batteryVoltage: 3, batteryStatus: 3, temperature: -20, relativeHumidity: 60, externalSensor: 'Temperature Sensor' },
    },
  ],
  refused: { fPort: 42, hex: 'cbf60b0d0376010add7fff', errors: ['unknown FPort'] },
  downlinks: [
    { data: { interval: 600 }, hexEncoded: '01000258', port: 2 },
    { data: { reset: true }, hexEncoded: '04ff', port: 2 },
  ],
};
