import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MOSQUITTO = '/usr/sbin/mosquitto';

/**
 * A real Mosquitto broker (Debian's `mosquitto` package) for tests, with
 * password logins and no anonymous access. A Generic connector's broker port
 * is 1883 or 8883 (the contract's rule), so each broker listens on 1883 of
 * an address of its own in the loopback range (127.0.0.0/8 is all loopback
 * on Linux), beside any broker that already holds 127.0.0.1:1883.
 */
export class Mosquitto {
  readonly dir = mkdtempSync(join(tmpdir(), 'mosquitto-'));
  readonly port = 1883;
  host = '';
  output = '';
  private child: ChildProcess | null = null;

  /** `settings`: more lines of mosquitto.conf (`max_queued_messages 0`, …). */
  constructor(
    users: Record<string, string>,
    private readonly settings: string[] = [],
  ) {
    if (!existsSync(MOSQUITTO)) throw new Error(`${MOSQUITTO} is missing: install Debian's mosquitto package (.ci/run does)`);
    const passwd = join(this.dir, 'passwd');
    writeFileSync(passwd, '', { mode: 0o600 });
    for (const [user, password] of Object.entries(users)) execFileSync('mosquitto_passwd', ['-b', passwd, user, password]);
  }

  get url(): string {
    return `mqtt://${this.host}:${this.port}`;
  }

  /** Starts on a free loopback address (keeping the one it had, on a restart). */
  async start(): Promise<this> {
    for (let tries = 0; ; tries++) {
      if (!this.host || tries > 0) this.host = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
      if (await this.launch()) return this;
      if (tries >= 5) throw new Error(`mosquitto did not start: ${this.output.slice(-2000)}`);
    }
  }

  /** Starts again on the same address, after `stop`. */
  async restart(): Promise<void> {
    for (let tries = 0; !(await this.launch()); tries++) {
      if (tries >= 20) throw new Error(`mosquitto did not start again on ${this.host}: ${this.output.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  private async launch(): Promise<boolean> {
    const conf = join(this.dir, 'mosquitto.conf');
    writeFileSync(
      conf,
      [
        `listener ${this.port} ${this.host}`,
        'allow_anonymous false',
        `password_file ${join(this.dir, 'passwd')}`,
        // A broker restarted in a test forgets its sessions, as one without persistence does.
        'persistence false',
        'log_dest stdout',
        'log_type error',
        'log_type warning',
        'log_type notice',
        // Run as whoever starts it (root in CI): the password file is in a private temporary folder.
        'user root',
        ...this.settings,
      ].join('\n') + '\n',
    );
    const child = spawn(MOSQUITTO, ['-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d) => (this.output += d));
    child.stderr!.on('data', (d) => (this.output += d));
    const exited = new Promise<boolean>((resolve) => child.once('exit', () => resolve(false)));
    const until = Date.now() + 5_000;
    while (Date.now() < until) {
      const up = await Promise.race([this.listening(), exited]);
      if (up) {
        this.child = child;
        return true;
      }
      if (child.exitCode !== null || child.signalCode !== null) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    return false;
  }

  private listening(): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect(this.port, this.host);
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
  }

  /** Stops the broker and waits until it is gone. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
