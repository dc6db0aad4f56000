import { connect, type Socket } from 'node:net';
import mqttPacket from 'mqtt-packet';

/** A bare MQTT 3.1.1 client, so the test chooses packet ids and the DUP flag itself. */
export class RawPublisher {
  readonly acked = new Set<number>();
  /** PUBACKs received, a packet id used again counted again. */
  acks = 0;
  private socket!: Socket;
  private connack!: Promise<void>;

  constructor(private readonly port: number) {}

  connect(username: string, password: string): Promise<void> {
    this.socket = connect(this.port, '127.0.0.1');
    this.socket.on('error', () => undefined);
    const parser = mqttPacket.parser({ protocolVersion: 4 });
    this.connack = new Promise((resolve, reject) => {
      parser.on('packet', (packet) => {
        if (packet.cmd === 'connack') (packet.returnCode === 0 ? resolve() : reject(new Error(`connack ${packet.returnCode}`)));
        if (packet.cmd === 'puback') {
          this.acked.add(packet.messageId!);
          this.acks++;
        }
      });
    });
    this.socket.on('data', (d) => parser.parse(d));
    this.socket.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: false, clientId: 'burst-publisher', keepalive: 60, username, password: Buffer.from(password) }));
    return this.connack;
  }

  publish(messageId: number, topic: string, payload: string, dup: boolean): void {
    this.socket.write(mqttPacket.generate({ cmd: 'publish', qos: 1, messageId, topic, payload, dup, retain: false }));
  }

  /** Several QoS 1 publishes in one write, so the broker reads them in one turn of its event loop. */
  publishAll(messages: { messageId: number; topic: string; payload: string; dup?: boolean }[]): void {
    this.socket.write(Buffer.concat(messages.map((m) => mqttPacket.generate({ cmd: 'publish', qos: 1, messageId: m.messageId, topic: m.topic, payload: m.payload, dup: m.dup ?? false, retain: false }))));
  }

  close(): void {
    this.socket.destroy();
  }
}

