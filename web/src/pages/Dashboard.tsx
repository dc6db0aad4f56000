import { lazy, memo, Suspense, useCallback, useEffect, useMemo, useRef, useState, type CSSProperties } from 'react';
import { useNavigate, useParams, useSearchParams } from 'react-router';
import ReactGridLayout, { useContainerWidth, verticalCompactor, type Layout } from 'react-grid-layout';
import 'react-grid-layout/css/styles.css';
import { api, ApiError, call, describe, get } from '../lib/api';
import { can } from '../lib/session';
import { gridSizes, openapi, type GridSize } from '../lib/openapi';
import { toBase64 } from '../lib/format';
import { Boundary, ErrorText, Loading, Modal } from '../components/ui';
import { ReadyContext, WidgetIdProvider } from '../widgets/common';
import { TEMPLATE_LABELS, WIDGETS } from '../widgets';
import { useMedia } from '../lib/media';
import { takeEarly, type EarlyRead } from '../lib/early';
import { deviceIdsIn, prefetch } from '../lib/devices';

const WidgetForm = lazy(() => import('../forms/WidgetForm'));
const HeaderForm = lazy(() => import('../forms/HeaderForm'));
const ShareDialog = lazy(() => import('./Share'));

export interface Widget {
  _id: string;
  x: number;
  y: number;
  width: number;
  height: number;
  template: string;
  settings: Record<string, any>;
  _broken?: boolean;
  error?: string;
}
export interface Dashboard {
  _id: string;
  name: string;
  title?: string;
  description?: string;
  headerSettings?: Record<string, any>;
  widgets: Widget[];
}

/** The spec's grid: 24 columns, rows of 25 px, gaps of 10 px, packed upwards. */
export const GRID = { cols: 24, rowHeight: 25, margin: [10, 10] as [number, number], containerPadding: [0, 0] as [number, number] };
const pxHeight = (h: number) => h * GRID.rowHeight + (h - 1) * GRID.margin[1];

type Dialog = { kind: 'add' } | { kind: 'edit'; widget: Widget } | { kind: 'header' } | { kind: 'export' } | { kind: 'share' } | { kind: 'delete' } | null;

