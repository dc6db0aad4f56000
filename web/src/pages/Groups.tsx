export default function Groups() {
  return <p>Groups</p>;
}
