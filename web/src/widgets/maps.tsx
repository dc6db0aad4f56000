import { useEffect, useRef, useState } from 'react';
import L from 'leaflet';
import { api, describe, get } from '../lib/api';
import { ringOf } from '../lib/geo';
import { onChange, useDevices, valueAt, type Device } from '../lib/devices';
import { formatValue, thresholdColor, type Threshold } from '../lib/format';
import { mapView, saveMapView } from '../lib/settings';
import { ErrorText } from '../components/ui';
import { deviceMarker, fenceLayer, lngLatOf, useLeaflet, type Fence } from './Leaflet';
import { deviceProblem, NoAccess, settled, useImage, useReady, type WidgetProps } from './common';

/** Device trails: the current position and the last `trailLength` positions seen live. */
export function Geomap({ settings: s }: WidgetProps<{ devices: { deviceId: string; alias?: string }[]; trailLength: number; tileLayer: string }>) {
  const box = useRef<HTMLDivElement>(null);
  const map = useLeaflet(box);
  const states = useDevices(s.devices.map((d) => d.deviceId));
  useReady(states.every(settled));
  const trails = useRef(new Map<string, [number, number][]>());
  const [version, setVersion] = useState(0);
  useEffect(
    () =>
      onChange((c) => {
        if (!s.devices.some((d) => d.deviceId === c.deviceId) || !('lnglat' in c.diff)) return;
        const p = lngLatOf(c.diff.lnglat);
        if (!p) return;
        const t = trails.current.get(c.deviceId) ?? [];
        trails.current.set(c.deviceId, [...t, p].slice(-Math.max(1, s.trailLength ?? 20)));
        setVersion((v) => v + 1);
      }),
    [JSON.stringify(s.devices), s.trailLength],
  );
  useEffect(() => {
    const m = map.current;
    if (!m) return;
    const group = L.featureGroup().addTo(m);
    s.devices.forEach((d, i) => {
      const st = states[i]!;
      if (st.status !== 'ok') return;
      const here = lngLatOf(st.device.lnglat);
      const trail = [...(trails.current.get(d.deviceId) ?? [])];
      if (here && (trail.length === 0 || trail[trail.length - 1]!.join() !== here.join())) trail.push(here);
      if ((s.trailLength ?? 20) > 0 && trail.length > 1) L.polyline(trail.map(([lng, lat]) => [lat, lng] as [number, number]), { color: '#1f6feb', weight: 3, opacity: 0.6 }).addTo(group);
      if (here) deviceMarker(here[0], here[1], d.alias || st.device.name).addTo(group);
    });
    if (group.getLayers().length) m.fitBounds(group.getBounds(), { maxZoom: 16, padding: [20, 20] });
    return () => {
      group.remove();
    };
  }, [states, version]);
  const noPosition = states.every((st) => st.status !== 'ok' || !lngLatOf(st.device.lnglat));
  return (
    <div className="w-fill">
      {states.every((x) => x.status === 'noaccess') && <NoAccess />}
      {noPosition && states.some((x) => x.status === 'ok') && <p className="muted small map-note">No position reported yet.</p>}
      <div ref={box} className="map-box" role="region" aria-label="Device trails map" />
    </div>
  );
}

/**
 * The user's devices and geofences on a map, with an optional overlay image.
 * `viewId` names a view the panel keeps in this browser ("Save view");
 * `createGeofenceEnabled` adds the polygon tool, and a drawn fence is saved.
 */
