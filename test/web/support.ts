import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import type { TestPlatform } from '../support/platform.js';

/** A 1x1 PNG. */
export const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

export async function uploadImage(t: TestPlatform, name: string, token = t.adminToken): Promise<string> {
  const form = new FormData();
  form.append('name', name);
  form.append('category', 'floorPlan');
  form.append('image', new Blob([PNG], { type: 'image/png' }), 'plan.png');
  const res = await fetch(`${t.baseUrl}/api/images`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  assert.is(res.status, 201, await res.clone().text());
  return ((await res.json()) as { _id: string })._id;
}

export async function ok<T = any>(t: TestPlatform, method: string, path: string, body?: unknown, token = t.adminToken): Promise<T> {
  const res = await t.call(method, path, body === undefined ? { token } : { token, body });
  assert.ok(res.status < 300, `${method} ${path} answered ${res.status}: ${res.text}`);
  return res.body as T;
}

/** Creates a user with roles and a password of its own (the temporary one replaced), and logs it in. */
export async function givenUser(t: TestPlatform, username: string, roles: string[]): Promise<{ id: string; token: string; password: string }> {
  const created = await ok(t, 'POST', '/api/users', { username, attributes: { roles } });
  const temp = await t.login(username, created.temporaryPassword);
  const password = `${username}-password-1`;
  const res = await t.call('PUT', '/api/auth/password', { token: temp, body: { currentPassword: created.temporaryPassword, newPassword: password } });
  assert.is(res.status, 200, res.text);
  return { id: created.id, token: await t.login(username, password), password };
}

/** Widgets on screen, by template. */
export const widgetsOnScreen = (page: Page) => page.locator('.grid-item[data-template]');

export async function dashboardIdOf(page: Page): Promise<string> {
  await page.waitForURL(/\/dashboards\/[0-9a-f]{24}/);
  return /\/dashboards\/([0-9a-f]{24})/.exec(page.url())![1]!;
}
