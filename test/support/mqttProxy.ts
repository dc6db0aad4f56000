import { createServer, connect, type Server, type Socket } from 'node:net';

/** MQTT control packet types (the high nibble of the first byte). */
export const PUBLISH = 3;
export const PUBACK = 4;

/** Splits a byte stream into whole MQTT packets (fixed header, remaining length, body). */
class Framer {
  private buffer = Buffer.alloc(0);

  push(chunk: Buffer): Buffer[] {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    const packets: Buffer[] = [];
    for (;;) {
      let length = 0;
      let multiplier = 1;
      let i = 1;
      for (; i < this.buffer.length && i <= 4; i++) {
        const byte = this.buffer[i]!;
        length += (byte & 0x7f) * multiplier;
        multiplier *= 128;
        if ((byte & 0x80) === 0) break;
      }
      if (i >= this.buffer.length || this.buffer.length < i + 1 + length) return packets;
      packets.push(this.buffer.subarray(0, i + 1 + length));
      this.buffer = this.buffer.subarray(i + 1 + length);
    }
  }
}

/**
 * A TCP hop between an MQTT client and its broker that can lose the
 * client's next PUBACK together with the connection, as a network does when
 * it fails right after the client acknowledged a message. It sees every
 * packet whole, and records the PUBLISH packets the broker sends (with their
 * DUP flag), so a test knows a re-send really happened.
 */
export class MqttProxy {
  host = '';
  readonly port = 1883;
  /** When set, the client's next PUBACK is dropped and the connection cut. */
  loseNextPubAck = false;
  /** PUBLISH packets from the broker: their DUP flag and packet id. */
  readonly published: { dup: boolean; packetId: number }[] = [];
  /** The packet ids of the client's PUBACKs, in the order it sent them. */
  readonly acked: number[] = [];
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<this> {
    for (let tries = 0; ; tries++) {
      this.host = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
      const server = createServer((client) => this.pipe(client));
      const ok = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(this.port, this.host, () => resolve(true));
      });
      if (ok) {
        this.server = server;
        return this;
      }
      if (tries >= 5) throw new Error('no free loopback address for the MQTT proxy');
    }
  }

  private pipe(client: Socket): void {
    const broker = connect(this.target.port, this.target.host);
    this.sockets.add(client);
    this.sockets.add(broker);
    const cut = () => {
      client.destroy();
      broker.destroy();
    };
    client.on('close', cut);
    broker.on('close', cut);
    client.on('error', cut);
    broker.on('error', cut);
    const up = new Framer();
    client.on('data', (chunk: Buffer) => {
      for (const packet of up.push(chunk)) {
        if (packet[0]! >> 4 === PUBACK && this.loseNextPubAck) {
          this.loseNextPubAck = false;
          return cut();
        }
        if (packet[0]! >> 4 === PUBACK) this.acked.push(packet.readUInt16BE(2));
        broker.write(packet);
      }
    });
    const down = new Framer();
    broker.on('data', (chunk: Buffer) => {
      for (const packet of down.push(chunk)) {
        if (packet[0]! >> 4 === PUBLISH && ((packet[0]! >> 1) & 0x03) > 0) {
          // Fixed header, then the topic (2-byte length + text), then the packet id.
          let i = 1;
          while (packet[i]! & 0x80) i++;
          const topicLength = packet.readUInt16BE(i + 1);
          this.published.push({ dup: (packet[0]! & 0x08) !== 0, packetId: packet.readUInt16BE(i + 3 + topicLength) });
        }
        client.write(packet);
      }
    });
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
