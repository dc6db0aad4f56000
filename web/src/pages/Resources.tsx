export default function Resources() {
  return <p>Resources</p>;
}