export default function DashboardPage() {
  const { id = '' } = useParams();
  const navigate = useNavigate();
  const [params, setParams] = useSearchParams();
  const [dash, setDash] = useState<Dashboard | null>(null);
  const [gone, setGone] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [scopes, setScopes] = useState<string[]>([]);
  const [sizes, setSizes] = useState<Record<string, GridSize> | null>(null);
  const [dialog, setDialog] = useState<Dialog>(null);
  const phone = useMedia('(max-width: 760px)');

  const writable = scopes.includes('write') || scopes.includes('admin');
  const canEdit = writable && can('dashboard', 'PATCH');
  const editing = canEdit && params.get('edit') === '1' && !phone;

  /**
   * The revision the dashboard on show was read at, or the last write of this page left (its `ETag`). The page's
   * changes are sent with it as `If-Match`, so one made over a version someone else has since changed is refused
   * (412) instead of overwriting theirs.
   */
  const etag = useRef<string | null>(null);
  /** The page's PATCHes, one after another: each is sent with the revision the one before it left. */
  const patches = useRef<Promise<unknown>>(Promise.resolve());

  const load = useCallback(async () => {
    try {
      let read: EarlyRead | null = (await takeEarly(id)?.catch(() => null)) ?? null;
      if (!read) {
        const r = await call<Dashboard>('GET', `/api/dashboards/${encodeURIComponent(id)}`);
        read = { body: r.body, etag: r.headers.get('etag') };
      }
      const d = read.body as Dashboard;
      etag.current = read.etag;
      performance.mark('dashboard-data');
      prefetch(deviceIdsIn(d.widgets.map((w) => w.settings)));
      setDash(d);
      setGone(false);
      setError(null);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) setGone(true);
      else setError(describe(e, 'Loading the dashboard'));
    }
  }, [id]);

  useEffect(() => {
    setDash(null);
    setGone(false);
    void load();
    get<{ scope: string[] }>(`/api/access-rights/resource/${encodeURIComponent(id)}/mine`).then(
      (r) => setScopes(r.scope),
      () => setScopes([]),
    );
  }, [id, load]);

  useEffect(() => {
    if (editing && !sizes) openapi().then((d) => setSizes(gridSizes(d)), (e) => setError(describe(e, 'Reading the widget sizes')));
  }, [editing, sizes]);

  /** `PATCH` of the dashboard against the revision on show; the answer's `ETag` is the one the next change is made against. */
  const patch = (body: unknown): Promise<unknown> => {
    const run = patches.current.then(async () => {
      const r = await call('PATCH', `/api/dashboards/${encodeURIComponent(id)}`, { body, headers: etag.current ? { 'if-match': etag.current } : {} });
      // A change that changed nothing leaves the revision, and answers without an ETag.
      etag.current = r.headers.get('etag') ?? etag.current;
      return r.body;
    });
    patches.current = run.catch(() => undefined);
    return run;
  };

  /** Someone else changed the dashboard since it was read: it is read again, and the user is told. */
  const conflicted = async () => {
    setDialog(null);
    setNotice('Someone else changed this dashboard in the meantime, so your change was not saved. The dashboard was read again with their change: make yours once more.');
    await load();
  };

  /** Runs a dashboard write; a dashboard deleted meanwhile, or a layout changed by someone else, is said in words. */
  const act = async (what: string, fn: () => Promise<unknown>, reload = true) => {
    setError(null);
    setNotice(null);
    try {
      await fn();
      if (reload) await load();
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404 && /dashboard/i.test(e.message + what)) setGone(true);
      else if (e instanceof ApiError && e.status === 412) await conflicted();
      else if (e instanceof ApiError && e.status === 422 && e.message.includes('All existing widgets must be provided')) {
        setNotice('Someone added or removed widgets meanwhile; the dashboard was read again. Make your change once more.');
        await load();
      } else setError(describe(e, what));
      return false;
    }
  };

  const saveLayout = (layout: Layout) => {
    if (!dash) return;
    const places = new Map(layout.map((l) => [l.i, l]));
    const widgets = dash.widgets.map((w) => {
      const l = places.get(w._id);
      return { _id: w._id, x: l?.x ?? w.x, y: l?.y ?? w.y, width: l?.w ?? w.width, height: l?.h ?? w.height };
    });
    const changed = widgets.some((w, i) => {
      const o = dash.widgets[i]!;
      return o.x !== w.x || o.y !== w.y || o.width !== w.width || o.height !== w.height;
    });
    if (!changed) return;
    setDash({ ...dash, widgets: dash.widgets.map((w, i) => ({ ...w, ...widgets[i]! })) });
    void act('Saving the layout', () => patch({ widgets }), false);
  };

  // Widgets report when they show their first data; the page then marks itself ready (tests and the benchmark wait on it).
  // Only the last report re-renders the page: a render per report would redraw every widget each time.
  const readySet = useRef(new Set<string>());
  const dashRef = useRef<Dashboard | null>(null);
  dashRef.current = dash;
  const [allReady, setAllReady] = useState(false);
  const checkReady = useCallback(() => {
    const d = dashRef.current;
    if (d && d.widgets.every((w) => readySet.current.has(w._id) || w._broken)) setAllReady(true);
  }, []);
  const report = useCallback(
    (wid: string) => {
      if (readySet.current.has(wid)) return;
      readySet.current.add(wid);
      checkReady();
    },
    [checkReady],
  );
  useEffect(checkReady, [dash, checkReady]);
  useEffect(() => {
    if (allReady) performance.mark('dashboard-ready');
  }, [allReady]);

  // Stable across renders, so the memoised widgets are not drawn again for nothing.
  const handlers = useRef({ saveLayout, act, setDialog });
  handlers.current = { saveLayout, act, setDialog };
  const onLayout = useCallback((l: Layout) => handlers.current.saveLayout(l), []);
  const onAction = useCallback(
    (kind: 'edit' | 'duplicate' | 'delete', w: Widget) => {
      const h = handlers.current;
      if (kind === 'edit') h.setDialog({ kind: 'edit', widget: w });
      if (kind === 'duplicate') void h.act('Duplicating the widget', () => api('POST', `/api/dashboards/${id}/widgets/${w._id}/duplicate`));
      if (kind === 'delete' && confirm(`Delete this ${TEMPLATE_LABELS[w.template] ?? w.template} widget? This cannot be undone.`)) void h.act('Deleting the widget', () => api('DELETE', `/api/dashboards/${id}/widgets/${w._id}`));
    },
    [id],
  );

  if (gone)
    return (
      <section className="card" role="alert">
        <h1>This dashboard is gone</h1>
        <p>It was deleted, or you no longer have access to it.</p>
        <button type="button" className="primary" onClick={() => navigate('/')}>
          Back to the dashboards
        </button>
      </section>
    );
  if (!dash) return error ? <ErrorText>{error}</ErrorText> : <Loading what="Loading the dashboard" />;

  const h = dash.headerSettings ?? {};
  const headerStyle: CSSProperties = { textAlign: h.align ?? 'left', fontFamily: h.fontFamily };
  const toggleEdit = () => setParams(editing ? {} : { edit: '1' }, { replace: true });

  return (
    <ReadyContext.Provider value={report}>
      <section className={editing ? 'dashboard editing' : 'dashboard'} data-ready={allReady ? 'true' : 'false'} aria-labelledby="dashboard-title">
        <header className="dash-head" style={headerStyle}>
          <h1 id="dashboard-title" style={{ fontSize: h.titleFontSize ? `${h.titleFontSize}px` : undefined, fontWeight: h.titleFontWeight, color: h.titleColor }}>
            {dash.title || dash.name}
          </h1>
          {dash.description && (
            <p className="dash-desc" style={{ fontSize: h.descriptionFontSize ? `${h.descriptionFontSize}px` : undefined, color: h.descriptionColor }}>
              {dash.description}
            </p>
          )}
        </header>
        <div className="toolbar" role="toolbar" aria-label="Dashboard actions">
          {canEdit && !phone && (
            <button type="button" className={editing ? 'primary' : ''} aria-pressed={editing} onClick={toggleEdit}>
              {editing ? 'Done editing' : 'Edit'}
            </button>
          )}
          {editing && (
            <>
              <button type="button" onClick={() => setDialog({ kind: 'add' })}>
                Add widget
              </button>
              <button type="button" onClick={() => setDialog({ kind: 'header' })}>
                Name and header
              </button>
            </>
          )}
          {writable && can('dashboard', 'POST') && (
            <button type="button" onClick={() => void act('Duplicating the dashboard', async () => navigate(`/dashboards/${(await api<{ _id: string }>('POST', `/api/dashboards/${id}/duplicate`))._id}`), false)}>
              Duplicate
            </button>
          )}
          <button type="button" onClick={() => setDialog({ kind: 'export' })}>
            Export
          </button>
          {scopes.includes('admin') && (
            <button type="button" onClick={() => setDialog({ kind: 'share' })}>
              Share
            </button>
          )}
          {writable && can('dashboard', 'DELETE') && (
            <button type="button" className="danger" onClick={() => setDialog({ kind: 'delete' })}>
              Delete
            </button>
          )}
        </div>
        {phone && canEdit && <p className="muted small">Editing the layout needs a wider screen.</p>}
        {notice && (
          <p className="notice" role="status">
            {notice}
          </p>
        )}
        <ErrorText>{error}</ErrorText>
        {dash.widgets.length === 0 && <p className="muted">{editing ? 'No widgets yet: add one.' : 'This dashboard has no widgets.'}</p>}
        {phone ? (
          <div className="stack">
            {[...dash.widgets]
              .sort((a, b) => a.y - b.y || a.x - b.x)
              .map((w) => (
                <div key={w._id} className="stack-item" style={{ height: Math.max(120, pxHeight(w.height)) }}>
                  <WidgetFrame widget={w} dashboardId={id} editing={false} width={320} height={Math.max(120, pxHeight(w.height))} />
                </div>
              ))}
          </div>
        ) : (
          <Grid dash={dash} editing={editing} sizes={sizes} onLayout={onLayout} onAction={onAction} />
        )}
      </section>
      <Suspense fallback={null}>
        {dialog?.kind === 'add' && <WidgetForm dashboardId={id} onClose={() => setDialog(null)} onSaved={() => (setDialog(null), void load())} onGone={() => setGone(true)} />}
        {dialog?.kind === 'edit' && <WidgetForm dashboardId={id} widget={dialog.widget} onClose={() => setDialog(null)} onSaved={() => (setDialog(null), void load())} onGone={() => setGone(true)} />}
        {dialog?.kind === 'header' && <HeaderForm dashboard={dash} patch={patch} onClose={() => setDialog(null)} onSaved={() => (setDialog(null), setNotice(null), void load())} onGone={() => setGone(true)} onConflict={() => void conflicted()} />}
        {dialog?.kind === 'share' && <ShareDialog resourceId={id} resourceType="dashboard" name={dash.name} onClose={() => setDialog(null)} />}
      </Suspense>
      {dialog?.kind === 'export' && <ExportDialog id={id} onClose={() => setDialog(null)} />}
      {dialog?.kind === 'delete' && (
        <Modal title="Delete the dashboard?" onClose={() => setDialog(null)}>
          <p>
            <strong>{dash.name}</strong>, its {dash.widgets.length} widgets and its access rights are deleted. This cannot be undone.
          </p>
          <div className="row">
            <button type="button" className="danger" onClick={() => void act('Deleting the dashboard', async () => (await api('DELETE', `/api/dashboards/${id}`), navigate('/')), false)}>
              Delete
            </button>
            <button type="button" onClick={() => setDialog(null)}>
              Cancel
            </button>
          </div>
        </Modal>
      )}
    </ReadyContext.Provider>
  );
}

