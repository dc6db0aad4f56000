import type { DeviceCodec } from './types.js';

/**
 * Elsys ERS CO2 (indoor climate and CO2). The payload is a list of
 * type-length-value items; this codec follows Elsys' "ELSYS LoRaWAN payload"
 * document (generic payload format, types 0x01 to 0x07): 0x01 temperature
 * int16 BE in 0.1 °C, 0x02 humidity uint8 in %, 0x04 light uint16 in lux,
 * 0x05 motion count uint8, 0x06 CO2 uint16 in ppm, 0x07 supply voltage uint16
 * in mV. Written for this test suite. Like many vendor codecs it leaves its
 * loop index undeclared (a sloppy-mode implicit global), and it warns about
 * an item type it does not know and stops there.
 */
export const elsysErsCo2: DeviceCodec = {
  name: 'elsys-ers-co2',
  vendor: 'Elsys',
  model: 'ERS CO2',
  document: 'ELSYS LoRaWAN payload (generic payload format, data types 0x01-0x07)',
  codec: `// Elsys ERS CO2: type-length-value items, see "ELSYS LoRaWAN payload".
var TYPE_TEMP = 0x01, TYPE_RH = 0x02, TYPE_LIGHT = 0x04, TYPE_MOTION = 0x05, TYPE_CO2 = 0x06, TYPE_VDD = 0x07;

function int16(hi, lo) {
  var v = (hi << 8) | lo;
  return v & 0x8000 ? v - 0x10000 : v;
}

function decodeUplink(input) {
  var b = input.bytes, data = {}, warnings = [];
  for (i = 0; i < b.length; i++) {
    switch (b[i]) {
      case TYPE_TEMP: data.temperature = int16(b[i + 1], b[i + 2]) / 10; i += 2; break;
      case TYPE_RH: data.humidity = b[i + 1]; i += 1; break;
      case TYPE_LIGHT: data.light = (b[i + 1] << 8) | b[i + 2]; i += 2; break;
      case TYPE_MOTION: data.motion = b[i + 1]; i += 1; break;
      case TYPE_CO2: data.co2 = (b[i + 1] << 8) | b[i + 2]; i += 2; break;
      case TYPE_VDD: data.vdd = (b[i + 1] << 8) | b[i + 2]; i += 2; break;
      default:
        warnings.push('unknown data type 0x' + b[i].toString(16) + ' at byte ' + i + '; the rest is ignored');
        i = b.length;
    }
  }
  return { data: data, warnings: warnings };
}
`,
  codecYaml: `uplinkDecoder:
  fileName: ers-co2.js
  examples:
    - description: Temperature, humidity, light, motion, CO2 and battery
      input:
        fPort: 5
        bytes: [0x01, 0x00, 0xE2, 0x02, 0x29, 0x04, 0x00, 0x27, 0x05, 0x06, 0x06, 0x03, 0xE8, 0x07, 0x0E, 0x10]
      output:
        data:
          temperature: 22.6
          humidity: 41
          light: 39
          motion: 6
          co2: 1000
          vdd: 3600
    - description: Below zero
      input:
        fPort: 5
        bytes: [0x01, 0xFF, 0xCE, 0x02, 0x50, 0x06, 0x01, 0x90, 0x07, 0x0B, 0xB8]
      output:
        data:
          temperature: -5
          humidity: 80
          co2: 400
          vdd: 3000
`,
  deviceYaml: `name: ERS CO2
description: Indoor sensor for CO2, temperature, humidity, light and motion
hardwareVersions:
  - version: '1.0'
firmwareVersions:
  - version: '1.0'
sensors:
  - temperature
  - humidity
  - light
  - motion
  - co2
  - battery
`,
  spec: {
    temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
    relativeHumidity: { type: 'number', unit: '%', quantity: 'relativeHumidity' },
    illuminance: { type: 'number', unit: 'lx', quantity: 'illuminance' },
    motionCount: { type: 'number', unit: '', quantity: 'motionCount' },
    co2: { type: 'number', unit: 'ppm', quantity: 'co2' },
    batteryVoltage: { type: 'number', unit: 'V', quantity: 'batteryVoltage' },
  },
  fieldMap: {
    humidity: { field: 'relativeHumidity', unit: '%' },
    light: { field: 'illuminance', unit: 'lx' },
    motion: { field: 'motionCount', unit: '' },
    vdd: { field: 'batteryVoltage', unit: 'V', scale: 0.001 },
  },
  uplinks: [
    {
      description: 'Temperature, humidity, light, motion, CO2 and battery',
      fPort: 5,
      hex: '0100e20229040027050606 03e8070e10'.replace(/ /g, ''),
      canonical: { temperature: 22.6, relativeHumidity: 41, illuminance: 39, motionCount: 6, co2: 1000, batteryVoltage: 3.6 },
    },
    {
      description: 'Below zero',
      fPort: 5,
      hex: '01ffce0250060190070bb8',
      canonical: { temperature: -5, relativeHumidity: 80, co2: 400, batteryVoltage: 3 },
    },
  ],
};
