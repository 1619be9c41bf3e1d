package callback

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef-test")

// receiver is an httptest server answering with the scripted statuses in
// order (the last one repeats) and recording every request.
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	statuses []int
	header   http.Header // added to every answer
	got      []received
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	r := &receiver{statuses: statuses, header: http.Header{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		status := r.statuses[min(len(r.got), len(r.statuses))-1]
		for k, v := range r.header {
			w.Header()[k] = v
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// newNotifier builds a notifier from cfg, test defaults filled in.
func newNotifier(t *testing.T, cfg Config) *Notifier {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	if cfg.BaseDelay == 0 {
		cfg.BaseDelay, cfg.MaxDelay = 5*time.Millisecond, 50*time.Millisecond
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return n
}

// deliver delivers one notification within 10s.
func deliver(t *testing.T, n *Notifier, url string, payload []byte, eventID string) Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return n.Deliver(ctx, url, payload, eventID, nil)
}

func TestDeliveryIsSigned(t *testing.T) {
	rcv := newReceiver(t, http.StatusNoContent)
	now := time.Unix(1_740_821_400, 0)
	n := newNotifier(t, Config{AllowPrivate: true, Now: func() time.Time { return now }})
	payload := []byte(`{"request_id":"req-1","status":"completed"}`)
	d := deliver(t, n, rcv.srv.URL+"/hooks/rv?token=abc", payload, "req-1")
	if !d.Delivered || d.Attempts != 1 || d.Status != http.StatusNoContent || d.Err != nil {
		t.Fatalf("outcome %+v, want delivered at the first attempt", d)
	}
	got := rcv.requests()
	if len(got) != 1 {
		t.Fatalf("receiver saw %d requests, want 1", len(got))
	}
	h := got[0].header
	if string(got[0].body) != string(payload) {
		t.Errorf("body %q, want %q", got[0].body, payload)
	}
	for name, want := range map[string]string{
		"Content-Type":  "application/json",
		HeaderEventID:   "req-1",
		HeaderTimestamp: "1740821400",
	} {
		if h.Get(name) != want {
			t.Errorf("%s: %q, want %q", name, h.Get(name), want)
		}
	}
	if err := Verify(testSecret, h.Get(HeaderTimestamp), h.Get(HeaderSignature), got[0].body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("the receiver cannot verify the delivery: %v", err)
	}
	if err := Verify([]byte("another secret of at least 32 bytes!!"), h.Get(HeaderTimestamp), h.Get(HeaderSignature), got[0].body, now, time.Minute); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("verifying with another secret: %v, want ErrInvalidSignature", err)
	}
}

func TestRetriesTransientFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		attempts int
	}{
		{"503 then 200", []int{503, 503, 200}, 3},
		{"429 then 200", []int{429, 200}, 2},
		{"408 then 201", []int{408, 201}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.statuses...)
			d := deliver(t, newNotifier(t, Config{AllowPrivate: true}), rcv.srv.URL, []byte(`{}`), "ev")
			if !d.Delivered || d.Attempts != tc.attempts {
				t.Errorf("outcome %+v, want delivered after %d attempts", d, tc.attempts)
			}
			got := rcv.requests()
			if len(got) != tc.attempts {
				t.Fatalf("receiver saw %d requests, want %d", len(got), tc.attempts)
			}
			for i, r := range got {
				if r.header.Get(HeaderEventID) != "ev" {
					t.Errorf("attempt %d: event id %q; every attempt carries the same id", i+1, r.header.Get(HeaderEventID))
				}
			}
		})
	}
}

func TestHonoursRetryAfter(t *testing.T) {
	rcv := newReceiver(t, 503, 200)
	rcv.header.Set("Retry-After", "1")
	n := newNotifier(t, Config{AllowPrivate: true, MaxDelay: 2 * time.Second, BaseDelay: time.Millisecond})
	began := time.Now()
	d := deliver(t, n, rcv.srv.URL, []byte(`{}`), "ev")
	if !d.Delivered || d.Attempts != 2 {
		t.Fatalf("outcome %+v, want delivered at the second attempt", d)
	}
	if took := time.Since(began); took < time.Second {
		t.Errorf("retried after %v; Retry-After asked for 1s", took)
	}
}

func TestGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		attempts int
		want     string
	}{
		{"on 400", []int{400}, 1, "receiver answered 400 Bad Request, which retrying will not change"},
		{"on 410", []int{410}, 1, "receiver answered 410 Gone"},
		{"on a redirect, not followed", []int{302}, 1, "receiver answered 302 Found"},
		{"after MaxAttempts", []int{500}, 3, "receiver answered 500 Internal Server Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.statuses...)
			rcv.header.Set("Location", rcv.srv.URL+"/elsewhere")
			d := deliver(t, newNotifier(t, Config{AllowPrivate: true, MaxAttempts: 3}), rcv.srv.URL, []byte(`{}`), "ev")
			if d.Delivered || d.Attempts != tc.attempts || d.Status != tc.statuses[0] {
				t.Errorf("outcome %+v, want given up after %d attempts with status %d", d, tc.attempts, tc.statuses[0])
			}
			if d.Err == nil || !strings.Contains(d.Err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", d.Err, tc.want)
			}
			if got := len(rcv.requests()); got != tc.attempts {
				t.Errorf("receiver saw %d requests, want %d", got, tc.attempts)
			}
		})
	}
}

func TestRefusesInternalTargets(t *testing.T) {
	rcv := newReceiver(t, 200)
	n := newNotifier(t, Config{})
	_, port, _ := net.SplitHostPort(rcv.srv.Listener.Addr().String())
	for _, url := range []string{
		rcv.srv.URL,
		"http://localhost:" + port + "/",
		"http://LOCALHOST.:" + port + "/",
		"http://[::1]:" + port + "/",
		"http://[::ffff:127.0.0.1]:" + port + "/",
		"http://10.1.2.3/hook",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00::1]/",
		"http://100.64.0.1/",
		"http://0.0.0.0:" + port + "/",
	} {
		if err := n.CheckURL(url); !errors.Is(err, ErrTargetRefused) {
			t.Errorf("CheckURL(%s): %v, want ErrTargetRefused", url, err)
		}
		if d := deliver(t, n, url, []byte(`{}`), "ev"); d.Delivered || d.Attempts != 0 || !errors.Is(d.Err, ErrTargetRefused) {
			t.Errorf("Deliver(%s): %+v, want refused without an attempt", url, d)
		}
	}

	// A name resolving to an internal address passes the URL check and is
	// refused when dialling, without retries.
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no host name: %v", err)
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		t.Skipf("host name %q does not resolve (%v); the dial-time refusal is covered by TestCheckDial", host, err)
	}
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err != nil || publicAddr(ip) {
			t.Skipf("host name %q resolves to %s, not only internal addresses", host, a)
		}
	}
	if err := n.CheckURL("http://" + host + ":" + port + "/"); err != nil {
		t.Fatalf("CheckURL(http://%s:%s/): %v; a name passes the URL check", host, port, err)
	}
	d := deliver(t, n, "http://"+host+":"+port+"/", []byte(`{}`), "ev")
	if d.Delivered || d.Attempts != 1 || !errors.Is(d.Err, ErrTargetRefused) {
		t.Errorf("outcome %+v, want refused at the first attempt", d)
	}
	if got := len(rcv.requests()); got != 0 {
		t.Errorf("receiver saw %d requests, want none", got)
	}
}

