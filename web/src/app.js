// The dashboard's page script: htmx and its server-sent events extension. Pages are
// rendered on the server; htmx swaps the fragments the server sends.
import htmx from 'htmx.org';
import 'htmx-ext-sse';

window.htmx = htmx;

// Every request htmx makes carries the session's CSRF token, read from the page.
document.addEventListener('htmx:configRequest', (event) => {
  const meta = document.querySelector('meta[name="csrf-token"]');
  if (meta) {
    event.detail.headers['X-CSRF-Token'] = meta.content;
  }
});

