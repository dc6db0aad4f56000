import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, connect, type Socket, type AddressInfo } from 'node:net';
import { MAX_UNSENT_BYTES, StalledReaderError, guardUnsent } from '../../ingest/broker.js';

/**
 * `guardUnsent` on a real TCP connection over loopback: the broker's side of
 * a connection whose far end reads, or has stopped reading.
 */
const unsent = suite('A connection\'s unsent output');

/** A connected pair: the server's socket (guarded), and the client's. */
async function pair(stallMs: number): Promise<{ server: Socket; client: Socket; ended: Promise<Error | undefined>; close(): void }> {
  let accepted!: (s: Socket) => void;
  const got = new Promise<Socket>((r) => (accepted = r));
  const listener = createServer((s) => accepted(s));
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
  const client = connect((listener.address() as AddressInfo).port, '127.0.0.1');
  client.on('error', () => undefined);
  const server = await got;
  guardUnsent(server, stallMs);
  const ended = new Promise<Error | undefined>((resolve) => {
    server.on('error', (err) => resolve(err));
    server.on('close', () => resolve(undefined));
  });
  return {
    server,
    client,
    ended,
    close() {
      server.destroy();
      client.destroy();
      listener.close();
    },
  };
}

const chunk = Buffer.alloc(64 * 1024, 1);

unsent('given a reader that stopped, when its output waits longer than the time-out, then the connection is closed, naming the bytes and the time', async () => {
  const p = await pair(500);
  p.client.pause();
  try {
    for (let i = 0; i < 160; i++) assert.ok(p.server.write(chunk), 'the broker is never asked to wait');
    const err = await p.ended;
    assert.instance(err, StalledReaderError);
    assert.ok((err as StalledReaderError).stalledMs >= 500);
    assert.match(err!.message, /^\d+ bytes waited \d+ s for the client to read them$/);
  } finally {
    p.close();
  }
});

unsent('given a reader that stopped, when more than the limit waits, then the connection is closed at the next check, long before the time-out', async () => {
  const p = await pair(60_000);
  p.client.pause();
  try {
    const started = Date.now();
    // Past the limit by more than the kernel's socket buffers take on loopback.
    for (let i = 0; i <= (MAX_UNSENT_BYTES + 32 * 1024 * 1024) / chunk.length; i++) p.server.write(chunk);
    const err = await p.ended;
    assert.instance(err, StalledReaderError);
    assert.is((err as StalledReaderError).stalledMs, 0, 'closed for its size');
    assert.ok(Date.now() - started < 5_000, `closed after ${Date.now() - started} ms`);
  } finally {
    p.close();
  }
});

unsent('given a reader that keeps reading, when more than its buffers hold is written at once, then it gets every byte and stays connected past the time-out', async () => {
  // The time-out is counted from the write that found the buffer full: reading 16 MB takes far less, even on a busy machine.
  const p = await pair(3_000);
  let read = 0;
  p.client.on('data', (d: Buffer) => (read += d.length));
  try {
    const total = 16 * 1024 * 1024;
    for (let i = 0; i < total / chunk.length; i++) p.server.write(chunk);
    const until = Date.now() + 10_000;
    while (read < total && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    assert.is(read, total);
    assert.ok(p.server.writableLength === 0, 'drained');
    await new Promise((r) => setTimeout(r, 3_200));
    assert.not.ok(p.server.destroyed, 'still connected');
  } finally {
    p.close();
  }
});

unsent.run();
