import type { DeviceCodec } from './types.js';

/**
 * Milesight EM300-TH (temperature and humidity). Follows the "EM300 Series
 * User Guide", uplink payload on fPort 85 as channel, type and data:
 * 01 75 battery uint8 in %, 03 67 temperature int16 LE in 0.1 °C, 04 68
 * humidity uint8 in 0.5 %, and the device information the sensor sends at
 * power-on (ff 01 protocol version, ff 09 hardware version, ff 0a firmware
 * version, ff 16 serial number). Downlinks as in its "Downlink commands":
 * ff 03 and the reporting interval uint16 LE in seconds, ff 10 ff reboot.
 * Written for this test suite; field names as the vendor's own decoder
 * writes them.
 */
export const milesightEm300Th: DeviceCodec = {
  name: 'milesight-em300-th',
  vendor: 'Milesight',
  model: 'EM300-TH',
  document: 'Milesight EM300 Series User Guide (uplink channels, downlink commands)',
  codec: `// Milesight EM300-TH, see the EM300 Series User Guide.
function decodeUplink(input) {
  var b = input.bytes, data = {};
  var i = 0;
  while (i < b.length) {
    var channel = b[i], type = b[i + 1];
    i += 2;
    if (channel === 0x01 && type === 0x75) {
      data.battery = b[i];
      i += 1;
    } else if (channel === 0x03 && type === 0x67) {
      var t = b[i] | (b[i + 1] << 8);
      data.temperature = (t & 0x8000 ? t - 0x10000 : t) / 10;
      i += 2;
    } else if (channel === 0x04 && type === 0x68) {
      data.humidity = b[i] / 2;
      i += 1;
    } else if (channel === 0xff && type === 0x01) {
      data.ipso_version = 'v' + (b[i] >> 4) + '.' + (b[i] & 0x0f);
      i += 1;
    } else if (channel === 0xff && (type === 0x09 || type === 0x0a)) {
      data[type === 0x09 ? 'hardware_version' : 'firmware_version'] = 'v' + b[i] + '.' + (b[i + 1] >> 4);
      i += 2;
    } else if (channel === 0xff && type === 0x16) {
      data.sn = b.slice(i, i + 8).map(function (x) { return ('0' + x.toString(16)).slice(-2); }).join('');
      i += 8;
    } else {
      return { errors: ['unknown channel 0x' + channel.toString(16) + ' type 0x' + type.toString(16)] };
    }
  }
  return { data: data };
}

function encodeDownlink(input) {
  var d = input.data;
  if (d.reboot === true) return { bytes: [0xff, 0x10, 0xff], fPort: 85 };
  if (typeof d.reporting_interval === 'number') {
    var s = d.reporting_interval;
    if (s < 60 || s > 64800) return { errors: ['reporting_interval must be 60 to 64800 seconds'] };
    return { bytes: [0xff, 0x03, s & 0xff, (s >> 8) & 0xff], fPort: 85 };
  }
  return { errors: ['unknown command: send reboot or reporting_interval'] };
}
`,
  codecYaml: `uplinkDecoder:
  fileName: em300-th.js
  examples:
    - description: Battery, temperature and humidity
      input:
        fPort: 85
        bytes: [0x01, 0x75, 0x5C, 0x03, 0x67, 0x34, 0x01, 0x04, 0x68, 0x65]
      output:
        data:
          battery: 92
          temperature: 30.8
          humidity: 50.5
    - description: Device information at power-on
      input:
        fPort: 85
        bytes: [0xFF, 0x01, 0x01, 0xFF, 0x09, 0x01, 0x10, 0xFF, 0x0A, 0x01, 0x20, 0xFF, 0x16, 0x67, 0x49, 0xB2, 0x10, 0x45, 0x86, 0x00, 0x01]
      output:
        data:
          ipso_version: v0.1
          hardware_version: v1.1
          firmware_version: v1.2
          sn: 6749b21045860001
downlinkEncoder:
  fileName: em300-th.js
  examples:
    - description: Report every 20 minutes
      input:
        data:
          reporting_interval: 1200
      output:
        bytes: [0xFF, 0x03, 0xB0, 0x04]
        fPort: 85
`,
  deviceYaml: `name: EM300-TH
description: Temperature and humidity sensor, IP67
sensors:
  - temperature
  - humidity
  - battery
`,
  spec: {
    batteryLevel: { type: 'number', unit: '%', quantity: 'batteryLevel' },
    temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
    relativeHumidity: { type: 'number', unit: '%', quantity: 'relativeHumidity' },
    protocolVersion: 'string',
    hardwareVersion: 'string',
    firmwareVersion: 'string',
    serialNumber: 'string',
  },
  fieldMap: {
    battery: { field: 'batteryLevel', unit: '%' },
    humidity: { field: 'relativeHumidity', unit: '%' },
    ipso_version: { field: 'protocolVersion' },
    hardware_version: { field: 'hardwareVersion' },
    firmware_version: { field: 'firmwareVersion' },
    sn: { field: 'serialNumber' },
  },
  uplinks: [
    {
      description: 'Battery, temperature and humidity',
      fPort: 85,
      hex: '01755c03673401046865',
      canonical: { batteryLevel: 92, temperature: 30.8, relativeHumidity: 50.5 },
    },
    {
      description: 'Below zero, humidity only and temperature',
      fPort: 85,
      hex: '0367ceff046890',
      canonical: { temperature: -5, relativeHumidity: 72 },
    },
    {
      description: 'Device information at power-on',
      fPort: 85,
      hex: 'ff0101ff090110ff0a0120ff166749b21045860001',
      canonical: { protocolVersion: 'v0.1', hardwareVersion: 'v1.1', firmwareVersion: 'v1.2', serialNumber: '6749b21045860001' },
    },
  ],
  refused: { fPort: 85, hex: '0599aa', errors: ['unknown channel 0x5 type 0x99'] },
  downlinks: [
    { data: { reporting_interval: 1200 }, hexEncoded: 'ff03b004', port: 85 },
    { data: { reboot: true }, hexEncoded: 'ff10ff', port: 85 },
  ],
};
