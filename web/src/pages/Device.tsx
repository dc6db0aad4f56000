export default function Device() {
  return <p>Device</p>;
}
