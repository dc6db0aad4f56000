/** Heap a translator may use, as the platform's limits promise. */
export const MEMORY_LIMIT_BYTES = 16 * 1024 * 1024;

/**
 * The most elements an array in the sandbox can hold: each takes 8 bytes
 * (a JSValue in this 32-bit build), so an array this long would fill the
 * whole heap. A longer `length` only exists without its elements (a sparse
 * array, an object such as `{length: 2 ** 40}`), and native methods that
 * loop up to it never let the deadline interrupt them (guards.ts).
 */
export const MAX_ARRAY_LENGTH = MEMORY_LIMIT_BYTES / 8;
