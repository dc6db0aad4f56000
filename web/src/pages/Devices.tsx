export default function Devices() {
  return <p>Devices</p>;
}
