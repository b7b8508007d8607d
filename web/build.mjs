// Builds static/ from src/: one bundle per entry, not minified, so that what the Go
// binary embeds can be read and its diffs reviewed. `make web` runs it after `npm ci`;
// `make web-check` proves the committed static/ is what the sources build.
import * as esbuild from 'esbuild';
import { copyFileSync } from 'node:fs';

await esbuild.build({
  entryPoints: { app: 'src/app.js', editor: 'src/editor.js', functions: 'src/functions.js' },
  bundle: true,
  format: 'iife',
  target: 'es2020',
  outdir: 'static',
  legalComments: 'eof',
  logLevel: 'warning',
});
copyFileSync('src/style.css', 'static/style.css');
