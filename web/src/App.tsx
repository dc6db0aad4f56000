import { lazy, Suspense, useEffect, useState } from 'react';
import { NavLink, Route, Routes, useLocation } from 'react-router';
import { describe } from './lib/api';
import { can, expired, logOut, mustChangePassword, restore, session } from './lib/session';
import { liveStatus } from './lib/live';
import { Boundary, ErrorText, Loading, Modal } from './components/ui';
import LoginPage, { LoginForm } from './pages/Login';
import PasswordChange from './pages/PasswordChange';
import Dashboards from './pages/Dashboards';

const DashboardPage = lazy(() => import('./pages/Dashboard'));
const Devices = lazy(() => import('./pages/Devices'));
const DevicePage = lazy(() => import('./pages/Device'));
const DeviceMap = lazy(() => import('./pages/DeviceMap'));
const Translators = lazy(() => import('./pages/Translators'));
const Resources = lazy(() => import('./pages/Resources'));
const Users = lazy(() => import('./pages/Users'));
const Groups = lazy(() => import('./pages/Groups'));
const Account = lazy(() => import('./pages/Account'));

function LiveBanner() {
  const status = liveStatus.use();
  if (status.state !== 'down') return null;
  return (
    <div className="banner" role="status">
      {status.message}
    </div>
  );
}

function Nav() {
  const s = session.use()!;
  const [open, setOpen] = useState(false);
  const location = useLocation();
  useEffect(() => setOpen(false), [location.pathname]);
  const link = (to: string, text: string) => (
    <li>
      <NavLink to={to} end={to === '/'}>
        {text}
      </NavLink>
    </li>
  );
  return (
    <header className="topbar">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <span className="brand">Device platform</span>
      <button type="button" className="menu-toggle" aria-expanded={open} aria-controls="nav" onClick={() => setOpen(!open)}>
        Menu
      </button>
      <nav id="nav" aria-label="Main" className={open ? 'open' : ''}>
        <ul>
          {link('/', 'Dashboards')}
          {link('/devices', 'Devices')}
          {link('/map', 'Map')}
          {link('/translators', 'Translators')}
          {link('/credentials', 'Credentials')}
          {link('/connectors', 'Connectors')}
          {link('/channels', 'Channels')}
          {link('/rules', 'Rules')}
          {link('/calculations', 'Calculations')}
          {can('user', 'POST') && link('/admin/users', 'Users')}
          {link('/admin/groups', 'Groups')}
        </ul>
        <div className="user">
          <NavLink to="/account">{s.user.username || 'Account'}</NavLink>
          <button type="button" onClick={logOut}>
            Log out
          </button>
        </div>
      </nav>
    </header>
  );
}

function Expired() {
  const waiting = expired.use();
  if (!waiting) return null;
  return (
    <Modal title="Log in again" onClose={logOut}>
      <LoginForm reason="Your session has expired. Log in again to go on; this page stays as it is." />
    </Modal>
  );
}

export default function App() {
  const s = session.use();
  // The router's location, not `window.location`: App re-renders with it, so a page that failed (a chunk gone after
  // a redeploy) gives way to the next page navigated to.
  const location = useLocation();
  // With a stored token the page starts at once (see `provisional`); restoring the session goes on beside it.
  const [ready, setReady] = useState(() => session.get() !== null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    restore()
      .catch((e: unknown) => setError(describe(e, 'Restoring the session')))
      .finally(() => {
        performance.mark('session-ready');
        setReady(true);
      });
  }, []);
  if (!ready) return <Loading />;
  if (!s)
    return (
      <>
        <ErrorText>{error}</ErrorText>
        <LoginPage />
      </>
    );
  if (mustChangePassword(s)) return <PasswordChange forced />;
  return (
    <>
      <Nav />
      <LiveBanner />
      <Expired />
      <main id="main" tabIndex={-1}>
        <Boundary what="This page" resetKey={location.pathname}>
          <Suspense fallback={<Loading />}>
            <Routes>
              <Route path="/" element={<Dashboards />} />
              <Route path="/dashboards/:id" element={<DashboardPage />} />
              <Route path="/devices" element={<Devices />} />
              <Route path="/devices/:id" element={<DevicePage />} />
              <Route path="/map" element={<DeviceMap />} />
              <Route path="/translators" element={<Translators />} />
              <Route path="/:kind" element={<Resources />} />
              <Route path="/admin/users" element={<Users />} />
              <Route path="/admin/groups" element={<Groups />} />
              <Route path="/account" element={<Account />} />
              <Route path="*" element={<ErrorText>There is no such page.</ErrorText>} />
            </Routes>
          </Suspense>
        </Boundary>
      </main>
    </>
  );
}
