import { createHash } from 'node:crypto';
import { Router, type RequestHandler } from 'express';
import multer from 'multer';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess } from '../access.js';
import { detectImage } from '../../domain/images/detect.js';
import { imageDecider, imageStream, type ImageCategory, type ImageRecord } from '../../domain/images/image.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { NotFoundError, PayloadTooLargeError, ValidationError } from '../../domain/shared/errors.js';
import type { ImagesTable } from '../../projections/images.js';

/** The largest image accepted; a larger file gets 413. */
export const IMAGE_LIMIT_BYTES = 10 * 1024 * 1024;

/** Scripts never run in a served SVG, whoever opens it directly. */
const SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox";

const toImage = (row: Pick<ImagesTable, 'id' | 'name' | 'category' | 'content_type' | 'size' | 'created_at'>) => ({
  _id: row.id,
  name: row.name,
  category: row.category,
  contentType: row.content_type,
  size: row.size,
  createdAt: row.created_at.toISOString(),
});

/**
 * Parses the upload form of `POST /api/images` (in memory, bounded) before
 * request validation, so the OpenAPI document checks `name`, `category` and
 * the presence of `image` like any other body. It runs after authentication:
 * an anonymous caller never gets a body read.
 */
export function imageUploadParser(): RequestHandler {
  const upload = multer({
    storage: multer.memoryStorage(),
    limits: { fileSize: IMAGE_LIMIT_BYTES, files: 1, fields: 10, fieldSize: 4096, parts: 12 },
  }).single('image');
  return (req, res, next) => {
    if (req.method !== 'POST' || req.path !== '/api/images' || !req.principal || !req.is('multipart/form-data')) return next();
    upload(req, res, (error: unknown) => {
      if (!error) {
        // The file part stands in the body as the document's `image` (format binary); the bytes stay in `req.file`.
        if (req.file) (req.body as Record<string, unknown>).image = '';
        return next();
      }
      if (error instanceof multer.MulterError) {
        if (error.code === 'LIMIT_FILE_SIZE') return next(new PayloadTooLargeError(`ERR - image is larger than ${IMAGE_LIMIT_BYTES} bytes`));
        if (error.code === 'LIMIT_UNEXPECTED_FILE') return next(ValidationError.field(error.field ?? 'file', 'is not an expected file; send the image as image'));
        return next(ValidationError.field('body', `is not an accepted form (${error.message})`));
      }
      next(ValidationError.field('body', 'is not a valid multipart form'));
    });
  };
}

export function imageRoutes(deps: Deps): Router {
  const router = Router();

  router.post('/api/images', async (req, res) => {
    const principal = principalOf(req);
    const fields = req.body as { name: string; category: ImageCategory };
    const file = req.file;
    if (!file) throw ValidationError.field('image', 'is required');
    const detected = detectImage(file.buffer);
    if ('problem' in detected) throw ValidationError.field('image', detected.problem);
    const id = newResourceId();
    const sha256 = createHash('sha256').update(file.buffer).digest('hex');
    // The bytes first: the event that points at them is only written once they are stored.
    await deps.db.insertInto('image_blobs').values({ image_id: id, sha256, bytes: file.buffer }).execute();
    const image: ImageRecord = {
      id,
      createdBy: principal.id,
      name: fields.name,
      category: fields.category,
      contentType: detected.type,
      size: file.size,
      sha256,
    };
    const context = requestContext(deps, req);
    try {
      await write(deps, context, imageStream(id), imageDecider, { type: 'UploadImage', image, at: context.now });
    } catch (error) {
      // Only an event that was not stored leaves the bytes unreferenced; a stored one still points at them.
      if (!(await deps.store.readStream(imageStream(id))).length) await deps.db.deleteFrom('image_blobs').where('image_id', '=', id).execute();
      throw error;
    }
    res.status(201).json({ _id: id, name: image.name, category: image.category, contentType: image.contentType, size: image.size, createdAt: context.now });
  });

  router.get('/api/images', async (req, res) => {
    const rows = await deps.db
      .selectFrom('images')
      .select(['id', 'name', 'category', 'content_type', 'size', 'created_at'])
      .where(readableBy(principalOf(req), 'images.id'))
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    res.json(rows.map(toImage));
  });

  router.get('/api/images/:imageId', async (req, res) => {
    const id = req.params.imageId!;
    await requireAccess(deps, principalOf(req), id, 'read', 'Image not found');
    const row = await deps.db
      .selectFrom('images')
      .innerJoin('image_blobs', 'image_blobs.image_id', 'images.id')
      .select(['images.content_type', 'images.sha256', 'image_blobs.bytes'])
      .where('images.id', '=', id)
      .executeTakeFirst();
    if (!row) throw new NotFoundError('Image not found');
    res.setHeader('Content-Type', row.content_type);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('ETag', `"${row.sha256}"`);
    res.setHeader('Cache-Control', 'private, max-age=0, must-revalidate');
    if (row.content_type === 'image/svg+xml') res.setHeader('Content-Security-Policy', SVG_POLICY);
    res.end(row.bytes);
  });

  router.delete('/api/images/:imageId', async (req, res) => {
    const id = req.params.imageId!;
    await requireAccess(deps, principalOf(req), id, 'write', 'Image not found');
    const context = requestContext(deps, req);
    // The images projection removes the bytes as it applies the stored ImageDeleted, before this write answers.
    await write(deps, context, imageStream(id), imageDecider, { type: 'DeleteImage', at: context.now });
    res.status(204).end();
  });

  return router;
}
