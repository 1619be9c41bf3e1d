package callback

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// ErrTargetRefused marks a callback URL or address the configuration does
// not allow. Retrying does not help.
var ErrTargetRefused = errors.New("callback: target refused")

// maxURLBytes bounds callback URLs; longer ones are refused outright.
const maxURLBytes = 2048

// targetPolicy decides which URLs and addresses callbacks may reach.
type targetPolicy struct {
	// hosts are exact host names; suffixes are ".example.com" for *.example.com.
	hosts, suffixes []string
	allowPrivate    bool
}

func newTargetPolicy(patterns []string, allowPrivate bool) (*targetPolicy, error) {
	p := &targetPolicy{allowPrivate: allowPrivate}
	for i, pattern := range patterns {
		pattern = strings.ToLower(strings.TrimSpace(pattern))
		if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
			if suffix == "" || strings.ContainsAny(suffix, "*/:@") {
				return nil, fmt.Errorf("callback: AllowHosts[%d] %q: want a host name or *.domain", i, patterns[i])
			}
			p.suffixes = append(p.suffixes, "."+suffix)
			continue
		}
		if pattern == "" || strings.ContainsAny(pattern, "*/:@") {
			return nil, fmt.Errorf("callback: AllowHosts[%d] %q: want a host name or *.domain", i, patterns[i])
		}
		p.hosts = append(p.hosts, pattern)
	}
	return p, nil
}

// checkURL refuses what can be refused before any DNS lookup: schemes other
// than http and https, user info, a missing or disallowed host, and literal
// private addresses. Names resolving to private addresses are refused when
// dialling (checkDial), where the address actually used is known.
func (p *targetPolicy) checkURL(raw string) (*url.URL, error) {
	if len(raw) > maxURLBytes {
		return nil, fmt.Errorf("%w: the URL is %d bytes, over the limit of %d", ErrTargetRefused, len(raw), maxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a URL: %v", ErrTargetRefused, raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: scheme %q; want http or https", ErrTargetRefused, u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("%w: the URL carries user info; put credentials in the URL's path or query, not before the host", ErrTargetRefused)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%w: the URL has no host", ErrTargetRefused)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if !p.hostAllowed(host) {
		return nil, fmt.Errorf("%w: host %q is not in the allowed hosts", ErrTargetRefused, host)
	}
	if !p.allowPrivate {
		if addr, err := netip.ParseAddr(host); err == nil && !publicAddr(addr) {
			return nil, fmt.Errorf("%w: %s is a private, loopback or otherwise internal address", ErrTargetRefused, host)
		}
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return nil, fmt.Errorf("%w: %s names this machine", ErrTargetRefused, host)
		}
	}
	return u, nil
}

func (p *targetPolicy) hostAllowed(host string) bool {
	if len(p.hosts) == 0 && len(p.suffixes) == 0 {
		return true
	}
	for _, h := range p.hosts {
		if host == h {
			return true
		}
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// checkDial is a net.Dialer Control function: it sees the resolved address
// about to be connected to, so a name that resolves (or re-resolves, DNS
// rebinding) to an internal address is refused.
func (p *targetPolicy) checkDial(network, address string, _ syscall.RawConn) error {
	if p.allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read dial address %q: %v", ErrTargetRefused, address, err)
	}
	if !publicAddr(ap.Addr()) {
		return fmt.Errorf("%w: %s resolves to %s, a private, loopback or otherwise internal address", ErrTargetRefused, network, ap.Addr())
	}
	return nil
}

// internalPrefixes are ranges no callback should reach beyond what the
// netip predicates cover: shared address space (CGNAT), "this network",
// IETF protocol assignments, benchmarking, reserved, and NAT64 local use.
var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// nat64 embeds an IPv4 address in its last 32 bits (RFC 6052).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// publicAddr reports whether addr is an ordinary public unicast address.
func publicAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsLoopback() || addr.IsPrivate() ||
		addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() ||
		addr.IsMulticast() {
		return false
	}
	for _, p := range internalPrefixes {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// dialer returns a dialer applying the policy at connect time.
func (p *targetPolicy) dialer() *net.Dialer {
	return &net.Dialer{Control: p.checkDial}
}
