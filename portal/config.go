package portal

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/store"
)

// Config is the portal's configuration, in the groups of the settings
// table (config_table.go): every setting is a flag of
// `corral-vdi-portal serve` and a CORRAL_VDI_* environment variable.
type Config struct {
	Server    ServerConfig
	Auth      AuthConfig
	Claims    ClaimsConfig
	Console   ConsoleConfig
	Recording RecordingConfig
	Uploads   UploadConfig
	Store     StoreConfig
	Local     LocalConfig
	Kube      KubeConfig
	// SecretFiles are the files the settings name (secrets, keys, the
	// kubeconfig), hidden from namespaced desktops.
	SecretFiles []string
}

// ServerConfig is where the portal listens, what it keeps and how it
// stops.
type ServerConfig struct {
	// Listen is the TCP address of CORRAL_VDI_LISTEN; ListenUnix are its
	// unix: entries, Unix sockets for a proxy on this host.
	Listen     string
	ListenUnix []string
	DataDir    string
	// Backend is BackendLocal or BackendKube.
	Backend string
	// PublicURLs are the origins the portal is reached at through a proxy
	// (CORRAL_VDI_PUBLIC_URL); other Hosts than these, loopback and the
	// listen address get 421.
	PublicURLs []string
	// AdminSocket is the Unix socket the admin CLI talks to the portal
	// on; empty for none.
	AdminSocket string
	// DrainTimeout is how long, after SIGTERM, open consoles may go on
	// while new ones are refused and /readyz fails; 0 stops at once.
	DrainTimeout time.Duration
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// LogLevel is the least level logged: debug also logs every claim's
	// steps (a slow one's are logged at info).
	LogLevel slog.Level
}

// logLevels are the words of CORRAL_VDI_LOG_LEVEL.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// AuthConfig is who users are and who the admins are.
type AuthConfig struct {
	// Modes are the identity modes (auth.ModeTailscale...).
	Modes          []string
	TrustedProxies []netip.Prefix
	Admins         []string
	AdminGroups    []string
	OIDC           auth.OIDCConfig
	SessionKeys    auth.Keys
	// SessionLifetime is how long a cookie sign-in lasts.
	SessionLifetime time.Duration
	// GroupsFile maps groups to logins for identities without groups.
	GroupsFile string
}

// ClaimsConfig is the portal-wide reclaim policy and claim limits.
type ClaimsConfig struct {
	DisconnectGrace time.Duration
	MaxSession      time.Duration
	IdleTimeout     time.Duration
	// ReclaimEvery is how often due reclaims are looked for.
	ReclaimEvery time.Duration
	// MaxDesktopsPerUser is how many desktops one user may hold across
	// pools; 0 for no limit.
	MaxDesktopsPerUser int
	// MaxAgentDesktops is how many desktops one user's agents may work
	// in at once; 0 for no limit.
	MaxAgentDesktops int
	// AgentSeatIdle is how long an agent's screen of a desktop (a
	// console while open) stays open after its last call.
	AgentSeatIdle time.Duration
}

// ConsoleConfig is what the consoles may do and how they reach desktops.
type ConsoleConfig struct {
	// MaxConsolesPerUser caps one user's open consoles; -1 for no cap.
	MaxConsolesPerUser int
	// TokenKeys sign RDP tokens, newest first; replicas share them.
	TokenKeys auth.Keys
	// Peers are peer portals' base URLs; PeerSecret signs links to them.
	Peers      []string
	PeerSecret []byte
	// PeerURL is where the other replicas reach this one (screen links).
	PeerURL string
	// H264 is the program each screen hub runs to encode H.264 for the
	// consoles that ask for it (gst-launch-1.0, unix:PATH); auto, until
	// Open resolves it (resolveH264); off or empty: tiles only.
	H264 string
	// WebRTCUDP is the UDP address of the WebRTC video path (one port for
	// every console, ICE-lite); empty: off. WebRTCTCP is its ICE-TCP
	// fallback's address; empty: none. WebRTCIPs are the addresses given
	// to browsers as the portal's candidates; empty: WebRTCUDP's host.
	WebRTCUDP, WebRTCTCP string
	WebRTCIPs            []string
}

// RecordingConfig bounds the recordings of recorded pools.
type RecordingConfig struct {
	// Retention is how long recordings are kept; negative: forever.
	Retention time.Duration
	// MaxBytes caps all recordings together; negative: no cap.
	MaxBytes int64
	// UserMaxBytes is each user's share of MaxBytes; zero: a quarter of
	// it, negative: none.
	UserMaxBytes int64
	// DiskReserve is the free space recordings leave on the disks of the
	// recordings and the database; zero: 5% of each disk (64 MiB to 2 GiB).
	DiskReserve int64
}

// UploadConfig bounds what the Files panel writes into desktops.
type UploadConfig struct {
	// MaxFile caps one uploaded file, Quota all of one desktop's ~/Uploads.
	MaxFile, Quota int64
}

// StoreConfig is the history database and how much history it keeps.
type StoreConfig struct {
	// DatabaseURL, when set, is the PostgreSQL database (postgres://...)
	// for history, audit and sessions, shared by replicas; DatabasePassword
	// replaces its password (CORRAL_VDI_DATABASE_PASSWORD_FILE).
	DatabaseURL      string
	DatabasePassword string
	// History bounds the audit log and session history.
	History store.Retention
	// BufferRows bounds the history rows kept in memory while the
	// database does not answer (routine rows are shed first).
	BufferRows int
}

// LocalConfig is the local backend's: desktops on this machine.
type LocalConfig struct {
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
	// StopDesktopsOnExit stops local desktops when the portal exits; by
	// default they keep running and the next start re-adopts them.
	StopDesktopsOnExit bool
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
}

// KubeConfig is the kube backend's: desktops on a Kubernetes cluster.
type KubeConfig struct {
	// Kubeconfig is the kubeconfig file; empty means in-cluster config in
	// a pod, else ~/.kube/config.
	Kubeconfig string
	// QPS is the request rate limit (burst twice it).
	QPS int
	// Namespace is the portal's own namespace, where the replicas elect
	// the reclaim leader.
	Namespace string
	// PoolNamespaces are the namespaces pools are kept in, namespaced
	// least-privilege mode (a Role in each); empty is the cluster-wide
	// mode (a ClusterRole, pools in every namespace).
	PoolNamespaces []string
	// Leader times the reclaim leader election.
	Leader LeaderTiming
	// SharedSecretsFrom names the Secret (namespace/name or name) the
	// replicas' shared keys come from; when set, missing keys make the
	// portal not ready.
	SharedSecretsFrom string
}
