import { createContext, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import { getBlob, describe } from '../lib/api';
import type { DeviceState } from '../lib/devices';
import { ErrorText, Loading } from '../components/ui';

export interface WidgetProps<S = Record<string, any>> {
  settings: S;
  widgetId: string;
  dashboardId: string;
  /** Inner size in pixels. */
  width: number;
  height: number;
}

/** Each widget tells its dashboard once it shows its first data (or why it cannot). */
export const ReadyContext = createContext<(id: string) => void>(() => {});
const WidgetIdContext = createContext<string>('');
export const WidgetIdProvider = WidgetIdContext.Provider;

export function useReady(done: boolean): void {
  const report = useContext(ReadyContext);
  const id = useContext(WidgetIdContext);
  const sent = useRef(false);
  useEffect(() => {
    if (done && !sent.current) {
      sent.current = true;
      report(id);
    }
  }, [done, report, id]);
}

/** What a widget shows for a device it cannot read: "no access" and nothing else. */
export function NoAccess() {
  return (
    <div className="no-access" role="note" title="The device does not exist, or you may not read it.">
      no access
    </div>
  );
}

/** Loading, no access or an error for a device; null when the device is there. */
export function deviceProblem(state: DeviceState): ReactNode | null {
  switch (state.status) {
    case 'loading':
      return <Loading />;
    case 'noaccess':
      return <NoAccess />;
    case 'error':
      return <ErrorText>{state.message}</ErrorText>;
    case 'ok':
      return null;
  }
}

export const settled = (state: DeviceState) => state.status !== 'loading';

/** An uploaded image (`GET /api/images/{id}`, with the token) as an object URL. */
export function useImage(imageId: string | undefined): { url: string | null; error: string | null } {
  const [state, setState] = useState<{ url: string | null; error: string | null }>({ url: null, error: null });
  useEffect(() => {
    if (!imageId) return setState({ url: null, error: 'No image is chosen.' });
    let url: string | null = null;
    let gone = false;
    getBlob(`/api/images/${encodeURIComponent(imageId)}`).then(
      (blob) => {
        if (gone) return;
        url = URL.createObjectURL(blob);
        setState({ url, error: null });
      },
      (e) => !gone && setState({ url: null, error: describe(e, 'The image') }),
    );
    return () => {
      gone = true;
      if (url) URL.revokeObjectURL(url);
    };
  }, [imageId]);
  return state;
}

export function Heading({ text, sub }: { text?: string | false; sub?: string | false }) {
  if (!text && !sub) return null;
  return (
    <div className="w-heading">
      {text && <div className="w-title">{text}</div>}
      {sub && <div className="w-sub muted">{sub}</div>}
    </div>
  );
}
