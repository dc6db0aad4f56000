import type { Generated } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import { IMAGE_EVENTS, type ImageCategory, type ImageEvent } from '../domain/images/image.js';
import type { ImageType } from '../domain/images/detect.js';
import type { Projection } from './runner.js';

export interface ImagesTable {
  id: string;
  name: string;
  category: ImageCategory;
  content_type: ImageType;
  size: number;
  sha256: string;
  created_by: string;
  revision: number;
  created_at: Date;
}

/**
 * Image bytes: written by the upload before its event, removed by the images
 * projection as it applies the deletion event, in the same transaction, so no
 * answer of the request (a 503, a crash) can leave them. Not a read model: a
 * rebuild keeps the table, and its replay of the deletions removes bytes that
 * deletions before this rule left.
 */
export interface ImageBlobsTable {
  image_id: string;
  sha256: string;
  bytes: Buffer;
  created_at: Generated<Date>;
}

export interface ImagesTables {
  images: ImagesTable;
  image_blobs: ImageBlobsTable;
}

export const imagesProjection: Projection = {
  name: 'images',
  tables: ['images'],
  async apply(tx, batch) {
    for (const recorded of batch) {
      if (!IMAGE_EVENTS.has(recorded.type)) continue;
      const event = recorded as RecordedEvent & ImageEvent;
      if (event.type === 'ImageUploaded') {
        const d = event.data;
        await tx
          .insertInto('images')
          .values({
            id: d.id,
            name: d.name,
            category: d.category,
            content_type: d.contentType,
            size: d.size,
            sha256: d.sha256,
            created_by: d.createdBy,
            revision: event.revision,
            created_at: new Date(d.at),
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
      } else {
        await tx.deleteFrom('images').where('id', '=', event.data.id).where('revision', '<', event.revision).execute();
        // The bytes go with the stored deletion: image ids are never used again, so applying it twice changes nothing.
        await tx.deleteFrom('image_blobs').where('image_id', '=', event.data.id).execute();
      }
    }
  },
};
