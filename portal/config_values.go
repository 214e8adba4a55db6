package portal

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// parseDuration accepts a Go duration or "off" (zero).
func parseDuration(s string) (time.Duration, error) {
	if s == "off" || s == "" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration like 15m or 2h, nor off", s)
	}
	return d, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// isLoopback reports whether addr listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// parsePublicURLs parses CORRAL_VDI_PUBLIC_URL: comma-separated http(s)
// URLs, of which only the origin counts.
func parsePublicURLs(list string) ([]string, error) {
	var out []string
	for _, s := range splitList(list) {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("CORRAL_VDI_PUBLIC_URL: %q is not an origin like https://vdi.example.com", s)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out, nil
}

// parseAutoBytes is parseBytes that reads auto as 0 (the default).
func parseAutoBytes(s string) (int64, error) {
	if strings.TrimSpace(s) == "auto" {
		return 0, nil
	}
	return parseBytes(s)
}

// parseBytes reads a size: a number of bytes with an optional KiB, MiB or
// GiB (or K, M, G) suffix, or off (-1).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return -1, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size like 500MiB, nor off", s)
	}
	return n * mult, nil
}