function Grid({ dash, editing, sizes, onLayout, onAction }: { dash: Dashboard; editing: boolean; sizes: Record<string, GridSize> | null; onLayout: (l: Layout) => void; onAction: (kind: 'edit' | 'duplicate' | 'delete', w: Widget) => void }) {
  const { width, containerRef, mounted } = useContainerWidth();
  const layout = useMemo<Layout>(
    () =>
      dash.widgets.map((w) => {
        const min = editing ? sizes?.[w.template]?.min : undefined;
        // A widget below its template's minimum grows to it while the layout is edited (saved with the next change).
        const minW = Math.min(min?.[0] ?? 1, 24);
        const minH = min?.[1] ?? 1;
        return { i: w._id, x: w.x, y: w.y, w: Math.max(w.width, minW), h: Math.max(w.height, minH), minW, minH };
      }),
    [dash.widgets, editing, sizes],
  );
  const colWidth = (width - GRID.margin[0] * (GRID.cols - 1)) / GRID.cols;
  const layoutRef = useRef(layout);
  layoutRef.current = layout;
  const onKeyMove = useCallback(
    (wid: string, dx: number, dy: number, dw: number, dh: number) =>
      onLayout(
        layoutRef.current.map((l) => {
          if (l.i !== wid) return l;
          const w = Math.min(GRID.cols, Math.max(l.minW ?? 1, l.w + dw));
          return { ...l, w, h: Math.max(l.minH ?? 1, l.h + dh), x: Math.min(GRID.cols - w, Math.max(0, l.x + dx)), y: Math.max(0, l.y + dy) };
        }),
      ),
    [onLayout],
  );
  useEffect(() => {
    if (mounted) performance.mark('grid-mounted');
  }, [mounted]);
  return (
    <div ref={containerRef} className="grid-box">
      {mounted && (
        <ReactGridLayout
          width={width}
          layout={layout}
          gridConfig={GRID}
          compactor={verticalCompactor}
          dragConfig={{ enabled: editing, handle: '.drag-handle' }}
          resizeConfig={{ enabled: editing, handles: ['se'] }}
          onDragStop={(l) => onLayout(l)}
          onResizeStop={(l) => onLayout(l)}
        >
          {dash.widgets.map((w) => {
            const item = layout.find((l) => l.i === w._id)!;
            return (
              <div key={w._id} className="grid-item" data-widget-id={w._id} data-template={w.template}>
                <WidgetFrame
                  widget={w}
                  dashboardId={dash._id}
                  editing={editing}
                  width={item.w * colWidth + (item.w - 1) * GRID.margin[0]}
                  height={pxHeight(item.h)}
                  onAction={onAction}
                  onKeyMove={onKeyMove}
                />
              </div>
            );
          })}
        </ReactGridLayout>
      )}
    </div>
  );
}

