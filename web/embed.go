// Package web holds the dashboard's browser side: templates/, the html/template pages
// internal/gateway/dashboard renders, and static/, the scripts and stylesheet built from src/
// by `make web` (npm ci, then esbuild; see build.mjs). Both are embedded in the
// binary: the dashboard fetches nothing at run time.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

//go:embed templates
var templates embed.FS

// Static is the built scripts and stylesheet (static/), served at /ui/static/.
func Static() fs.FS { return sub(static, "static") }

// Templates is the page templates (templates/*.html).
func Templates() fs.FS { return sub(templates, "templates") }

func sub(f embed.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // dir is a constant embedded above
	}
	return s
}