export function DeviceMapWidget({ settings: s }: WidgetProps<{ viewId?: string; imageId?: string; createGeofenceEnabled?: boolean }>) {
  const box = useRef<HTMLDivElement>(null);
  const map = useLeaflet(box);
  const [devices, setDevices] = useState<Device[] | null>(null);
  const [fences, setFences] = useState<Fence[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const overlay = useImage(s.imageId);
  useReady(devices !== null || error !== null);
  const loadFences = () => get<Fence[]>('/api/geofences').then(setFences, () => setFences([]));
  useEffect(() => {
    get<Device[]>(`/api/iotnodes?${new URLSearchParams({ limit: '1000', fields: 'name,lnglat' })}`).then(setDevices, (e) => setError(describe(e, 'Listing devices')));
    void loadFences();
  }, []);
  useEffect(() => {
    const m = map.current;
    if (!m || !s.createGeofenceEnabled) return;
    const onCreate = (e: { layer: L.Polygon }) => {
      const ring = ringOf(e.layer.getLatLngs()[0] as L.LatLng[]);
      e.layer.remove();
      api('POST', '/api/geofences', { body: { fence: { type: 'Polygon', coordinates: [ring] } } }).then(
        () => (setNote('The fence is saved.'), void loadFences()),
        (err) => setError(describe(err, 'Saving the fence')),
      );
    };
    m.pm.addControls({ position: 'topleft', drawPolygon: true, drawMarker: false, drawCircleMarker: false, drawPolyline: false, drawRectangle: false, drawCircle: false, drawText: false, editMode: false, dragMode: false, cutPolygon: false, removalMode: false, rotateMode: false });
    m.on('pm:create', onCreate as never);
    return () => {
      m.off('pm:create', onCreate as never);
      m.pm.removeControls();
    };
  }, [s.createGeofenceEnabled]);
  useEffect(() => {
    const m = map.current;
    if (!m || !devices) return;
    const group = L.featureGroup().addTo(m);
    for (const f of fences) fenceLayer(f).addTo(group);
    for (const d of devices) {
      const p = lngLatOf(d.lnglat);
      if (p) deviceMarker(p[0], p[1], d.name).addTo(group);
    }
    const view = s.viewId ? mapView(s.viewId) : null;
    if (view) m.setView(view.center, view.zoom);
    else if (group.getLayers().length) m.fitBounds(group.getBounds(), { maxZoom: 16, padding: [20, 20] });
    let image: L.ImageOverlay | null = null;
    if (overlay.url && group.getLayers().length) image = L.imageOverlay(overlay.url, group.getBounds(), { opacity: 0.6 }).addTo(m);
    return () => {
      group.remove();
      image?.remove();
    };
  }, [devices, fences, overlay.url, s.viewId]);
  const saveView = () => {
    const m = map.current;
    if (!m || !s.viewId) return;
    const c = m.getCenter();
    saveMapView(s.viewId, { center: [c.lat, c.lng], zoom: m.getZoom() });
    setNote('The view is saved in this browser.');
  };
  return (
    <div className="w-fill">
      <ErrorText>{error}</ErrorText>
      {(note || s.viewId) && (
        <div className="row small">
          {s.viewId && (
            <button type="button" className="small" onClick={saveView}>
              Save view
            </button>
          )}
          {note && <span role="status">{note}</span>}
        </div>
      )}
      <div ref={box} className="map-box" role="region" aria-label="Devices map" />
    </div>
  );
}

interface FloorPlanSettings {
  imageId: string;
  name: string;
  devices: { deviceId: string; x: number | null; y: number | null }[];
  deviceValues: { field: string; thresholds?: Threshold[]; isStarred?: boolean }[];
  deviceMarkerType: 'circle' | 'ring' | 'dot' | 'square' | 'seat';
}

/**
 * Markers on the uploaded image. A device's `x`, `y` are positions on the
 * image in percent of its width and height (0 to 100); unplaced devices are
 * listed below it. A marker's colour follows the starred value's thresholds.
 */
export function FloorPlan({ settings: s }: WidgetProps<FloorPlanSettings>) {
  const image = useImage(s.imageId);
  const states = useDevices(s.devices.map((d) => d.deviceId));
  useReady(states.every(settled) && (image.url !== null || image.error !== null));
  const starred = s.deviceValues.find((v) => v.isStarred) ?? s.deviceValues[0];
  const unplaced = s.devices.filter((d) => d.x === null || d.y === null);
  return (
    <div className="w-fill floorplan">
      <div className="w-title">{s.name}</div>
      <ErrorText>{image.error}</ErrorText>
      <div className="fp-stage">
        {image.url && <img src={image.url} alt={`Floor plan ${s.name}`} />}
        {s.devices.map((d, i) => {
          if (d.x === null || d.y === null) return null;
          const st = states[i]!;
          const values = st.status === 'ok' ? s.deviceValues.map((v) => `${v.field}: ${formatValue(valueAt(st.device, v.field))}`).join(', ') : st.status === 'noaccess' ? 'no access' : '';
          const color = st.status === 'ok' && starred ? thresholdColor(valueAt(st.device, starred.field), starred.thresholds, '#1f6feb') : '#9ca3af';
          const label = `${st.status === 'ok' ? st.device.name : d.deviceId}${values ? `: ${values}` : ''}`;
          return (
            <span key={i} className={`fp-marker ${s.deviceMarkerType}`} style={{ left: `${d.x}%`, top: `${d.y}%`, ['--c' as string]: color }} title={label} aria-label={label} role="img">
              {st.status === 'ok' && starred && s.deviceMarkerType !== 'dot' ? formatValue(valueAt(st.device, starred.field)) : ''}
            </span>
          );
        })}
      </div>
      {unplaced.length > 0 && (
        <p className="muted small">
          Not placed: {unplaced.map((d) => { const st = states[s.devices.indexOf(d)]!; return st.status === 'ok' ? st.device.name : d.deviceId; }).join(', ')}
        </p>
      )}
      {states.length > 0 && states.every((x) => x.status === 'noaccess') && <NoAccess />}
      {states.some((x) => x.status === 'error') && deviceProblem(states.find((x) => x.status === 'error')!)}
    </div>
  );
}
