import type { TestPlatform } from './platform.js';

/**
 * Drives every capability through REST, so projection-wide tests (replay,
 * rebuild) cover every read model. Each step must succeed.
 */
export async function exerciseEveryCapability(t: TestPlatform): Promise<void> {
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await t.call(method, path, body === undefined ? {} : { body });
    if (res.status >= 300) throw new Error(`${method} ${path} answered ${res.status}: ${res.text}`);
    return res.body;
  };
  const user = await ok('POST', '/api/users', { username: 'scenario-user', email: 'user@example.com' });
  await ok('PATCH', `/api/users/${user._id ?? user.id}`, { firstName: 'Ada' });
  const group = await ok('POST', '/api/usergroups', { name: 'scenario group' });
  await ok('POST', `/api/usergroups/${group._id}/members`, { userId: user._id ?? user.id });
  const dashboard = await ok('POST', '/api/dashboards', { name: 'scenario dashboard', widgets: [{ template: 'map', settings: {} }] });
  const text = { text: 'Hello', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' };
  const widget = await ok('POST', `/api/dashboards/${dashboard._id}/widgets`, { template: 'text', settings: text });
  await ok('PUT', `/api/dashboards/${dashboard._id}/widgets/${widget._id}`, { template: 'text', settings: { ...text, bold: true } });
  const place = (id: string, x: number) => ({ _id: id, x, y: 0, width: 4, height: 2 });
  await ok('PATCH', `/api/dashboards/${dashboard._id}`, { title: 'Scenario', widgets: [place(dashboard.widgets[0]._id, 0), place(widget._id, 4)] });
  const widgetCopy = await ok('POST', `/api/dashboards/${dashboard._id}/widgets/${widget._id}/duplicate`);
  await ok('DELETE', `/api/dashboards/${dashboard._id}/widgets/${widgetCopy._id}`);
  const copy = await ok('POST', `/api/dashboards/${dashboard._id}/duplicate`);
  await ok('DELETE', `/api/dashboards/${copy._id}`);
  const form = new FormData();
  form.append('name', 'scenario image');
  form.append('category', 'widget');
  form.append('image', new Blob([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')]), 'a.png');
  const upload = await fetch(`${t.baseUrl}/api/images`, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}` }, body: form });
  if (upload.status !== 201) throw new Error(`POST /api/images answered ${upload.status}: ${await upload.text()}`);
  const image = (await upload.json()) as { _id: string };
  await ok('DELETE', `/api/images/${image._id}`);
  const kept = await fetch(`${t.baseUrl}/api/images`, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}` }, body: form });
  if (kept.status !== 201) throw new Error(`POST /api/images answered ${kept.status}`);
  const meter = await ok('POST', '/api/iotnodes', { name: 'scenario meter' });
  const total = await ok('POST', '/api/iotnodes', { name: 'scenario total' });
  const calculation = { name: 'scenario sum', type: 'lastValue', sources: [{ deviceId: meter._id, field: 'power' }], destination: { deviceId: total._id, field: 'power' }, aggregation: 'sum', schedule: { type: 'onChange' } };
  const calc = await ok('POST', '/api/calculations', calculation);
  await ok('PUT', `/api/calculations/${calc._id}`, { ...calculation, aggregation: 'max' });
  await ok('DELETE', `/api/calculations/${(await ok('POST', '/api/calculations', { ...calculation, name: 'scenario gone' }))._id}`);
  const unit = await ok('POST', '/api/organizations', { name: 'Scenario Co' });
  const sub = await ok('POST', '/api/organizations', { name: 'Scenario Sub', parent: unit._id });
  await ok('POST', `/api/organizations/${sub._id}/members`, { username: 'scenario-member' });
  const app = await ok('POST', '/api/apps', { name: 'Scenario app' });
  await ok('PUT', `/api/usergroups/${group._id}/app-filter`, { appIds: [app._id] });
  await ok('POST', '/api/locations', { name: 'Scenario place', lat: 1, lng: 2, defaultLayer: { name: 'Plan' } });
}