/** Arrow keys on a focused handle move the widget; with Shift they resize it. */
const KEY_MOVES: Record<string, [number, number]> = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

const WidgetFrame = memo(function WidgetFrame({ widget: w, dashboardId, editing, width, height, onAction, onKeyMove }: { widget: Widget; dashboardId: string; editing: boolean; width: number; height: number; onAction?: (kind: 'edit' | 'duplicate' | 'delete', w: Widget) => void; onKeyMove?: (id: string, dx: number, dy: number, dw: number, dh: number) => void }) {
  const Component = WIDGETS[w.template];
  const label = TEMPLATE_LABELS[w.template] ?? w.template;
  return (
    <article className={w._broken ? 'widget broken' : 'widget'} aria-label={`${label} widget`}>
      {editing && (
        <div className="widget-bar">
          <span
            className="drag-handle"
            title="Drag to move; or focus and use the arrow keys (with Shift to resize)"
            aria-label={`Move ${label}: arrow keys move, Shift and arrow keys resize`}
            role="button"
            tabIndex={0}
            onKeyDown={(e) => {
              const m = KEY_MOVES[e.key];
              if (!m) return;
              e.preventDefault();
              if (e.shiftKey) onKeyMove?.(w._id, 0, 0, m[0], m[1]);
              else onKeyMove?.(w._id, m[0], m[1], 0, 0);
            }}
          >
            ⠿ {label}
          </span>
          <span className="widget-actions">
            <button type="button" className="icon" onClick={() => onAction?.('edit', w)} aria-label={`Settings of ${label}`} title="Settings">
              ⚙
            </button>
            <button type="button" className="icon" onClick={() => onAction?.('duplicate', w)} aria-label={`Duplicate ${label}`} title="Duplicate">
              ⧉
            </button>
            <button type="button" className="icon danger" onClick={() => onAction?.('delete', w)} aria-label={`Delete ${label}`} title="Delete">
              ✕
            </button>
          </span>
        </div>
      )}
      <div className="widget-body">
        {w._broken ? (
          <div className="broken-msg" role="alert">
            <strong>{w.template === 'unknown' ? 'This widget is missing' : `This ${label} widget needs repair`}</strong>
            <p>{w.error}</p>
            {editing && w.template !== 'unknown' && <p className="small">Open Settings to repair it.</p>}
          </div>
        ) : Component ? (
          <Boundary what={`The ${label} widget`} resetKey={JSON.stringify(w.settings)}>
            <Suspense fallback={<Loading />}>
              <WidgetIdProvider value={w._id}>
                <Component settings={w.settings} widgetId={w._id} dashboardId={dashboardId} width={width} height={height - (editing ? 28 : 0)} />
              </WidgetIdProvider>
            </Suspense>
          </Boundary>
        ) : (
          <ErrorText>{`This panel cannot show ${w.template} widgets.`}</ErrorText>
        )}
      </div>
    </article>
  );
});

function ExportDialog({ id, onClose }: { id: string; onClose: () => void }) {
  const [text, setText] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    // The export is the dashboard GET response as JSON, in base64.
    get<Dashboard>(`/api/dashboards/${encodeURIComponent(id)}`).then((d) => setText(toBase64(JSON.stringify(d))), (e) => setError(describe(e, 'Exporting')));
  }, [id]);
  return (
    <Modal title="Export" onClose={onClose}>
      <ErrorText>{error}</ErrorText>
      {text === null && !error && <Loading />}
      {text !== null && (
        <>
          <div className="field">
            <label htmlFor="export-text">Export text (base64): import it on any platform</label>
            <textarea id="export-text" rows={8} readOnly value={text} onFocus={(e) => e.target.select()} />
          </div>
          <div className="row">
            <button type="button" className="primary" onClick={() => void navigator.clipboard?.writeText(text).then(() => setCopied(true), () => setCopied(false))}>
              Copy
            </button>
            <a className="button" href={URL.createObjectURL(new Blob([text], { type: 'text/plain' }))} download={`dashboard-${id}.txt`}>
              Download
            </a>
            {copied && <span role="status">Copied.</span>}
          </div>
        </>
      )}
    </Modal>
  );
}
