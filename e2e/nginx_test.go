package e2e

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Nginx is Debian's nginx as a load balancer in front of portal replicas,
// round-robin per request, with websockets passed through. It has two
// front doors: User's, where it vouches for one user (alice unless
// MustStartNginxFor names another; as `tailscale serve` vouches for the
// signed-in user: a header from the client is replaced), and Open, which
// passes the client's Tailscale-User-Login through, for API calls as any
// user.
type Nginx struct {
	User, Open string // base URLs
	dir        string
	cmd        *exec.Cmd
}

const nginxConf = `daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 512; }
http {
	log_format lb '$remote_addr "$request" $status upstream=$upstream_addr';
	access_log %[1]s/access.log lb;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	map $http_upgrade $connection_upgrade { default upgrade; '' close; }
	upstream portal {
%[2]s	}
	# proxy_set_header is not inherited by a level that sets its own, so
	# each location sets all of them.
	proxy_http_version 1.1;
	proxy_connect_timeout 2s;
	proxy_read_timeout 3600s;
	proxy_send_timeout 3600s;
	proxy_next_upstream error timeout;
	proxy_buffering off;
	server {
		listen %[3]s;
		location / {
			proxy_pass http://portal;
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $connection_upgrade;
			proxy_set_header Host $http_host;
			proxy_set_header Tailscale-User-Login %[5]s;
		}
	}
	server {
		listen %[4]s;
		location / {
			proxy_pass http://portal;
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $connection_upgrade;
			proxy_set_header Host $http_host;
			proxy_set_header Tailscale-User-Login $http_tailscale_user_login;
		}
	}
}
`

// freeAddr returns a loopback address no one listens on now.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// MustStartNginx starts nginx in front of the portals at upstreams (base
// URLs, or unix:/path of a portal's socket), its User door alice's, and
// stops it when tb ends.
func MustStartNginx(tb testing.TB, upstreams ...string) *Nginx {
	tb.Helper()
	return MustStartNginxFor(tb, "alice", upstreams...)
}

// MustStartNginxFor is MustStartNginx with user's User door.
func MustStartNginxFor(tb testing.TB, user string, upstreams ...string) *Nginx {
	tb.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
		if _, err := os.Stat(bin); err != nil {
			tb.Fatal("nginx is not installed (Debian package nginx-light; make test-deps installs it)")
		}
	}
	dir := tb.TempDir()
	var servers strings.Builder
	for _, u := range upstreams {
		if strings.HasPrefix(u, "unix:") { // a portal's Unix socket for proxies
			fmt.Fprintf(&servers, "\t\tserver %s max_fails=1 fail_timeout=10s;\n", u)
			continue
		}
		p, err := url.Parse(u)
		if err != nil {
			tb.Fatal(err)
		}
		// One failed connect takes a replica out for 10s, as a real
		// balancer's health check would.
		fmt.Fprintf(&servers, "\t\tserver %s max_fails=1 fail_timeout=10s;\n", p.Host)
	}
	door, open := freeAddr(tb), freeAddr(tb)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, dir, servers.String(), door, open, user)), 0o600); err != nil {
		tb.Fatal(err)
	}
	n := &Nginx{User: "http://" + door, Open: "http://" + open, dir: dir}
	n.cmd = exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	n.cmd.Stdout, n.cmd.Stderr = os.Stderr, os.Stderr
	if err := n.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		n.cmd.Process.Kill()
		n.cmd.Wait()
		if tb.Failed() {
			tb.Logf("nginx error log:\n%s\nnginx access log:\n%s", n.ErrorLog(), n.AccessLog())
		}
	})
	if !eventually(10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", open, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		tb.Fatalf("nginx did not listen on %s:\n%s", open, n.ErrorLog())
	}
	return n
}

// ErrorLog returns nginx's error log so far.
func (n *Nginx) ErrorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return string(b)
}

// AccessLog returns nginx's access log so far: one line per request with
// the replica (upstream) that served it.
func (n *Nginx) AccessLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "access.log"))
	return string(b)
}

// Portal returns a Portal handle whose URL is the balancer's open door,
// for the API helpers.
func (n *Nginx) Portal() *Portal { return &Portal{URL: n.Open} }
