package dashboard

import "net/http"

// functions is the Functions page.
func (d *Dashboard) functions() view {
	return view{page: "functions.html", title: "Functions", nav: "functions", load: func(*http.Request) (any, error) { return nil, nil }}
}
