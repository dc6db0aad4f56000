/** Five real device codecs of different vendors, in the device-repository form (see types.ts). */
import { decentlabDlPr26 } from './decentlab.js';
import { draginoLht65 } from './dragino.js';
import { elsysErsCo2 } from './elsys.js';
import { milesightEm300Th } from './milesight.js';
import { rak7204 } from './rak.js';
import type { DeviceCodec } from './types.js';

export { decentlabDlPr26, draginoLht65, elsysErsCo2, milesightEm300Th, rak7204 };
export { examplesOf, reviewedTranslator, type DeviceCodec } from './types.js';

export const deviceCodecs: DeviceCodec[] = [elsysErsCo2, draginoLht65, milesightEm300Th, decentlabDlPr26, rak7204];
