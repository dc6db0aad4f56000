import { useEffect, useRef, type MutableRefObject } from 'react';
import L from 'leaflet';
import 'leaflet/dist/leaflet.css';
// Geoman hooks into every map and layer it sees, so it is loaded before any map is made.
import '@geoman-io/leaflet-geoman-free';
import '@geoman-io/leaflet-geoman-free/dist/leaflet-geoman.css';
import { tileUrl } from '../lib/settings';

/**
 * A Leaflet map with the configured tiles. Devices and fences are vector
 * layers, so with no tiles reachable they still show on a blank background.
 */
export function useLeaflet(container: MutableRefObject<HTMLDivElement | null>, options: L.MapOptions = {}): MutableRefObject<L.Map | null> {
  const map = useRef<L.Map | null>(null);
  const url = tileUrl.use();
  useEffect(() => {
    const m = L.map(container.current!, { center: [0, 0], zoom: 2, zoomControl: true, attributionControl: !!url, ...options });
    map.current = m;
    const ro = new ResizeObserver(() => m.invalidateSize());
    ro.observe(container.current!);
    return () => {
      ro.disconnect();
      m.remove();
      map.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  useEffect(() => {
    const m = map.current;
    if (!m || !url) return;
    const layer = L.tileLayer(url, { maxZoom: 19, attribution: url.includes('openstreetmap') ? '© OpenStreetMap contributors' : '' }).addTo(m);
    return () => {
      layer.remove();
    };
  }, [url]);
  return map;
}

/** `[longitude, latitude]` of a GeoJSON point, or null. */
export function lngLatOf(v: unknown): [number, number] | null {
  const c = (v as { type?: string; coordinates?: unknown })?.coordinates;
  return Array.isArray(c) && c.length === 2 && typeof c[0] === 'number' && typeof c[1] === 'number' ? [c[0], c[1]] : null;
}

/**
 * Leaflet sets a string given as a tooltip, popup or icon content as HTML; a
 * label (a device name, a widget's alias) is anyone's text, so it goes in as
 * a node holding it as text.
 */
export function textNode(text: string): HTMLElement {
  const span = document.createElement('span');
  span.textContent = text;
  return span;
}

export const deviceMarker = (lng: number, lat: number, label: string, color = '#1f6feb') =>
  L.circleMarker([lat, lng], { radius: 7, color: '#fff', weight: 2, fillColor: color, fillOpacity: 1 }).bindTooltip(textNode(label), { permanent: false });

export interface Fence {
  _id: string;
  fence: { type: 'Polygon'; coordinates: [number, number][][] };
  ref?: string | null;
}
export const fenceLayer = (f: Fence) =>
  L.polygon(
    f.fence.coordinates[0]!.map(([lng, lat]) => [lat, lng] as [number, number]),
    { color: '#9a6700', weight: 2, fillOpacity: 0.1 },
  );
