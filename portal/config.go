package portal

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/store"
)

// Config is the portal's configuration: every setting is a flag of
// `corral-vdi-portal serve` and a CORRAL_VDI_* environment variable.
type Config struct {
	// Listen is the TCP address of CORRAL_VDI_LISTEN; ListenUnix are its
	// unix: entries, Unix sockets for a proxy on this host.
	Listen          string
	ListenUnix      []string
	DataDir         string
	Backend         string
	Auth            []string
	TrustedProxies  []netip.Prefix
	Admins          []string
	AdminGroups     []string
	OIDC            auth.OIDCConfig
	SessionKeys     auth.Keys
	SessionLifetime time.Duration
	DisconnectGrace time.Duration
	MaxSession      time.Duration
	IdleTimeout     time.Duration
	// ReclaimEvery is how often due reclaims are looked for.
	ReclaimEvery time.Duration
	// History bounds the audit log and session history.
	History store.Retention
	// HistoryBufferRows bounds the history rows kept in memory while the
	// database does not answer (routine rows are shed first).
	HistoryBufferRows int
	// Recording bounds the session recordings.
	Recording RecordingConfig
	// Uploads bounds the Files panel's uploads into desktops.
	Uploads UploadConfig
	// DemoPoolSize is the size of the demo pool made on a first run.
	DemoPoolSize int
	// DemoVMPoolSize is the size of the QEMU pool "demo-vm"; 0 for none.
	DemoVMPoolSize int
	// VMImage is the folder of the kernel and initramfs vm pools boot;
	// VMImageCache is scripts/vm-image.sh's cache, where an empty VMImage
	// looks.
	VMImage      string
	VMImageCache string
	// VMListen is where local guests' VNC and serial listen: "unix"
	// (sockets in the member's folder) or "tcp" (loopback ports).
	VMListen string
	// VMAccel forces QEMU's accelerator (kvm, tcg); empty or auto decides
	// once per host. KVMDevice is the device whose opening means KVM may
	// be tried.
	VMAccel   string
	KVMDevice string
	// Peers are peer portals' base URLs; PeerSecret signs links to them.
	Peers      []string
	PeerSecret []byte
	// StopDesktopsOnExit stops local desktops when the portal exits; by
	// default they keep running and the next start re-adopts them.
	StopDesktopsOnExit bool
	// Kubeconfig is the kubeconfig file of the kube backend; empty means
	// in-cluster config in a pod, else ~/.kube/config.
	Kubeconfig string
	// KubeQPS is the kube backend's request rate limit (burst twice it).
	KubeQPS int
	// Namespace is the portal's own namespace, where the kube backend's
	// replicas elect the reclaim leader.
	Namespace string
	// PoolNamespaces are the namespaces the kube backend keeps pools in,
	// namespaced least-privilege mode (a Role in each); empty is the
	// cluster-wide mode (a ClusterRole, pools in every namespace).
	PoolNamespaces []string
	// DrainTimeout is how long, after SIGTERM, open consoles may go on
	// while new ones are refused and /readyz fails; 0 stops at once.
	DrainTimeout time.Duration
	// Leader times the kube backend's reclaim leader election.
	Leader LeaderTiming
	// AdminSocket is the Unix socket the admin CLI talks to the portal
	// on; empty for none.
	AdminSocket string
	// DesktopUIDs is the uid range ("FIRST-LAST") local desktops run as.
	DesktopUIDs string
	// DesktopLimits are every local desktop's resource limits.
	DesktopLimits local.Limits
	// DesktopNetwork is local desktops' network (CORRAL_VDI_DESKTOP_NETWORK):
	// outbound (each pool's policy decides, outbound by default) or none
	// (a loopback of each desktop's own, whatever its pool says).
	DesktopNetwork string
	// DesktopSandbox is how local desktops are kept apart: auto, uids or
	// userns (local.SandboxAuto...).
	DesktopSandbox string
	// SecretFiles are the files the settings name (secrets, keys, the
	// kubeconfig), hidden from namespaced desktops.
	SecretFiles []string
	// TokenKeys sign RDP tokens, newest first; replicas share them.
	TokenKeys auth.Keys
	// SharedSecretsFrom names the Secret (namespace/name or name) the
	// replicas' shared keys come from; when set, missing keys make the
	// portal not ready.
	SharedSecretsFrom string
	// PublicURLs are the origins the portal is reached at through a proxy
	// (CORRAL_VDI_PUBLIC_URL); other Hosts than these, loopback and the
	// listen address get 421.
	PublicURLs []string
	// MaxConsolesPerUser caps one user's open consoles; -1 for no cap.
	MaxConsolesPerUser int
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// DatabaseURL, when set, is the PostgreSQL database (postgres://...)
	// for history, audit and sessions, shared by replicas; DatabasePassword
	// replaces its password (CORRAL_VDI_DATABASE_PASSWORD_FILE).
	DatabaseURL      string
	DatabasePassword string
	// MaxDesktopsPerUser is how many desktops one user may hold across
	// pools; 0 for no limit.
	MaxDesktopsPerUser int
	// GroupsFile maps groups to logins for identities without groups.
	GroupsFile string
}

