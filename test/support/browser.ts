import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type ConsoleMessage, type Page } from 'playwright-core';

const ROOT = new URL('../..', import.meta.url).pathname;
const WEB = join(ROOT, 'web');
/** Screenshots of each page, kept by CI for a person to look at (git-ignored). */
export const SCREENSHOTS = join(ROOT, 'test-artifacts', 'screenshots');

/** Debian's chromium; no browser is ever downloaded. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

// Without the background-networking flags Chromium keeps trying to reach Google's hosts, which this closed network refuses.
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

function newest(dir: string): number {
  let t = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const s = statSync(p);
    t = Math.max(t, s.isDirectory() ? newest(p) : s.mtimeMs);
  }
  return t;
}

/** Builds the panel when web/dist is missing or older than its sources (`npm ci` builds it; this covers edits since). */
export function ensurePanelBuilt(): void {
  const index = join(WEB, 'dist', 'index.html');
  const sources = Math.max(newest(join(WEB, 'src')), statSync(join(WEB, 'index.html')).mtimeMs, statSync(join(WEB, 'vite.config.ts')).mtimeMs);
  if (existsSync(index) && statSync(index).mtimeMs >= sources) return;
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', WEB, '--logLevel', 'warn'], { cwd: ROOT, stdio: 'inherit' });
}

export async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/** A page that records every console error and uncaught exception, so a test can assert there were none. */
export interface WatchedPage {
  page: Page;
  context: BrowserContext;
  errors: string[];
  close(): Promise<void>;
}

export async function openPage(browser: Browser, baseUrl: string, options: { width?: number; height?: number; tiles?: string } = {}): Promise<WatchedPage> {
  const context = await browser.newContext({ baseURL: baseUrl, viewport: { width: options.width ?? 1280, height: options.height ?? 900 } });
  // No tiles by default: the tests run without a network, and maps must still show devices and fences.
  await context.addInitScript(`if (localStorage.getItem('panel.tileUrl') === null) localStorage.setItem('panel.tileUrl', ${JSON.stringify(options.tiles ?? '')});`);
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const errors: string[] = [];
  const record = (m: ConsoleMessage) => {
    // A refused request shows as a console error in Chromium; those are checked by the tests that cause them.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(m.text());
  };
  page.on('console', record);
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  return { page, context, errors, close: () => context.close() };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** Logs in through the login form. */
export async function logIn(page: Page, username: string, password: string): Promise<void> {
  await page.goto('/');
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
}
