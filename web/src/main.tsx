import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router';
import App from './App';
import './styles.css';
import { startEarly } from './lib/early';
import { provisional } from './lib/session';

provisional();
startEarly();

// A failure nobody awaited is shown by the part of the page it belongs to; the console stays free of uncaught errors.
window.addEventListener('unhandledrejection', (e) => {
  e.preventDefault();
  console.warn('unhandled:', e.reason instanceof Error ? e.reason.message : e.reason);
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <BrowserRouter>
      <App />
    </BrowserRouter>
  </StrictMode>,
);
