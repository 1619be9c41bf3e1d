package reviewui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T) *httptest.Server {
	t.Helper()
	h, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

func TestPages(t *testing.T) {
	ts := serve(t)
	inline := regexp.MustCompile(`(?i)<script>|<style|\sstyle=|\son[a-z]+=`)
	for _, tc := range []struct {
		path, contentType, want string
	}{
		{"/review/", "text/html; charset=utf-8", `data-page="signin"`},
		{"/review/queue", "text/html; charset=utf-8", `data-page="queue"`},
		{"/review/validations/req-42", "text/html; charset=utf-8", `data-request-id="req-42"`},
		// The request id is the page's only data, and it is escaped.
		{"/review/validations/%3Cscript%3Ealert(1)%3C%2Fscript%3E", "text/html; charset=utf-8", `&lt;script&gt;alert(1)&lt;/script&gt;`},
		{"/review/static/review.js", "text/javascript; charset=utf-8", "textContent"},
		{"/review/static/review.css", "text/css; charset=utf-8", ".page-image .box"},
	} {
		res, body := get(t, ts.URL+tc.path)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != tc.contentType || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, body without %q", tc.path, res.StatusCode, res.Header.Get("Content-Type"), tc.want)
		}
		for k, v := range securityHeaders {
			if got := res.Header.Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", tc.path, k, got, v)
			}
		}
		if strings.HasPrefix(tc.contentType, "text/html") && inline.MatchString(body) {
			t.Errorf("%s: inline script, style or handler: %q", tc.path, inline.FindString(body))
		}
	}
	if csp := securityHeaders["Content-Security-Policy"]; !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q is not strict", csp)
	}
	if res, _ := get(t, ts.URL+"/review"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/review/" {
		t.Errorf("/review: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	for _, path := range []string{"/review/static/nothing.js", "/review/validations/a/b"} {
		if res, _ := get(t, ts.URL+path); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", path, res.StatusCode)
		}
	}
}

// The script never puts the token anywhere but the Authorization header
// and session storage.
func TestScriptKeepsTheTokenOutOfURLs(t *testing.T) {
	js, err := staticFiles.ReadFile("static/review.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "localStorage", "console.log", "eval("} {
		if strings.Contains(string(js), bad) {
			t.Errorf("review.js uses %s", bad)
		}
	}
	if n := strings.Count(string(js), "token()"); n != 3 {
		t.Errorf("token() named %d times; want 3 (its definition, the header, the check that there is one)", n)
	}
}

// TestPagesDeclareTheirIcon: every page names its icon, an asset of this
// origin that img-src 'self' allows, so a browser does not ask for
// /favicon.ico (a 404 logged at every page load).
func TestPagesDeclareTheirIcon(t *testing.T) {
	ts := serve(t)
	iconLink := regexp.MustCompile(`<link rel="icon" href="([^"]+)" type="image/svg\+xml">`)
	for _, path := range []string{"/review/", "/review/queue", "/review/validations/req-42"} {
		page, body := get(t, ts.URL+path)
		if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self'") {
			t.Errorf("%s: CSP %q does not let the page load its own icon", path, csp)
		}
		m := iconLink.FindStringSubmatch(body)
		if m == nil {
			t.Errorf("%s: no <link rel=\"icon\"> in the page", path)
			continue
		}
		href := m[1]
		if !strings.HasPrefix(href, Prefix+"static/") {
			t.Errorf("%s: icon %q is not one of the page's own assets", path, href)
			continue
		}
		res, icon := get(t, ts.URL+href)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(icon, "<svg ") {
			t.Errorf("%s: icon %s: %d %s %.40q", path, href, res.StatusCode, res.Header.Get("Content-Type"), icon)
		}
	}
}
