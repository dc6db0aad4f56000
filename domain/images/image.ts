import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError } from '../shared/errors.js';
import type { ImageType } from './detect.js';

export const IMAGE_CATEGORIES = ['widget', 'floorPlan', 'mapOverlay'] as const;
export type ImageCategory = (typeof IMAGE_CATEGORIES)[number];

/** What the event log keeps of an image; the bytes live in `image_blobs`, found by image id and checked by `sha256`. */
export interface ImageRecord {
  id: string;
  createdBy: string;
  name: string;
  category: ImageCategory;
  contentType: ImageType;
  size: number;
  sha256: string;
}

export type ImageEvent =
  | { type: 'ImageUploaded'; data: ImageRecord & { at: string } }
  | { type: 'ImageDeleted'; data: { id: string; at: string } };

export const IMAGE_EVENTS = new Set<string>(['ImageUploaded', 'ImageDeleted'] satisfies ImageEvent['type'][]);

export type ImageCommand = { type: 'UploadImage'; image: ImageRecord; at: string } | { type: 'DeleteImage'; at: string };

export type ImageState = { status: 'none' } | { status: 'active'; image: ImageRecord } | { status: 'deleted' };

export const imageStream = (id: string) => `image-${id}`;

export const imageDecider: Decider<ImageCommand, ImageState, ImageEvent> = {
  initialState: () => ({ status: 'none' }),

  decide(command, state) {
    switch (command.type) {
      case 'UploadImage':
        if (state.status !== 'none') throw new ConflictError(`Image ${command.image.id} already exists`);
        return [{ type: 'ImageUploaded', data: { ...command.image, at: command.at } }];
      case 'DeleteImage':
        if (state.status !== 'active') throw new NotFoundError('Image not found');
        return [{ type: 'ImageDeleted', data: { id: state.image.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'ImageUploaded': {
        const { at: _at, ...image } = event.data;
        return { status: 'active', image };
      }
      case 'ImageDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