// ParseConfig reads flags from args, with defaults taken from the
// environment (getenv) and then from built-in defaults.
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c Config
	var authModes, proxies, admins, grace, maxSession, idle, demo, stopOnExit, reclaimEvery, historyAge, historyRows string
	fs.StringVar(&c.Listen, "listen", env("CORRAL_VDI_LISTEN", "127.0.0.1:8080"), "HTTP listen address, and optionally Unix sockets for a proxy on this host: 127.0.0.1:8080,unix:/run/corral-vdi/http.sock (CORRAL_VDI_LISTEN)")
	fs.StringVar(&c.DataDir, "data-dir", env("CORRAL_VDI_DATA_DIR", api.DefaultDataDir(getenv)), "database and local desktops' state (CORRAL_VDI_DATA_DIR)")
	var kubeQPS string
	fs.StringVar(&kubeQPS, "kube-qps", env("CORRAL_VDI_KUBE_QPS", "500"), "requests a second the kube backend may send the API server, in bursts of twice that; the API server's own priority and fairness protects it (CORRAL_VDI_KUBE_QPS)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig of the kube backend; default in-cluster config, then ~/.kube/config (KUBECONFIG)")
	fs.StringVar(&c.Namespace, "namespace", env("CORRAL_VDI_NAMESPACE", defaultNamespace()), "the portal's own namespace, for its leader-election Lease (CORRAL_VDI_NAMESPACE)")
	var poolNamespaces, drain string
	fs.StringVar(&poolNamespaces, "pool-namespaces", env("CORRAL_VDI_POOL_NAMESPACES", ""), "namespaces the kube backend keeps pools in, comma-separated: namespaced least-privilege mode, a Role in each (deploy/pool-namespace); empty: every namespace, under the cluster-wide ClusterRole (CORRAL_VDI_POOL_NAMESPACES)")
	fs.StringVar(&drain, "drain-timeout", env("CORRAL_VDI_DRAIN_TIMEOUT", "0s"), "after SIGTERM, refuse new consoles and fail /readyz, and let open consoles go on this long before stopping (CORRAL_VDI_DRAIN_TIMEOUT)")
	fs.StringVar(&c.Backend, "backend", env("CORRAL_VDI_BACKEND", ""), "which backend runs desktops: local or kube; default kube when a cluster config is found (CORRAL_VDI_BACKEND)")
	fs.StringVar(&authModes, "auth", env("CORRAL_VDI_AUTH", "tailscale,dev"), "identity modes, comma-separated: tailscale, oidc, dev (CORRAL_VDI_AUTH)")
	fs.StringVar(&proxies, "trusted-proxies", env("CORRAL_VDI_TRUSTED_PROXIES", "127.0.0.1/32,::1/128"), "where Tailscale identity headers are believed (CORRAL_VDI_TRUSTED_PROXIES)")
	fs.StringVar(&admins, "admins", env("CORRAL_VDI_ADMINS", ""), "admin logins, comma-separated; group:NAME for a group's members (CORRAL_VDI_ADMINS)")
	var maxDesktops string
	fs.StringVar(&maxDesktops, "max-desktops-per-user", env("CORRAL_VDI_MAX_DESKTOPS_PER_USER", "0"), "desktops one user may hold across all pools; 0 for no limit (CORRAL_VDI_MAX_DESKTOPS_PER_USER)")
	fs.StringVar(&c.GroupsFile, "groups-file", env("CORRAL_VDI_GROUPS_FILE", ""), "YAML file mapping groups to logins, for identities without groups (CORRAL_VDI_GROUPS_FILE)")
	fs.StringVar(&grace, "disconnect-grace", env("CORRAL_VDI_DISCONNECT_GRACE", "15m"), "reclaim after the last console closes (CORRAL_VDI_DISCONNECT_GRACE)")
	fs.StringVar(&maxSession, "max-session", env("CORRAL_VDI_MAX_SESSION", "off"), "longest claim, or off (CORRAL_VDI_MAX_SESSION)")
	fs.StringVar(&idle, "idle-timeout", env("CORRAL_VDI_IDLE_TIMEOUT", "off"), "reclaim after no user input, or off (CORRAL_VDI_IDLE_TIMEOUT)")
	fs.StringVar(&historyAge, "history-retention", env("CORRAL_VDI_HISTORY_RETENTION", "2160h"), "keep audit and session history this long, or off (CORRAL_VDI_HISTORY_RETENTION)")
	fs.StringVar(&historyRows, "history-max-rows", env("CORRAL_VDI_HISTORY_MAX_ROWS", "100000"), "keep at most this many audit and session rows each; 0 for no limit (CORRAL_VDI_HISTORY_MAX_ROWS)")
	var bufferRows string
	fs.StringVar(&bufferRows, "history-buffer-rows", env("CORRAL_VDI_HISTORY_BUFFER_ROWS", strconv.Itoa(store.DefaultBufferRows)), "history rows kept in memory while the database does not answer; admin changes are refused once admin rows fill them (CORRAL_VDI_HISTORY_BUFFER_ROWS)")
	fs.StringVar(&reclaimEvery, "reclaim-interval", env("CORRAL_VDI_RECLAIM_INTERVAL", "10s"), "how often due reclaims are looked for (CORRAL_VDI_RECLAIM_INTERVAL)")
	fs.StringVar(&demo, "demo-pool-size", env("CORRAL_VDI_DEMO_POOL_SIZE", "3"), "members of the demo pool made on a first run; 0 for none (CORRAL_VDI_DEMO_POOL_SIZE)")
	stopOnExit = env("CORRAL_VDI_STOP_DESKTOPS_ON_EXIT", "false")
	fs.Var((*bareBool)(&stopOnExit), "stop-desktops-on-exit", "stop local desktops when the portal exits (CORRAL_VDI_STOP_DESKTOPS_ON_EXIT)")
	var vmDemo, peers, peerSecretFile, adminSocket string
	fs.StringVar(&adminSocket, "admin-socket", env("CORRAL_VDI_ADMIN_SOCKET", ""), "Unix socket of the admin CLI, for root and the portal's user; default admin.sock in the data directory, or off (CORRAL_VDI_ADMIN_SOCKET)")
	fs.StringVar(&vmDemo, "demo-vm-pool-size", env("CORRAL_VDI_DEMO_VM_POOL_SIZE", "0"), "members of the QEMU pool demo-vm (needs scripts/vm-image.sh); 0 for none (CORRAL_VDI_DEMO_VM_POOL_SIZE)")
	fs.StringVar(&c.VMImage, "vm-image", env("CORRAL_VDI_VM_IMAGE", ""), "folder with vmlinuz and initramfs.gz for vm pools; default scripts/vm-image.sh's cache (CORRAL_VDI_VM_IMAGE)")
	fs.StringVar(&c.VMImageCache, "vm-image-cache", env("CORRAL_VDI_VM_IMAGE_CACHE", ""), "scripts/vm-image.sh's cache, where an empty -vm-image looks; default corral-vdi/vm-image in the user's cache folder (CORRAL_VDI_VM_IMAGE_CACHE)")
	fs.StringVar(&c.VMListen, "vm-listen", env("CORRAL_VDI_VM_LISTEN", "unix"), "where local guests' VNC and serial line listen: unix (sockets only the portal's user reaches) or tcp (loopback ports, the shape of a VM with a network address) (CORRAL_VDI_VM_LISTEN)")
	fs.StringVar(&c.VMAccel, "vm-accel", env("CORRAL_VDI_VM_ACCEL", "auto"), "QEMU accelerator of vm pools: auto (KVM when it runs guests, decided once per host and remembered), kvm or tcg (CORRAL_VDI_VM_ACCEL)")
	fs.StringVar(&c.KVMDevice, "kvm-device", env("CORRAL_VDI_KVM_DEVICE", "/dev/kvm"), "device whose opening means KVM may be tried (CORRAL_VDI_KVM_DEVICE)")
	fs.StringVar(&peers, "peers", env("CORRAL_VDI_PEERS", ""), "peer portals' base URLs, comma-separated, tried when a desktop is out of reach (CORRAL_VDI_PEERS)")
	fs.StringVar(&c.DatabaseURL, "database-url", env("CORRAL_VDI_DATABASE_URL", ""), "PostgreSQL for history, audit and sessions, shared by replicas, e.g. postgres://corral@db:5432/corral?sslmode=require; the password goes in CORRAL_VDI_DATABASE_PASSWORD_FILE; empty: SQLite in the data dir (CORRAL_VDI_DATABASE_URL)")
	fs.StringVar(&peerSecretFile, "peer-secret-file", env("CORRAL_VDI_PEER_SECRET_FILE", ""), "file holding the secret shared with peer portals; or set CORRAL_VDI_PEER_SECRET (CORRAL_VDI_PEER_SECRET_FILE)")
	var desktopLimits, desktopNetwork string
	fs.StringVar(&c.DesktopUIDs, "desktop-uids", env("CORRAL_VDI_DESKTOP_UIDS", local.DefaultDesktopUIDs), "uid range FIRST-LAST that local desktops run as, one uid per member, used by no account (CORRAL_VDI_DESKTOP_UIDS)")
	fs.StringVar(&desktopLimits, "desktop-limits", env("CORRAL_VDI_DESKTOP_LIMITS", local.DefaultDesktopLimits), "resource limits of each local desktop: nproc=N,nofile=N,as=SIZE (CORRAL_VDI_DESKTOP_LIMITS)")
	fs.StringVar(&c.DesktopSandbox, "desktop-sandbox", env("CORRAL_VDI_DESKTOP_SANDBOX", local.SandboxAuto), "how local desktops are kept from the portal and each other: auto (uids as root, else userns), uids (a uid of its own per member; root only) or userns (user, pid, mount and network namespaces made by bubblewrap; no network) (CORRAL_VDI_DESKTOP_SANDBOX)")
	fs.StringVar(&desktopNetwork, "desktop-network", env("CORRAL_VDI_DESKTOP_NETWORK", local.NetworkOutbound), "network of local desktops, each in a network namespace of its own (never the host's): outbound (each pool's network policy decides, outbound by default: out through pasta, the host's loopback out of reach) or none (only a loopback, whatever the pool says) (CORRAL_VDI_DESKTOP_NETWORK)")
	var publicURL, maxConsoles, metricsTokenFile string
	fs.StringVar(&publicURL, "public-url", env("CORRAL_VDI_PUBLIC_URL", ""), "origins the portal is reached at through a proxy, comma-separated, e.g. https://vdi.example.com; other Hosts get 421 (CORRAL_VDI_PUBLIC_URL)")
	fs.StringVar(&maxConsoles, "max-consoles-per-user", env("CORRAL_VDI_MAX_CONSOLES_PER_USER", "10"), "open consoles per user; 0 for no cap (CORRAL_VDI_MAX_CONSOLES_PER_USER)")
	fs.StringVar(&metricsTokenFile, "metrics-token-file", env("CORRAL_VDI_METRICS_TOKEN_FILE", ""), "file holding the bearer token /metrics requires; or set CORRAL_VDI_METRICS_TOKEN (CORRAL_VDI_METRICS_TOKEN_FILE)")
	finishAuth := authFlags(fs, &c, getenv, env)
	finishTokens := tokenFlags(fs, &c, getenv, env)
	finishRecording := recordingFlags(fs, &c, env)
	finishUploads := uploadFlags(fs, &c, env)
	describeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	fs.VisitAll(func(f *flag.Flag) {
		if v := f.Value.String(); v != "" && (strings.HasSuffix(f.Name, "-file") || f.Name == "kubeconfig") {
			c.SecretFiles = append(c.SecretFiles, v)
		}
	})
	if f := getenv("CORRAL_VDI_DATABASE_PASSWORD_FILE"); f != "" {
		c.SecretFiles = append(c.SecretFiles, f)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if c.Listen, c.ListenUnix, err = parseListen(c.Listen); err != nil {
		return c, err
	}
	if c.TrustedProxies, err = auth.ParsePrefixes(proxies); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_TRUSTED_PROXIES: %w", err)
	}
	c.Auth, c.Admins = splitList(authModes), splitList(admins)
	if !isLoopback(c.Listen) && !flagOrEnvSet(fs, "auth", getenv, "CORRAL_VDI_AUTH") {
		c.Auth = []string{auth.ModeTailscale} // sign-in by name only ever on loopback
	}
	if c.PublicURLs, err = parsePublicURLs(publicURL); err != nil {
		return c, err
	}
	if n, err := strconv.Atoi(maxConsoles); err != nil || n < 0 {
		return c, fmt.Errorf("CORRAL_VDI_MAX_CONSOLES_PER_USER: %q is not a count", maxConsoles)
	} else if c.MaxConsolesPerUser = n; n == 0 {
		c.MaxConsolesPerUser = -1
	}
	token, err := valueOrFile(getenv("CORRAL_VDI_METRICS_TOKEN"), metricsTokenFile, "CORRAL_VDI_METRICS_TOKEN")
	if err != nil {
		return c, err
	}
	c.MetricsToken = strings.TrimSpace(token)
	if err := finishAuth(); err != nil {
		return c, err
	}
	if err := finishTokens(); err != nil {
		return c, err
	}
	if err := finishRecording(); err != nil {
		return c, err
	}
	if err := finishUploads(); err != nil {
		return c, err
	}
	if c.DisconnectGrace, err = parseDuration(grace); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_DISCONNECT_GRACE: %w", err)
	}
	if c.MaxSession, err = parseDuration(maxSession); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_MAX_SESSION: %w", err)
	}
	if c.IdleTimeout, err = parseDuration(idle); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_IDLE_TIMEOUT: %w", err)
	}
	if c.History.MaxAge, err = parseDuration(historyAge); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_HISTORY_RETENTION: %w", err)
	}
	if c.History.MaxRows, err = strconv.Atoi(historyRows); err != nil || c.History.MaxRows < 0 {
		return c, fmt.Errorf("CORRAL_VDI_HISTORY_MAX_ROWS: %q is not a count", historyRows)
	}
	if c.HistoryBufferRows, err = strconv.Atoi(bufferRows); err != nil || c.HistoryBufferRows <= 0 {
		return c, fmt.Errorf("CORRAL_VDI_HISTORY_BUFFER_ROWS: %q is not a positive count", bufferRows)
	}
	if c.ReclaimEvery, err = parseDuration(reclaimEvery); err != nil || c.ReclaimEvery <= 0 {
		return c, fmt.Errorf("CORRAL_VDI_RECLAIM_INTERVAL: %q is not a positive duration like 10s", reclaimEvery)
	}
	if c.PoolNamespaces, err = parsePoolNamespaces(poolNamespaces); err != nil {
		return c, err
	}
	if c.DrainTimeout, err = time.ParseDuration(drain); err != nil || c.DrainTimeout < 0 {
		return c, fmt.Errorf("CORRAL_VDI_DRAIN_TIMEOUT: %q is not a duration like 5m (0s stops at once)", drain)
	}
	if c.KubeQPS, err = strconv.Atoi(kubeQPS); err != nil || c.KubeQPS <= 0 {
		return c, fmt.Errorf("CORRAL_VDI_KUBE_QPS: %q is not a positive count", kubeQPS)
	}
	if c.DemoPoolSize, err = strconv.Atoi(demo); err != nil || c.DemoPoolSize < 0 {
		return c, fmt.Errorf("CORRAL_VDI_DEMO_POOL_SIZE: %q is not a count", demo)
	}
	if c.DemoVMPoolSize, err = strconv.Atoi(vmDemo); err != nil || c.DemoVMPoolSize < 0 {
		return c, fmt.Errorf("CORRAL_VDI_DEMO_VM_POOL_SIZE: %q is not a count", vmDemo)
	}
	c.Peers = splitList(peers)
	c.AdminSocket = adminSocketPath(adminSocket, c.DataDir)
	if c.MaxDesktopsPerUser, err = strconv.Atoi(maxDesktops); err != nil || c.MaxDesktopsPerUser < 0 {
		return c, fmt.Errorf("CORRAL_VDI_MAX_DESKTOPS_PER_USER: %q is not a count (0 for no limit)", maxDesktops)
	}
	if c.VMListen != "unix" && c.VMListen != "tcp" {
		return c, fmt.Errorf("CORRAL_VDI_VM_LISTEN: %q is not unix or tcp", c.VMListen)
	}
	if c.VMAccel != "auto" && c.VMAccel != "kvm" && c.VMAccel != "tcg" {
		return c, fmt.Errorf("CORRAL_VDI_VM_ACCEL: %q is not auto, kvm or tcg", c.VMAccel)
	}
	if f := getenv("CORRAL_VDI_DATABASE_PASSWORD_FILE"); f != "" {
		buf, err := os.ReadFile(f)
		if err != nil {
			return c, fmt.Errorf("CORRAL_VDI_DATABASE_PASSWORD_FILE: %w", err)
		}
		c.DatabasePassword = strings.TrimRight(string(buf), "\r\n")
		if c.DatabaseURL == "" {
			return c, errors.New("CORRAL_VDI_DATABASE_PASSWORD_FILE is set but CORRAL_VDI_DATABASE_URL is not: name the database too")
		}
	}
	secret, err := valueOrFile(getenv("CORRAL_VDI_PEER_SECRET"), peerSecretFile, "CORRAL_VDI_PEER_SECRET")
	if err != nil {
		return c, err
	}
	if secret = strings.TrimSpace(secret); secret != "" && len(secret) < 16 {
		return c, errors.New("CORRAL_VDI_PEER_SECRET: too short; use the output of `openssl rand -base64 32`")
	}
	c.PeerSecret = []byte(secret)
	if len(c.Peers) > 0 && len(c.PeerSecret) == 0 {
		return c, errors.New("CORRAL_VDI_PEERS is set but CORRAL_VDI_PEER_SECRET is not: peers only talk to portals that share the secret")
	}
	if c.StopDesktopsOnExit, err = strconv.ParseBool(stopOnExit); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_STOP_DESKTOPS_ON_EXIT: %q is not true or false", stopOnExit)
	}
	if c.DesktopLimits, err = local.ParseLimits(desktopLimits); err != nil {
		return c, err
	}
	switch desktopNetwork {
	case local.NetworkOutbound, local.NetworkNone:
		c.DesktopNetwork = desktopNetwork
	case "host":
		return c, errors.New("CORRAL_VDI_DESKTOP_NETWORK=host is gone: no desktop shares the host's network (its loopback reaches the portal); unset it for outbound network through a user-mode stack, or set none")
	default:
		return c, fmt.Errorf("CORRAL_VDI_DESKTOP_NETWORK: %q is not outbound or none", desktopNetwork)
	}
	if err := resolveBackend(&c, getenv); err != nil {
		return c, err
	}
	c.Leader = c.Leader.withDefaults()
	return c, nil
}

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

