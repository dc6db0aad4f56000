export default function Users() {
  return <p>Users</p>;
}
