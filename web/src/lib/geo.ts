/** Twice the signed area of a ring of `[lng, lat]`: positive when counter-clockwise. */
export const signedArea = (ring: [number, number][]) =>
  ring.reduce((a, [x1, y1], i) => {
    const [x2, y2] = ring[(i + 1) % ring.length]!;
    return a + (x1 * y2 - x2 * y1);
  }, 0);

/** Drawn corners as the API's fence ring: `[lng, lat]` to 6 decimals, closed, counter-clockwise (the API refuses clockwise rings). */
export function ringOf(corners: { lat: number; lng: number }[]): [number, number][] {
  const ring = corners.map((p) => [Number(p.lng.toFixed(6)), Number(p.lat.toFixed(6))] as [number, number]);
  if (signedArea(ring) < 0) ring.reverse();
  ring.push([...ring[0]!]);
  return ring;
}
