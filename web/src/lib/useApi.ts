import { useCallback, useEffect, useRef, useState } from 'react';
import { call, describe } from './api';

interface State<T> {
  data: T | null;
  headers: Headers | null;
  error: string | null;
  status: number | null;
  /** The path the data and headers were read from. */
  path: string | null;
}

/**
 * A GET that a page shows: its body, its headers, an error in words, and a way
 * to read it again. An answer for a path the page no longer asks for is
 * dropped (answers may come back out of order), and `stale` says the data on
 * show is still that of an earlier path while the current one is read.
 */
export function useApi<T>(path: string | null, what = 'Reading'): Omit<State<T>, 'path'> & { stale: boolean; reload: () => Promise<void> } {
  const [state, setState] = useState<State<T>>({ data: null, headers: null, error: null, status: null, path: null });
  const wanted = useRef(path);
  wanted.current = path;
  const reload = useCallback(async () => {
    if (!path) return;
    try {
      const r = await call<T>('GET', path);
      if (wanted.current === path) setState({ data: r.body, headers: r.headers, error: null, status: r.status, path });
    } catch (e) {
      if (wanted.current === path) setState((s) => ({ ...s, error: describe(e, what), status: (e as { status?: number }).status ?? null, path }));
    }
  }, [path, what]);
  useEffect(() => {
    void reload();
  }, [reload]);
  const { path: shown, ...rest } = state;
  return { ...rest, stale: path !== null && shown !== path, reload };
}
