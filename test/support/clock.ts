/**
 * A platform clock the test sets (`startTestPlatform({}, { clock: clock.now })`):
 * real time until `set`, then the time set, which moves only when the test
 * moves it. MQTT messages take their `reportedAt` from it, so a test can
 * spread reports over an hour in a second.
 */
export class TestClock {
  private fixed: number | null = null;

  readonly now = (): Date => new Date(this.fixed ?? Date.now());

  set(at: string | number | Date): void {
    this.fixed = new Date(at).getTime();
  }

  advance(ms: number): void {
    this.fixed = (this.fixed ?? Date.now()) + ms;
  }
}