func TestCheckDial(t *testing.T) {
	p, err := newTargetPolicy(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for addr, allowed := range map[string]bool{
		"127.0.0.1:80":            false,
		"10.0.0.5:443":            false,
		"[::1]:443":               false,
		"[64:ff9b::a00:1]:443":    false, // NAT64 of 10.0.0.1
		"[64:ff9b::5db8:d822]:80": true,  // NAT64 of 93.184.216.34
		"93.184.216.34:443":       true,
		"[2606:4700::1111]:443":   true,
	} {
		err := p.checkDial("tcp", addr, nil)
		if allowed != (err == nil) {
			t.Errorf("checkDial(%s): %v, want allowed=%v", addr, err, allowed)
		}
		if err != nil && !errors.Is(err, ErrTargetRefused) {
			t.Errorf("checkDial(%s): %v does not match ErrTargetRefused", addr, err)
		}
	}
}

func TestPublicAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8":         true,
		"1.1.1.1":         true,
		"2001:4860::8888": true,
		"127.0.0.53":      false,
		"10.255.0.1":      false,
		"172.16.0.1":      false,
		"192.168.1.1":     false,
		"169.254.169.254": false,
		"100.100.0.1":     false,
		"0.1.2.3":         false,
		"224.0.0.1":       false,
		"255.255.255.255": false,
		"198.19.0.1":      false,
		"::":              false,
		"fe80::1":         false,
		"fc00::1":         false,
		"ff02::1":         false,
		"::ffff:10.0.0.1": false,
	} {
		if got := publicAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("publicAddr(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	n, err := New(Config{Secret: testSecret, AllowHosts: []string{"hooks.example.com", "*.example.org", "127.0.0.1"}, AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		want string // "" when allowed
	}{
		{"https://hooks.example.com/rv", ""},
		{"https://HOOKS.Example.COM:8443/rv?x=1", ""},
		{"https://a.example.org/x", ""},
		{"https://deep.a.example.org/x", ""},
		{"http://127.0.0.1:9/x", ""},
		{"https://example.org/x", `host "example.org" is not in the allowed hosts`},
		{"https://evil-example.org/x", `host "evil-example.org" is not in the allowed hosts`},
		{"https://hooks.example.com.evil.net/x", `host "hooks.example.com.evil.net" is not in the allowed hosts`},
		{"https://other.example.com/x", `host "other.example.com" is not in the allowed hosts`},
		{"ftp://hooks.example.com/x", `scheme "ftp"; want http or https`},
		{"file:///etc/passwd", `scheme "file"`},
		{"https://user:pw@hooks.example.com/x", "user info"},
		{"https://hooks.example.com@evil.net/x", "user info"},
		{"/relative/path", `scheme ""`},
		{"https:///nohost", "no host"},
		{"https://hooks.example.com/" + strings.Repeat("a", maxURLBytes), "over the limit"},
		{"http://[::1", "is not a URL"},
	} {
		err := n.CheckURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckURL(%.60s): %v, want allowed", tc.url, err)
		case tc.want != "" && (!errors.Is(err, ErrTargetRefused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckURL(%.60s): %v, want ErrTargetRefused saying %q", tc.url, err, tc.want)
		}
	}
}

func TestHostAllowListDelivers(t *testing.T) {
	rcv := newReceiver(t, 200)
	n := newNotifier(t, Config{AllowPrivate: true, AllowHosts: []string{"127.0.0.1"}})
	if d := deliver(t, n, rcv.srv.URL, []byte(`{}`), "ev"); !d.Delivered {
		t.Errorf("outcome %+v to an allowed host, want delivered", d)
	}
	other := newNotifier(t, Config{AllowPrivate: true, AllowHosts: []string{"hooks.example.com"}})
	if d := deliver(t, other, rcv.srv.URL, []byte(`{}`), "ev"); d.Delivered || !errors.Is(d.Err, ErrTargetRefused) {
		t.Errorf("outcome %+v to a host off the list, want ErrTargetRefused", d)
	}
	if got := len(rcv.requests()); got != 1 {
		t.Errorf("receiver saw %d requests, want 1", got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no secret", Config{}, "Secret is 0 bytes; at least 32 are required"},
		{"short secret", Config{Secret: []byte("short")}, "Secret is 5 bytes"},
		{"negative attempts", Config{Secret: testSecret, MaxAttempts: -1}, "MaxAttempts -1"},
		{"max below base", Config{Secret: testSecret, BaseDelay: time.Minute, MaxDelay: time.Second}, "MaxDelay 1s at least BaseDelay"},
		{"bad pattern", Config{Secret: testSecret, AllowHosts: []string{"https://x.example"}}, `AllowHosts[0] "https://x.example"`},
		{"empty pattern", Config{Secret: testSecret, AllowHosts: []string{"*."}}, `AllowHosts[0] "*."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"0":                             0,
		"-3":                            0,
		"soon":                          0,
		"Sat, 01 Mar 2025 09:00:30 GMT": 30 * time.Second,
		"Sat, 01 Mar 2025 08:00:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// A Retry-After is honoured up to MaxDelay: a receiver cannot hold a
// delivery longer than the operator allows.
func TestRetryAfterIsCappedAtMaxDelay(t *testing.T) {
	rcv := newReceiver(t, 503, 200)
	rcv.header.Set("Retry-After", "3600")
	const maxDelay = 100 * time.Millisecond
	n, err := New(Config{Secret: testSecret, AllowPrivate: true, BaseDelay: time.Millisecond, MaxDelay: maxDelay,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	d := n.Deliver(t.Context(), rcv.srv.URL, []byte(`{}`), "ev", nil)
	took := time.Since(began)
	if !d.Delivered || d.Attempts != 2 {
		t.Fatalf("outcome %+v, want delivered at the second attempt", d)
	}
	if took < maxDelay || took > 10*time.Second {
		t.Errorf("retried after %v; want MaxDelay (%v), not the hour asked for nor the 1ms backoff", took, maxDelay)
	}
}
