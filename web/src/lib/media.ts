import { useSyncExternalStore } from 'react';

/** Whether a CSS media query matches, following changes. */
export function useMedia(query: string): boolean {
  return useSyncExternalStore(
    (l) => {
      const m = matchMedia(query);
      m.addEventListener('change', l);
      return () => m.removeEventListener('change', l);
    },
    () => matchMedia(query).matches,
  );
}
