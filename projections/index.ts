import type { Projection } from './runner.js';
import { usersProjection } from './users.js';

/** Every projection, in the order they apply a batch. */
export const allProjections = (): Projection[] => [usersProjection];
