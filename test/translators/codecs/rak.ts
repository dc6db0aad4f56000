import type { DeviceCodec } from './types.js';

/**
 * RAKwireless RAK7204 WisNode Sense Home (environment sensor). Its payload is
 * Cayenne LPP, as the RAK7204 datasheet says, decoded here after myDevices'
 * "Cayenne Low Power Payload" reference: per item a channel, a type and its
 * data, big-endian. Types: 0x02 analog input int16 in 0.01, 0x67 temperature
 * int16 in 0.1 °C, 0x68 humidity uint8 in 0.5 %, 0x73 barometer uint16 in
 * 0.1 hPa, 0x88 GPS (latitude and longitude int24 in 0.0001°, altitude int24
 * in 0.01 m). The RAK7204 sends its battery voltage (V) on analog channel 8
 * and its gas resistance (kΩ) on analog channel 5. Written for this test
 * suite; names as the common LPP decoders write them (`<type>_<channel>`).
 */
export const rak7204: DeviceCodec = {
  name: 'rak7204-lpp',
  vendor: 'RAKwireless',
  model: 'RAK7204 WisNode Sense Home',
  document: 'RAK7204 datasheet (Cayenne LPP payload) and myDevices Cayenne Low Power Payload reference',
  codec: `// Cayenne LPP, as sent by the RAK7204 (see the Cayenne Low Power Payload reference).
function signed(value, bits) {
  return value & (1 << (bits - 1)) ? value - Math.pow(2, bits) : value;
}
function uint(b, at, n) {
  var v = 0;
  for (var k = 0; k < n; k++) v = v * 256 + b[at + k];
  return v;
}

var TYPES = {
  0x02: { name: 'analog_in', size: 2, read: function (b, at) { return signed(uint(b, at, 2), 16) / 100; } },
  0x67: { name: 'temperature', size: 2, read: function (b, at) { return signed(uint(b, at, 2), 16) / 10; } },
  0x68: { name: 'relative_humidity', size: 1, read: function (b, at) { return b[at] / 2; } },
  0x73: { name: 'barometric_pressure', size: 2, read: function (b, at) { return uint(b, at, 2) / 10; } },
  0x88: { name: 'gps', size: 9, read: function (b, at) {
    return {
      latitude: signed(uint(b, at, 3), 24) / 10000,
      longitude: signed(uint(b, at + 3, 3), 24) / 10000,
      altitude: signed(uint(b, at + 6, 3), 24) / 100,
    };
  } },
};

function decodeUplink(input) {
  var b = input.bytes, data = {}, at = 0;
  while (at < b.length) {
    var channel = b[at], type = TYPES[b[at + 1]];
    if (!type) return { errors: ['unknown LPP type 0x' + (b[at + 1] || 0).toString(16) + ' on channel ' + channel] };
    if (at + 2 + type.size > b.length) return { errors: ['LPP item on channel ' + channel + ' is cut short'] };
    data[type.name + '_' + channel] = type.read(b, at + 2);
    at += 2 + type.size;
  }
  return { data: data };
}
`,
  codecYaml: `uplinkDecoder:
  fileName: rak7204.js
  examples:
    - description: Battery, temperature, humidity, pressure and gas resistance
      input:
        fPort: 2
        bytes: [0x08, 0x02, 0x01, 0x61, 0x02, 0x67, 0x01, 0x0C, 0x03, 0x68, 0x7B, 0x04, 0x73, 0x27, 0x9B, 0x05, 0x02, 0x00, 0x2D]
      output:
        data:
          analog_in_8: 3.53
          temperature_2: 26.8
          relative_humidity_3: 61.5
          barometric_pressure_4: 1013.9
          analog_in_5: 0.45
`,
  deviceYaml: `name: RAK7204 WisNode Sense Home
description: Environment sensor for temperature, humidity, air pressure and gas resistance (BME680)
sensors:
  - temperature
  - humidity
  - barometer
  - battery
`,
  spec: {
    batteryVoltage: { type: 'number', unit: 'V', quantity: 'batteryVoltage' },
    temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
    relativeHumidity: { type: 'number', unit: '%', quantity: 'relativeHumidity' },
    airPressure: { type: 'number', unit: 'Pa', quantity: 'pressure' },
    gasResistance: { type: 'number', unit: 'Ω', quantity: 'gasResistance' },
  },
  fieldMap: {
    analog_in_8: { field: 'batteryVoltage', unit: 'V' },
    temperature_2: { field: 'temperature', unit: '°C' },
    relative_humidity_3: { field: 'relativeHumidity', unit: '%' },
    barometric_pressure_4: { field: 'airPressure', unit: 'Pa', scale: 100 },
    analog_in_5: { field: 'gasResistance', unit: 'Ω', scale: 1000 },
  },
  uplinks: [
    {
      description: 'Battery, temperature, humidity, pressure and gas resistance',
      fPort: 2,
      hex: '0802016102670 10c03687b0473279b0502002d'.replace(/ /g, ''),
      canonical: { batteryVoltage: 3.53, temperature: 26.8, relativeHumidity: 61.5, airPressure: 101390, gasResistance: 450 },
    },
    {
      description: 'Cold and dry',
      fPort: 2,
      hex: '02 67 ff 9c 03 68 28'.replace(/ /g, ''),
      canonical: { temperature: -10, relativeHumidity: 20 },
    },
  ],
  refused: { fPort: 2, hex: '0299aa', errors: ['unknown LPP type 0x99 on channel 2'] },
};
