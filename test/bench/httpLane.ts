/**
 * A lean HTTP/1.1 client for load generators: one kept-alive connection with
 * one request in flight at a time, as a network server's webhook sender keeps
 * its connections. Each request is written in one piece and each answer is
 * read by its status line and `Content-Length` alone.
 *
 * Why not `node:http`: its client spends about 70 µs of CPU per request on
 * these two cores (agent, header objects, parser, streams), about what the
 * platform spends taking the request in. A benchmark of the platform that
 * shares the machine with its load generator would then measure the client
 * as much as the server. Anything this client does not expect (no
 * `Content-Length`, a closed connection) fails the request loudly instead of
 * being read wrongly.
 */
import { connect, type Socket } from 'node:net';

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i;

export class HttpLane {
  private socket: Socket | null = null;
  private ready: Promise<void> = Promise.resolve();
  private received: Buffer = Buffer.alloc(0);
  private waiting: { resolve: (status: number) => void; reject: (error: Error) => void } | null = null;

  constructor(
    private readonly port: number,
    private readonly host = '127.0.0.1',
  ) {}

  /** Sends one request and resolves with the answer's status once its body has been read. */
  async send(method: string, path: string, headers: string, body: string): Promise<number> {
    if (this.waiting) throw new Error('one request at a time on a lane');
    // A server closes kept-alive connections that stay idle (between phases); open a new one then, as pooling clients do.
    if (!this.socket) this.open();
    const socket = this.socket!;
    await this.ready;
    const answer = new Promise<number>((resolve, reject) => (this.waiting = { resolve, reject }));
    socket.write(`${method} ${path} HTTP/1.1\r\nhost: ${this.host}\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    return answer;
  }

  close(): void {
    this.socket?.destroy();
    this.socket = null;
  }

  private open(): void {
    const socket = connect({ port: this.port, host: this.host, noDelay: true });
    this.socket = socket;
    this.received = Buffer.alloc(0);
    this.ready = new Promise((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    this.ready.catch(() => undefined);
    socket.on('data', (chunk) => this.read(chunk));
    socket.on('error', (error) => this.fail(error));
    socket.on('close', () => {
      if (this.socket === socket) this.socket = null;
      this.fail(new Error('the server closed the connection during a request'));
    });
  }

  private read(chunk: Buffer): void {
    this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk]);
    const end = this.received.indexOf(HEADER_END);
    if (end < 0) return;
    const head = this.received.toString('latin1', 0, end);
    const length = CONTENT_LENGTH.exec(head);
    if (!length) return this.fail(new Error(`an answer without Content-Length: ${head.split('\r\n')[0]}`));
    const total = end + HEADER_END.length + Number(length[1]);
    if (this.received.length < total) return;
    const status = Number(head.slice(9, 12));
    this.received = this.received.subarray(total);
    const waiting = this.waiting;
    this.waiting = null;
    if (!waiting) return this.fail(new Error('an answer to no request'));
    waiting.resolve(status);
  }

  /** Fails the request in flight, if any; an idle lane just reconnects on its next request. */
  private fail(error: Error): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.reject(error);
  }
}
