/**
 * A signal that aborts after `ms`, or as soon as `stop` aborts, whichever
 * comes first; `clear()` once the work is done. It is what
 * `AbortSignal.any([AbortSignal.timeout(ms), stop])` gives, without its cost
 * on Node 20: every signal combined with a long-lived `stop` stays referenced
 * from it (about 24 bytes each, measured), so a reactor that sends thousands
 * of requests an hour would grow for as long as it runs.
 */
export function deadline(ms: number, stop: AbortSignal): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), ms);
  const onStop = () => controller.abort(stop.reason);
  if (stop.aborted) onStop();
  else stop.addEventListener('abort', onStop, { once: true });
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
    },
  };
}
