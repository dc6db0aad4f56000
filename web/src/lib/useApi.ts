import { useCallback, useEffect, useState } from 'react';
import { call, describe } from './api';

/** A GET that a page shows: its body, its headers, an error in words, and a way to read it again. */
export function useApi<T>(path: string | null, what = 'Reading'): { data: T | null; headers: Headers | null; error: string | null; status: number | null; reload: () => Promise<void> } {
  const [state, setState] = useState<{ data: T | null; headers: Headers | null; error: string | null; status: number | null }>({ data: null, headers: null, error: null, status: null });
  const reload = useCallback(async () => {
    if (!path) return;
    try {
      const r = await call<T>('GET', path);
      setState({ data: r.body, headers: r.headers, error: null, status: r.status });
    } catch (e) {
      setState((s) => ({ ...s, error: describe(e, what), status: (e as { status?: number }).status ?? null }));
    }
  }, [path, what]);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { ...state, reload };
}
