import type { Request, Response } from 'express';

/** `limit`, `offset` and `options=count` of a list, as the document declares them (`ListLimit`, `ListOffset`, `ListOptions`). */
export interface Page {
  limit: number;
  offset: number;
  /** `options=count`: answer the total in `X-Total-Count`. */
  count: boolean;
}

export function pageOf(req: Request): Page {
  return {
    limit: Number(req.query.limit ?? 100),
    offset: Number(req.query.offset ?? 0),
    count: String(req.query.options ?? '').split(',').includes('count'),
  };
}

/** Sets `X-Total-Count` when the caller asked for it; `total` runs only then. */
export async function totalCount(res: Response, page: Page, total: () => Promise<number>): Promise<void> {
  if (page.count) res.setHeader('X-Total-Count', String(await total()));
}