// authFlags declares the OIDC and session settings on fs; the returned
// function reads them into c once fs is parsed and c.Auth is set. Secrets
// have no flag of their own (flag defaults show in -help and flags in ps):
// pass them in the environment or a file.
func authFlags(fs *flag.FlagSet, c *Config, getenv func(string) string, env func(name, def string) string) func() error {
	var groups, scopes, lifetime, secretFile, keysFile string
	o := &c.OIDC
	fs.StringVar(&o.Issuer, "oidc-issuer", env("CORRAL_VDI_OIDC_ISSUER", ""), "OIDC issuer URL (CORRAL_VDI_OIDC_ISSUER)")
	fs.StringVar(&o.ClientID, "oidc-client-id", env("CORRAL_VDI_OIDC_CLIENT_ID", ""), "OIDC client ID (CORRAL_VDI_OIDC_CLIENT_ID)")
	fs.StringVar(&secretFile, "oidc-client-secret-file", env("CORRAL_VDI_OIDC_CLIENT_SECRET_FILE", ""), "file holding the OIDC client secret; or set CORRAL_VDI_OIDC_CLIENT_SECRET (CORRAL_VDI_OIDC_CLIENT_SECRET_FILE)")
	fs.StringVar(&o.RedirectURL, "oidc-redirect-url", env("CORRAL_VDI_OIDC_REDIRECT_URL", ""), "public URL of "+auth.CallbackPath+", registered at the provider (CORRAL_VDI_OIDC_REDIRECT_URL)")
	fs.StringVar(&groups, "oidc-admin-groups", env("CORRAL_VDI_OIDC_ADMIN_GROUPS", env("CORRAL_VDI_OIDC_ADMIN_GROUP", "")), "OIDC groups whose members are admins, comma-separated (CORRAL_VDI_OIDC_ADMIN_GROUPS)")
	fs.StringVar(&o.GroupsClaim, "oidc-groups-claim", env("CORRAL_VDI_OIDC_GROUPS_CLAIM", "groups"), "ID token claim listing the user's groups (CORRAL_VDI_OIDC_GROUPS_CLAIM)")
	fs.StringVar(&o.LoginClaim, "oidc-login-claim", env("CORRAL_VDI_OIDC_LOGIN_CLAIM", "email"), "ID token claim used as the login (CORRAL_VDI_OIDC_LOGIN_CLAIM)")
	fs.StringVar(&scopes, "oidc-scopes", env("CORRAL_VDI_OIDC_SCOPES", "openid,profile,email"), "scopes to ask for, comma-separated (CORRAL_VDI_OIDC_SCOPES)")
	fs.StringVar(&o.ProviderName, "oidc-provider-name", env("CORRAL_VDI_OIDC_PROVIDER_NAME", ""), "name on the sign-in button; default the issuer's host (CORRAL_VDI_OIDC_PROVIDER_NAME)")
	fs.StringVar(&keysFile, "session-keys-file", env("CORRAL_VDI_SESSION_KEYS_FILE", ""), "file of session cookie keys, newest first; or set CORRAL_VDI_SESSION_KEYS (CORRAL_VDI_SESSION_KEYS_FILE)")
	fs.StringVar(&lifetime, "session-lifetime", env("CORRAL_VDI_SESSION_LIFETIME", "12h"), "how long a cookie sign-in lasts (CORRAL_VDI_SESSION_LIFETIME)")
	return func() error {
		c.AdminGroups, o.Scopes = splitList(groups), splitList(scopes)
		secret, err := valueOrFile(getenv("CORRAL_VDI_OIDC_CLIENT_SECRET"), secretFile, "CORRAL_VDI_OIDC_CLIENT_SECRET")
		if err != nil {
			return err
		}
		o.ClientSecret = auth.Secret(strings.TrimSpace(secret))
		keys, err := valueOrFile(getenv("CORRAL_VDI_SESSION_KEYS"), keysFile, "CORRAL_VDI_SESSION_KEYS")
		if err != nil {
			return err
		}
		if c.SessionKeys, err = auth.ParseSessionKeys(keys); err != nil {
			return fmt.Errorf("CORRAL_VDI_SESSION_KEYS: %w", err)
		}
		if c.SessionLifetime, err = parseDuration(lifetime); err != nil || c.SessionLifetime <= 0 {
			return fmt.Errorf("CORRAL_VDI_SESSION_LIFETIME: %q is not a positive duration like 12h", lifetime)
		}
		oidcOn := false
		for _, m := range c.Auth {
			oidcOn = oidcOn || m == auth.ModeOIDC
		}
		if oidcOn && len(c.SessionKeys) == 0 {
			return errors.New("CORRAL_VDI_SESSION_KEYS is not set: OIDC sign-in keeps users in a signed cookie whose keys must survive restarts " +
				"and be shared by every replica; set it (or CORRAL_VDI_SESSION_KEYS_FILE) to the output of `openssl rand -base64 32`")
		}
		if !oidcOn && o.Issuer != "" {
			return errors.New("CORRAL_VDI_OIDC_ISSUER is set but CORRAL_VDI_AUTH does not include oidc: add it, e.g. CORRAL_VDI_AUTH=tailscale,oidc")
		}
		return nil
	}
}

// valueOrFile returns value, or the contents of file; setting both is an
// error. name is the environment variable, for messages.
func valueOrFile(value, file, name string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s and %s_FILE are both set: keep one", name, name)
	}
	buf, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	return string(buf), nil
}

// flagOrEnvSet reports whether the flag name was given or its env var set.
func flagOrEnvSet(fs *flag.FlagSet, name string, getenv func(string) string, envName string) bool {
	set := getenv(envName) != ""
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// bareBool is a boolean flag kept as text (parsed with the other settings,
// so that its env value gets the same error): like a flag.Bool it may be
// given bare, --stop-desktops-on-exit meaning true.
type bareBool string

func (b *bareBool) String() string { return string(*b) }

// Set keeps the flag's value, "true" when it is given bare.
func (b *bareBool) Set(s string) error { *b = bareBool(s); return nil }

// IsBoolFlag tells the flag package that the flag may be given bare.
func (b *bareBool) IsBoolFlag() bool { return true }
