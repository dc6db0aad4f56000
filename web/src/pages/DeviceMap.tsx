export default function DeviceMap() {
  return <p>DeviceMap</p>;
}
