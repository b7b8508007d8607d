package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"
)

// Page is what every template gets: the layout's fields and the page's Data.
type Page struct {
	Title string
	// Nav is the navigation entry to mark as current ("overview", "controllers",
	// "hookcalls", "functions", "pythonlambdas").
	Nav     string
	Session *Session
	// LiveURL is where the page's live region reads its updates from (the page's own
	// URL; see view).
	LiveURL string
	Data    any
	Now     time.Time
}

// CSRF is the session's CSRF token, for forms and the page's meta tag.
func (p Page) CSRF() string {
	if p.Session == nil {
		return ""
	}
	return p.Session.CSRF
}

// parsePages parses each page template together with layout.html; trace IDs link
// to traceURL (a TraceURLTemplate) when it is set.
func parsePages(fsys fs.FS, traceURL string) (map[string]*template.Template, error) {
	names, err := fs.Glob(fsys, "*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		if name == "layout.html" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).Funcs(template.FuncMap{"traceURL": traceLinker(traceURL)}).ParseFS(fsys, "layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("dashboard templates: %w", err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes the page name in the layout.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	p := Page{Title: title, Nav: nav, Session: SessionFrom(r.Context()), LiveURL: r.URL.RequestURI(), Data: data, Now: d.opts.Now()}
	d.execute(w, status, name, "layout", p)
}

// execute renders template tmpl of page name into a buffer first, so that a failing
// template answers 500 instead of half a page.
func (d *Dashboard) execute(w http.ResponseWriter, status int, name, tmpl string, data any) {
	var buf bytes.Buffer
	t := d.pages[name]
	if t == nil {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, tmpl, data); err != nil {
		slog.Error("dashboard template failed", "page", name, "template", tmpl, "err", err)
		http.Error(w, "rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// funcs are the helpers templates may call.
var funcs = template.FuncMap{
	"ago":      ago,
	"ms":       func(f float64) string { return fmt.Sprintf("%.1f ms", f) },
	"json":     indentJSON,
	"diffLine": diffLineClass,
	"lines":    func(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") },
	"join":     strings.Join,
	"base":     path.Base,
	"nsOrDash": func(ns string) string {
		if ns == "" {
			return "-"
		}
		return ns
	},
	"latency": latencyChart,
	"deref":   func(t *time.Time) time.Time { return *t },
	"syncForm": func(csrf, kind, namespace, name string, parent ...ParentRow) SyncForm {
		f := SyncForm{CSRF: csrf, Kind: kind, Namespace: namespace, Name: name}
		if len(parent) > 0 {
			f.Parent = &parent[0]
		}
		return f
	},
	"nav": func(p Page, entry string) template.HTMLAttr {
		if p.Nav == entry {
			return `aria-current="page"`
		}
		return ""
	},
}

// ago says how long before now t was, in the largest whole unit.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// indentJSON is raw JSON indented for reading; what is not JSON is shown as it is.
func indentJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// diffLineClass is the CSS class of a unified diff line.
func diffLineClass(line string) string {
	switch {
	case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
		return "muted"
	case strings.HasPrefix(line, "+"):
		return "add"
	case strings.HasPrefix(line, "-"):
		return "del"
	}
	return ""
}
