import { createStore } from './store';

/**
 * Settings of this browser's panel. The map tile URL is a Leaflet template
 * (`https://tile.example.org/{z}/{x}/{y}.png`); empty means no tiles: maps
 * still show devices and fences on a blank background.
 */
export const DEFAULT_TILE_URL = 'https://tile.openstreetmap.org/{z}/{x}/{y}.png';
const KEY = 'panel.tileUrl';

const stored = () => {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;
  }
};

export const tileUrl = createStore<string>(stored() ?? DEFAULT_TILE_URL);
tileUrl.subscribe(() => localStorage.setItem(KEY, tileUrl.get()));

/** Saved map views of `map` widgets (`viewId`): kept by the panel, not by the REST API. */
export interface MapView {
  center: [number, number];
  zoom: number;
}
export function mapView(id: string): MapView | null {
  try {
    return JSON.parse(localStorage.getItem(`panel.mapView.${id}`) ?? 'null') as MapView | null;
  } catch {
    return null;
  }
}
export const saveMapView = (id: string, view: MapView) => localStorage.setItem(`panel.mapView.${id}`, JSON.stringify(view));
