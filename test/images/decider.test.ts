import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { imageDecider, type ImageEvent, type ImageRecord } from '../../domain/images/image.js';
import { ConflictError, NotFoundError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const images = suite('image decider');

const at = '2026-01-01T00:00:00.000Z';
const later = '2026-01-02T00:00:00.000Z';
const image: ImageRecord = {
  id: '555555555555555555555555',
  createdBy: '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e',
  name: 'hall-3.png',
  category: 'floorPlan',
  contentType: 'image/png',
  size: 2048,
  sha256: 'f'.repeat(64),
};
const uploaded: ImageEvent = { type: 'ImageUploaded', data: { ...image, at } };
const deleted: ImageEvent = { type: 'ImageDeleted', data: { id: image.id, at: later } };

const given = (events: ImageEvent[]) => deciderSpec(imageDecider).given(events);

images('given no image, when it is uploaded, then ImageUploaded keeps its record, and the state holds the record without the time', () => {
  given([]).when({ type: 'UploadImage', image, at }).then([uploaded]);
  assert.equal(given([uploaded]).state, { status: 'active', image });
});

images('given an image, live or deleted, when one is uploaded under its id, then a conflict names it', () => {
  for (const events of [[uploaded], [uploaded, deleted]]) {
    given(events).when({ type: 'UploadImage', image: { ...image, name: 'other.png' }, at: later }).thenThrows(ConflictError, `Image ${image.id} already exists`);
  }
});

images('given an image, when it is deleted, then ImageDeleted names it by the id it was uploaded under', () => {
  given([uploaded]).when({ type: 'DeleteImage', at: later }).then([deleted]);
});

images('given no image or a deleted one, when it is deleted, then Image not found', () => {
  given([]).when({ type: 'DeleteImage', at: later }).thenThrows(NotFoundError, 'Image not found');
  given([uploaded, deleted]).when({ type: 'DeleteImage', at: later }).thenThrows(NotFoundError, 'Image not found');
});

images.run();
