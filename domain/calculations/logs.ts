import type { RecordedEvent } from '../shared/events.js';
import type { LogEvent } from '../logs/logEntry.js';
import type { CalculationEvent } from './calculation.js';

/**
 * The log entry a halt or a resumption of a calculation implies, on the
 * calculation (`resourceType: calculation`), with the event's id as the
 * entry's: the event and its entry are stored together or not at all.
 */
export function calculationEntry(e: RecordedEvent & CalculationEvent): LogEvent['data'] | null {
  switch (e.type) {
    case 'CalculationHalted':
      return {
        id: e.id,
        resourceId: e.data.id,
        resourceType: 'calculation',
        type: 'error',
        priority: 'high',
        category: 'access',
        message: `The calculation stopped: ${e.data.reason}. It runs again once that is no longer so.`,
        data: { reason: e.data.reason },
        at: e.data.at,
      };
    case 'CalculationResumed':
      return {
        id: e.id,
        resourceId: e.data.id,
        resourceType: 'calculation',
        type: 'info',
        priority: 'medium',
        category: 'access',
        message: 'The calculation runs again: its owner has the rights it needs.',
        at: e.data.at,
      };
    case 'CalculationCreated':
    case 'CalculationReplaced':
    case 'CalculationDeleted':
      return null;
    default: {
      const _: never = e;
      return null;
    }
  }
}
