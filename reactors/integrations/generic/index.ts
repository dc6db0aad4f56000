import { Unreachable, type IntegrationModule } from '../types.js';

/**
 * The Generic connector: MQTT. With the internal broker its devices publish on
 * reserved topics of its credentials set (the broker and the ingest pipeline
 * handle those), and its downlinks are published on the set's push topic.
 * With an external broker, the platform is a client of that broker.
 */
export const generic: IntegrationModule = {
  name: 'Generic',
  downlink: {
    async execute(request, connector, context) {
      if (request.kind !== 'publish' || !request.publish) return { type: 'refused', message: `the Generic integration takes no ${request.kind} commands` };
      try {
        await context.publish(connector, request.publish.topic, request.publish.message, request.id);
      } catch (err) {
        throw new Unreachable(`publishing on ${request.publish.topic} failed: ${(err as Error).message}`);
      }
      return { type: 'accepted' };
    },
  },
};
