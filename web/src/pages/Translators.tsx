export default function Translators() {
  return <p>Translators</p>;
}
