package ingress

import (
	"errors"
	"net/url"
	"path"
	"strings"
)

// errPathRefused is the class of request paths the router will not route.
var errPathRefused = errors.New("path refused")

// normalizePath returns the path the router matches a request by and forwards to the
// backend, so that the path a backend sees is the path a rule allowed:
//
//   - percent-encoded characters are decoded (so "%2e%2e" is "..", "%41" is "A");
//     the forwarded path is re-encoded from the result;
//   - "." and ".." segments are resolved and repeated slashes collapsed, as
//     path.Clean does ("/public/../admin" is "/admin"; ".." never climbs above "/");
//     a trailing slash is kept;
//   - a path without a leading slash gets one;
//   - an encoded slash ("%2F"), a backslash (raw or "%5C") or a NUL byte is refused
//     (errPathRefused): backends disagree on whether they separate segments, so no
//     normal form is safe to forward.
func normalizePath(u *url.URL) (string, error) {
	escaped := strings.ToLower(u.EscapedPath())
	for _, enc := range []string{"%2f", "%5c", "%00"} {
		if strings.Contains(escaped, enc) {
			return "", errPathRefused
		}
	}
	p := u.Path
	if strings.ContainsAny(p, "\\\x00") {
		return "", errPathRefused
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean, nil
}
