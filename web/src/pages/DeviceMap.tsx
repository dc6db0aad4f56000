import { useEffect, useRef, useState } from 'react';
import { Link } from 'react-router';
import L from 'leaflet';
import { api, describe, get } from '../lib/api';
import { can } from '../lib/session';
import { ErrorText, Loading } from '../components/ui';
import { deviceMarker, fenceLayer, lngLatOf, useLeaflet, type Fence } from '../widgets/Leaflet';
import { ringOf } from '../lib/geo';

interface Dev {
  _id: string;
  name: string;
  lnglat?: unknown;
}

/** Devices with geofences: draw a fence, save it, see which devices are inside. */
export default function DeviceMap() {
  const box = useRef<HTMLDivElement>(null);
  const map = useLeaflet(box);
  const [devices, setDevices] = useState<Dev[] | null>(null);
  const [fences, setFences] = useState<Fence[]>([]);
  const [drawn, setDrawn] = useState<{ ring: [number, number][]; layer: L.Layer } | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [inside, setInside] = useState<Dev[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const mayDraw = can('geofence', 'POST');

  const loadFences = () => get<Fence[]>('/api/geofences').then(setFences, (e) => setError(describe(e, 'Listing geofences')));
  useEffect(() => {
    get<Dev[]>(`/api/iotnodes?${new URLSearchParams({ limit: '1000', fields: 'name,lnglat' })}`).then(setDevices, (e) => setError(describe(e, 'Listing devices')));
    void loadFences();
  }, []);

  useEffect(() => {
    const m = map.current;
    if (!m || !mayDraw) return;
    m.pm.addControls({ position: 'topleft', drawPolygon: true, drawMarker: false, drawCircleMarker: false, drawPolyline: false, drawRectangle: false, drawCircle: false, drawText: false, editMode: false, dragMode: false, cutPolygon: false, removalMode: false, rotateMode: false });
    const onCreate = (e: { layer: L.Layer }) => {
      const latlngs = (e.layer as L.Polygon).getLatLngs()[0] as L.LatLng[];
      setSaved(null);
      setDrawn((prev) => {
        prev?.layer.remove();
        return { ring: ringOf(latlngs), layer: e.layer };
      });
    };
    m.on('pm:create', onCreate as never);
    return () => {
      m.off('pm:create', onCreate as never);
      m.pm.removeControls();
    };
  }, [mayDraw]);

  useEffect(() => {
    const m = map.current;
    if (!m || !devices) return;
    const group = L.featureGroup().addTo(m);
    for (const f of fences) {
      const layer = fenceLayer(f).addTo(group);
      layer.on('click', () => setSelected(f._id));
      if (f._id === selected) layer.setStyle({ color: '#d1242f', weight: 3 });
    }
    const insideIds = new Set(inside?.map((d) => d._id));
    for (const d of devices) {
      const p = lngLatOf(d.lnglat);
      if (p) deviceMarker(p[0], p[1], d.name, insideIds.has(d._id) ? '#1a7f37' : '#1f6feb').addTo(group);
    }
    if (group.getLayers().length && !drawn) m.fitBounds(group.getBounds(), { maxZoom: 15, padding: [30, 30] });
    return () => {
      group.remove();
    };
  }, [devices, fences, selected, inside]);

  useEffect(() => {
    setInside(null);
    if (!selected) return;
    get<Dev[]>(`/api/iotnodes?${new URLSearchParams({ geoquery: `id:${selected}`, fields: 'name,lnglat', limit: '1000' })}`).then(setInside, (e) => setError(describe(e, 'Finding the devices inside')));
  }, [selected]);

  const save = async () => {
    if (!drawn) return;
    setError(null);
    try {
      const f = await api<Fence>('POST', '/api/geofences', { body: { fence: { type: 'Polygon', coordinates: [drawn.ring] } } });
      drawn.layer.remove();
      setDrawn(null);
      setSaved('The fence is saved.');
      await loadFences();
      setSelected(f._id);
    } catch (e) {
      setError(describe(e, 'Saving the fence'));
    }
  };
  const remove = async (id: string) => {
    try {
      await api('DELETE', `/api/geofences/${id}`);
      if (selected === id) setSelected(null);
      await loadFences();
    } catch (e) {
      setError(describe(e, 'Deleting the fence'));
    }
  };
  const located = devices?.filter((d) => lngLatOf(d.lnglat)).length ?? 0;
  return (
    <section aria-labelledby="map-title" className="map-page">
      <div className="page-head">
        <h1 id="map-title">Map</h1>
        {devices && (
          <span className="muted">
            {located} of {devices.length} devices have a position · {fences.length} geofences
          </span>
        )}
      </div>
      <ErrorText>{error}</ErrorText>
      {saved && (
        <p className="ok" role="status">
          {saved}
        </p>
      )}
      {mayDraw && <p className="muted small">Draw a fence with the polygon tool at the top left: click each corner, then the first corner again.</p>}
      {drawn && (
        <div className="row notice">
          <span>A fence with {drawn.ring.length - 1} corners is drawn.</span>
          <button type="button" className="primary" onClick={() => void save()}>
            Save fence
          </button>
          <button type="button" onClick={() => (drawn.layer.remove(), setDrawn(null))}>
            Discard
          </button>
        </div>
      )}
      {!devices && !error && <Loading what="Loading devices" />}
      <div className="cols map-cols">
        <div ref={box} className="map-box big" role="region" aria-label="Map of devices and geofences" />
        <div className="card">
          <h2>Geofences</h2>
          {fences.length === 0 && <p className="muted">No geofences yet.</p>}
          <ul className="plain-list" aria-label="Geofences">
            {fences.map((f) => (
              <li key={f._id}>
                <button type="button" className={selected === f._id ? 'picked small' : 'small'} aria-pressed={selected === f._id} onClick={() => setSelected(f._id)}>
                  Fence {f._id.slice(-6)} ({f.fence.coordinates[0]!.length - 1} corners)
                </button>{' '}
                {can('geofence', 'DELETE') && (
                  <button type="button" className="small danger" onClick={() => void remove(f._id)}>
                    Delete
                  </button>
                )}
              </li>
            ))}
          </ul>
          {selected && (
            <>
              <h3>Devices inside</h3>
              {!inside ? (
                <Loading />
              ) : inside.length === 0 ? (
                <p className="muted">None.</p>
              ) : (
                <ul aria-label="Devices inside">
                  {inside.map((d) => (
                    <li key={d._id}>
                      <Link to={`/devices/${d._id}`}>{d.name}</Link>
                    </li>
                  ))}
                </ul>
              )}
            </>
          )}
        </div>
      </div>
    </section>
  );
}
