import { useState } from 'react';
import { session } from '../lib/session';
import { DEFAULT_TILE_URL, tileUrl } from '../lib/settings';
import PasswordChange from './PasswordChange';

/** The user's account: password, and this browser's map tiles. */
export default function Account() {
  const s = session.use()!;
  const url = tileUrl.use();
  const [draft, setDraft] = useState(url);
  const [saved, setSaved] = useState(false);
  return (
    <section aria-labelledby="account-title">
      <h1 id="account-title">{s.user.username}</h1>
      <p className="muted">Roles: {(s.user.attributes?.roles ?? ['viewerBasic']).join(', ')}</p>
      <form
        className="card"
        onSubmit={(e) => {
          e.preventDefault();
          tileUrl.set(draft.trim());
          setSaved(true);
        }}
      >
        <h2>Map tiles</h2>
        <div className="field">
          <label htmlFor="tile-url">Tile URL template</label>
          <input id="tile-url" value={draft} onChange={(e) => (setDraft(e.target.value), setSaved(false))} aria-describedby="tile-hint" />
          <small id="tile-hint" className="muted">
            A Leaflet template with {'{z}'}, {'{x}'} and {'{y}'}, such as {DEFAULT_TILE_URL}. Leave it empty for a blank background: maps still show devices and fences.
          </small>
        </div>
        <div className="row">
          <button type="submit" className="primary">
            Save
          </button>
          {saved && <span role="status">Saved.</span>}
        </div>
      </form>
      <PasswordChange />
    </section>
  );
}
