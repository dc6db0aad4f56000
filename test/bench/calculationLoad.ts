/**
 * The calculation load of a benchmark: one `onChange` window calculation per
 * device, the mean of the device's `field` over the last hour written back to
 * the same device as `<field>Mean1h`. Every report of a device then runs one
 * calculation and stores one result report. For `bench:calculations` and any
 * benchmark that adds calculations to its load (`bench:rules`).
 */
export type Call = <T = { _id: string }>(method: string, path: string, body?: unknown) => Promise<T>;

export async function createCalculationLoad(call: Call, deviceIds: string[], field = 'value'): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, deviceId] of deviceIds.entries()) {
    const calc = await call('POST', '/api/calculations', {
      name: `bench ${i}`,
      type: 'window',
      source: { deviceId, field },
      window: { seconds: 3600 },
      destination: { deviceId, field: `${field}Mean1h` },
      aggregation: 'mean',
      schedule: { type: 'onChange' },
    });
    ids.push(calc._id);
  }
  return ids;
}

export async function deleteCalculationLoad(call: Call, ids: string[]): Promise<void> {
  for (const id of ids) await call('DELETE', `/api/calculations/${id}`);
}
