package portal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/store"
)

// settings is every setting of `serve`, the one table the flags, the
// environment variables and docs/configuration.md come from. Checks that
// span settings are in ParseConfig.
var settings = []setting{
	// server
	{group: "server", name: "listen", def: "127.0.0.1:8080",
		help: "HTTP listen address, and optionally Unix sockets for a proxy on this host: 127.0.0.1:8080,unix:/run/corral-vdi/http.sock",
		set: func(c *Config, v string) (err error) {
			c.Server.Listen, c.Server.ListenUnix, err = parseListen(v)
			return err
		}},
	{group: "server", name: "data-dir", help: "database and local desktops' state",
		machineDefault: api.DefaultDataDir, docDefault: "`$XDG_DATA_HOME/corral-vdi` or `~/.local/share/corral-vdi`",
		set: text(func(c *Config) *string { return &c.Server.DataDir })},
	{group: "server", name: "backend", help: "which backend runs desktops: local or kube; default kube when a cluster config is found",
		set: text(func(c *Config) *string { return &c.Server.Backend })},
	{group: "server", name: "public-url", help: "origins the portal is reached at through a proxy, comma-separated, e.g. https://vdi.example.com; other Hosts get 421",
		set: func(c *Config, v string) (err error) { c.Server.PublicURLs, err = parsePublicURLs(v); return err }},
	{group: "server", name: "admin-socket", help: "Unix socket of the admin CLI, for root and the portal's user; default admin.sock in the data directory, or off",
		set: text(func(c *Config) *string { return &c.Server.AdminSocket })},
	{group: "server", name: "drain-timeout", def: "0s", help: "after SIGTERM, refuse new consoles and fail /readyz, and let open consoles go on this long before stopping",
		set: func(c *Config, v string) (err error) {
			if c.Server.DrainTimeout, err = time.ParseDuration(v); err != nil || c.Server.DrainTimeout < 0 {
				return fmt.Errorf("%q is not a duration like 5m (0s stops at once)", v)
			}
			return nil
		}},
	{group: "server", name: "log-level", def: "info", help: "the least level logged: debug, info, warn or error; debug also logs where every claim's time went",
		set: func(c *Config, v string) error {
			lv, ok := logLevels[v]
			if !ok {
				return fmt.Errorf("%q is not debug, info, warn or error", v)
			}
			c.Server.LogLevel = lv
			return nil
		}},
	{group: "server", name: "metrics-token-file", secret: true, help: "file holding the bearer token /metrics requires (without one, /metrics answers only requests straight from this machine, never through a proxy; a deployed portal without it closes /metrics to everyone and logs the command that adds it to its Secret); or set CORRAL_VDI_METRICS_TOKEN",
		set: func(c *Config, v string) error { c.Server.MetricsToken = strings.TrimSpace(v); return nil }},

	// auth
	{group: "auth", name: "auth", def: "tailscale,dev", help: "identity modes, comma-separated: tailscale, oidc, dev",
		set: list(func(c *Config) *[]string { return &c.Auth.Modes })},
	{group: "auth", name: "trusted-proxies", def: "127.0.0.1/32,::1/128", help: "where Tailscale identity headers are believed",
		set: func(c *Config, v string) (err error) { c.Auth.TrustedProxies, err = auth.ParsePrefixes(v); return err }},
	{group: "auth", name: "admins", help: "admin logins, comma-separated; group:NAME for a group's members",
		set: list(func(c *Config) *[]string { return &c.Auth.Admins })},
	{group: "auth", name: "groups-file", help: "YAML file mapping groups to logins, for identities without groups",
		set: text(func(c *Config) *string { return &c.Auth.GroupsFile })},
	{group: "auth", name: "oidc-issuer", help: "OIDC issuer URL",
		set: text(func(c *Config) *string { return &c.Auth.OIDC.Issuer })},
	{group: "auth", name: "oidc-client-id", help: "OIDC client ID",
		set: text(func(c *Config) *string { return &c.Auth.OIDC.ClientID })},
	{group: "auth", name: "oidc-client-secret-file", secret: true, help: "file holding the OIDC client secret; or set CORRAL_VDI_OIDC_CLIENT_SECRET",
		set: func(c *Config, v string) error {
			c.Auth.OIDC.ClientSecret = auth.Secret(strings.TrimSpace(v))
			return nil
		}},
	{group: "auth", name: "oidc-redirect-url", help: "public URL of " + auth.CallbackPath + ", registered at the provider",
		set: text(func(c *Config) *string { return &c.Auth.OIDC.RedirectURL })},
	{group: "auth", name: "oidc-admin-groups", legacy: []string{"CORRAL_VDI_OIDC_ADMIN_GROUP"}, help: "OIDC groups whose members are admins, comma-separated",
		set: list(func(c *Config) *[]string { return &c.Auth.AdminGroups })},
	{group: "auth", name: "oidc-groups-claim", def: "groups", help: "ID token claim listing the user's groups",
		set: text(func(c *Config) *string { return &c.Auth.OIDC.GroupsClaim })},
	{group: "auth", name: "oidc-login-claim", def: "email", help: "ID token claim used as the login",
		set: text(func(c *Config) *string { return &c.Auth.OIDC.LoginClaim })},
	{group: "auth", name: "oidc-scopes", def: "openid,profile,email", help: "scopes to ask for, comma-separated",
		set: list(func(c *Config) *[]string { return &c.Auth.OIDC.Scopes })},
	{group: "auth", name: "oidc-provider-name", help: "name on the sign-in button; default the issuer's host",
		set: text(func(c *Config) *string { return &c.Auth.OIDC.ProviderName })},
	{group: "auth", name: "session-keys-file", secret: true, help: "file of session cookie keys, newest first; or set CORRAL_VDI_SESSION_KEYS",
		set: func(c *Config, v string) (err error) { c.Auth.SessionKeys, err = auth.ParseSessionKeys(v); return err }},
	{group: "auth", name: "session-lifetime", def: "12h", help: "how long a cookie sign-in lasts",
		set: positiveDuration(func(c *Config) *time.Duration { return &c.Auth.SessionLifetime }, "12h")},

	// claims
	{group: "claims", name: "disconnect-grace", def: "15m", help: "reclaim after the last console closes",
		set: duration(func(c *Config) *time.Duration { return &c.Claims.DisconnectGrace })},
	{group: "claims", name: "max-session", def: "off", help: "longest claim, or off",
		set: duration(func(c *Config) *time.Duration { return &c.Claims.MaxSession })},
	{group: "claims", name: "idle-timeout", def: "off", help: "reclaim after no user input, or off",
		set: duration(func(c *Config) *time.Duration { return &c.Claims.IdleTimeout })},
	{group: "claims", name: "reclaim-interval", def: "10s", help: "how often due reclaims are looked for",
		set: positiveDuration(func(c *Config) *time.Duration { return &c.Claims.ReclaimEvery }, "10s")},
	{group: "claims", name: "max-desktops-per-user", def: "0", help: "desktops one user may hold across all pools; 0 for no limit",
		set: count(func(c *Config) *int { return &c.Claims.MaxDesktopsPerUser }, 0, " (0 for no limit)")},
	{group: "claims", name: "max-agent-desktops-per-user", def: "2", help: "desktops one user's agents (personal access tokens over /mcp or the agent API) may claim and work in at once; 0 for no limit",
		set: count(func(c *Config) *int { return &c.Claims.MaxAgentDesktops }, 0, " (0 for no limit)")},
	{group: "claims", name: "agent-seat-idle", def: "5m", help: "how long an agent's screen of a desktop stays open after its last call; while open it counts as a console, so the disconnect grace waits",
		set: positiveDuration(func(c *Config) *time.Duration { return &c.Claims.AgentSeatIdle }, "5m")},

	// console
	{group: "console", name: "max-consoles-per-user", def: "10", help: "open consoles per user; 0 for no cap",
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a count", v)
			}
			if c.Console.MaxConsolesPerUser = n; n == 0 {
				c.Console.MaxConsolesPerUser = -1
			}
			return nil
		}},
	{group: "console", name: "token-keys-file", secret: true,
		help: "file of RDP token keys, newest first, shared by every replica; or set CORRAL_VDI_TOKEN_KEYS; default a key of this process",
		set: func(c *Config, v string) (err error) {
			// The same format and rules as the session keys: base64, at
			// least 32 bytes, newest first, comma- or line-separated.
			if c.Console.TokenKeys, err = auth.ParseSessionKeys(v); err != nil {
				return errors.New(strings.ReplaceAll(err.Error(), "session key", "token key"))
			}
			return nil
		}},
	{group: "console", name: "peers", help: "peer portals' base URLs, comma-separated, tried when a desktop is out of reach",
		set: list(func(c *Config) *[]string { return &c.Console.Peers })},
	{group: "console", name: "h264", def: "auto", help: "how each desktop's screen hub encodes H.264 (RFB encoding 50) for the VNC consoles that ask for it: auto, gst-launch-1.0 where its pipeline encodes here (x264enc of gstreamer1.0-plugins-ugly), else tiles, the log and doctor saying why; off (or empty): tiles only; or the program to run, e.g. gst-launch-1.0, or unix:PATH, the socket of an encoder service (corral-vdi-portal encoder: the Kubernetes encoder sidecar)",
		set: text(func(c *Config) *string { return &c.Console.H264 })},
	{group: "console", name: "webrtc-udp", help: "experimental: the UDP address (host:port) of the WebRTC video path: a VNC console's H.264 goes to the browser on a WebRTC track (the Picture choice WebRTC, and Auto or Fast past a 30 ms round trip; docs/consoles.md), signalled over the console's websocket, every console on this one port (ICE-lite); needs h264; empty: off",
		set: text(func(c *Config) *string { return &c.Console.WebRTCUDP })},
	{group: "console", name: "webrtc-tcp", help: "the TCP address (host:port) of the WebRTC video path's ICE-TCP fallback, for networks that drop UDP; empty: none",
		set: text(func(c *Config) *string { return &c.Console.WebRTCTCP })},
	{group: "console", name: "webrtc-ips", help: "the addresses browsers reach webrtc-udp and webrtc-tcp by (the portal's only ICE candidates), comma-separated; empty: webrtc-udp's host, which must then name one address",
		set: list(func(c *Config) *[]string { return &c.Console.WebRTCIPs })},
	{group: "console", name: "peer-url", help: "where the other replicas reach this one, for screen links (e.g. http://$(POD_IP):8080); default the listen address when it names a host",
		set: text(func(c *Config) *string { return &c.Console.PeerURL })},
	{group: "console", name: "peer-secret-file", secret: true, help: "file holding the secret shared with peer portals; or set CORRAL_VDI_PEER_SECRET",
		set: func(c *Config, v string) error {
			if v = strings.TrimSpace(v); v != "" && len(v) < 16 {
				return errors.New("too short; use the output of `openssl rand -base64 32`")
			}
			c.Console.PeerSecret = []byte(v)
			return nil
		}},

	// recording
	{group: "recording", name: "recording-retention", def: "720h", help: "keep session recordings this long, or off for forever",
		set: func(c *Config, v string) (err error) {
			if v == "off" {
				c.Recording.Retention = -1
			} else if c.Recording.Retention, err = parseDuration(v); err != nil || c.Recording.Retention == 0 {
				return fmt.Errorf("%q is not a positive duration like 720h, nor off", v)
			}
			return nil
		}},
	{group: "recording", name: "recording-max-bytes", def: "10GiB", help: "total size of all session recordings, e.g. 500MiB or 20GiB, or off; a recorded session ends when it is reached",
		set: size(func(c *Config) *int64 { return &c.Recording.MaxBytes }, true, "500MiB")},
	{group: "recording", name: "recording-max-bytes-per-user", def: "auto", help: "one user's share of the recordings' total, e.g. 2GiB, auto (a quarter of it) or off; beyond it only that user's recorded consoles are refused",
		set: func(c *Config, v string) (err error) { c.Recording.UserMaxBytes, err = parseAutoBytes(v); return err }},
	{group: "recording", name: "recording-disk-reserve", def: "auto", help: "free space recordings leave on the disks of the recordings and the database, e.g. 1GiB, or auto (5% of each disk, 64MiB to 2GiB)",
		set: func(c *Config, v string) (err error) {
			if v == "off" {
				return fmt.Errorf("%q: the database's disk always keeps a reserve; give a size like 1GiB, or auto", v)
			}
			c.Recording.DiskReserve, err = parseAutoBytes(v)
			return err
		}},

	// files
	{group: "files", name: "upload-max", def: "512MiB", help: "largest file a user may upload into a desktop's ~/Uploads, e.g. 100MiB or 2GiB",
		set: size(func(c *Config) *int64 { return &c.Uploads.MaxFile }, false, "512MiB")},
	{group: "files", name: "upload-quota", def: "2GiB", help: "what one desktop's ~/Uploads may hold in all; an upload past it is refused until files are moved out",
		set: size(func(c *Config) *int64 { return &c.Uploads.Quota }, false, "2GiB")},

	// store
	{group: "store", name: "database-url", help: "PostgreSQL for history, audit and sessions, shared by replicas, e.g. postgres://corral@db:5432/corral?sslmode=require; the password goes in CORRAL_VDI_DATABASE_PASSWORD_FILE; empty: SQLite in the data dir",
		set: text(func(c *Config) *string { return &c.Store.DatabaseURL })},
	{group: "store", name: "database-password-file", secret: true, help: "file holding the password of CORRAL_VDI_DATABASE_URL's user; or set CORRAL_VDI_DATABASE_PASSWORD",
		set: func(c *Config, v string) error { c.Store.DatabasePassword = strings.TrimRight(v, "\r\n"); return nil }},
	{group: "store", name: "history-retention", def: "2160h", help: "keep audit and session history and the pools' usage samples this long, or off",
		set: duration(func(c *Config) *time.Duration { return &c.Store.History.MaxAge })},
	{group: "store", name: "history-max-rows", def: "100000", help: "keep at most this many audit and session rows of each person, and usage samples of each pool; 0 for no limit",
		set: count(func(c *Config) *int { return &c.Store.History.MaxRows }, 0, "")},
	{group: "store", name: "history-buffer-rows", def: strconv.Itoa(store.DefaultBufferRows), help: "history rows kept in memory while the database does not answer; admin changes are refused once admin rows fill them",
		set: count(func(c *Config) *int { return &c.Store.BufferRows }, 1, "")},

	// local
	{group: "local", name: "demo-pool-size", def: "3", help: "members of the demo pool made on a first run; 0 for none",
		set: count(func(c *Config) *int { return &c.Local.DemoPoolSize }, 0, "")},
	{group: "local", name: "demo-vm-pool-size", def: "0", help: "members of the QEMU pool demo-vm (needs scripts/vm-image.sh); 0 for none",
		set: count(func(c *Config) *int { return &c.Local.DemoVMPoolSize }, 0, "")},
	{group: "local", name: "vm-image", help: "folder with vmlinuz and initramfs.gz for vm pools; default scripts/vm-image.sh's cache",
		set: text(func(c *Config) *string { return &c.Local.VMImage })},
	{group: "local", name: "vm-image-cache", help: "scripts/vm-image.sh's cache, where an empty -vm-image looks; default corral-vdi/vm-image in the user's cache folder",
		set: text(func(c *Config) *string { return &c.Local.VMImageCache })},
	{group: "local", name: "vm-listen", def: "unix", help: "where local guests' VNC and serial line listen: unix (sockets only the portal's user reaches) or tcp (loopback ports, the shape of a VM with a network address)",
		set: oneOf(func(c *Config) *string { return &c.Local.VMListen }, "unix", "tcp")},
	{group: "local", name: "vm-accel", def: "auto", help: "QEMU accelerator of vm pools: auto (KVM when it runs guests, decided once per host and remembered), kvm or tcg",
		set: oneOf(func(c *Config) *string { return &c.Local.VMAccel }, "auto", "kvm", "tcg")},
	{group: "local", name: "kvm-device", def: "/dev/kvm", help: "device whose opening means KVM may be tried",
		set: text(func(c *Config) *string { return &c.Local.KVMDevice })},
	{group: "local", name: "stop-desktops-on-exit", def: "false", bare: true, help: "stop local desktops when the portal exits (a SIGKILL leaves them running: the next start stops them)",
		set: func(c *Config, v string) (err error) {
			if c.Local.StopDesktopsOnExit, err = strconv.ParseBool(v); err != nil {
				return fmt.Errorf("%q is not true or false", v)
			}
			return nil
		}},
	{group: "local", name: "desktop-uids", def: local.DefaultDesktopUIDs, help: "uid range FIRST-LAST that local desktops run as, one uid per member, used by no account",
		set: text(func(c *Config) *string { return &c.Local.DesktopUIDs })},
	{group: "local", name: "desktop-limits", def: local.DefaultDesktopLimits, help: "resource limits of each local desktop: nproc=N,nofile=N,as=SIZE",
		set: func(c *Config, v string) (err error) { c.Local.DesktopLimits, err = local.ParseLimits(v); return err }},
	{group: "local", name: "desktop-sandbox", def: local.SandboxAuto, help: "how local desktops are kept from the portal and each other: auto (uids as root, else userns), uids (a uid of its own per member; root only) or userns (user, pid, mount and network namespaces made by bubblewrap; no network)",
		set: text(func(c *Config) *string { return &c.Local.DesktopSandbox })},
	{group: "local", name: "desktop-network", def: local.NetworkOutbound, help: "network of local desktops, each in a network namespace of its own (never the host's): outbound (each pool's network policy decides, outbound by default: out through pasta, the host's loopback out of reach, its other addresses behind the host fence; a portal that is not root gives desktops no outbound network, as nothing could fence it off the host) or none (only a loopback, whatever the pool says)",
		set: func(c *Config, v string) error {
			if v == "host" {
				return errors.New("host is gone: no desktop shares the host's network (its loopback reaches the portal); unset it for outbound network through a user-mode stack, or set none")
			}
			return oneOf(func(c *Config) *string { return &c.Local.DesktopNetwork }, local.NetworkOutbound, local.NetworkNone)(c, v)
		}},

	// kube
	{group: "kube", name: "kubeconfig", env: "KUBECONFIG", help: "kubeconfig of the kube backend; default in-cluster config, then ~/.kube/config",
		set: text(func(c *Config) *string { return &c.Kube.Kubeconfig })},
	{group: "kube", name: "kube-qps", def: "500", help: "requests a second the kube backend may send the API server, in bursts of twice that; the API server's own priority and fairness protects it",
		set: count(func(c *Config) *int { return &c.Kube.QPS }, 1, "")},
	{group: "kube", name: "namespace", help: "the portal's own namespace, for its leader-election Lease",
		machineDefault: func(func(string) string) string { return defaultNamespace() }, docDefault: "the pod's namespace, else `default`",
		set: text(func(c *Config) *string { return &c.Kube.Namespace })},
	{group: "kube", name: "pool-namespaces", help: "namespaces the kube backend keeps pools in, comma-separated: namespaced least-privilege mode, a Role in each (deploy/pool-namespace); empty: every namespace, under the cluster-wide ClusterRole",
		set: func(c *Config, v string) (err error) { c.Kube.PoolNamespaces, err = parsePoolNamespaces(v); return err }},
	{group: "kube", name: "shared-secrets-from", help: "the Kubernetes Secret the replicas' shared keys come from; when set, a missing key keeps the portal not ready (metrics-token: closes /metrics) and its log names the command that adds it",
		set: text(func(c *Config) *string { return &c.Kube.SharedSecretsFrom })},
}
