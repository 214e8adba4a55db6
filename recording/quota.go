package recording

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Bounds of the free space kept on the disks (Config.Reserve).
const (
	// DefaultReserve is the share of a disk kept free when Config.Reserve
	// is zero, between minDefaultReserve and maxDefaultReserve.
	DefaultReserve    = 0.05
	minDefaultReserve = 64 << 20
	maxDefaultReserve = 2 << 30
	// minFreeBytes is kept free whatever the configuration says.
	minFreeBytes = 1 << 20
	// diskCheckEvery is how many bytes a recording writes between two
	// looks at the disks; diskCheckInterval bounds the time between them.
	diskCheckEvery    = 1 << 20
	diskCheckInterval = 5 * time.Second
)

// disks are the filesystems whose free space the recordings must not eat:
// the recordings' own and the database's.
type disks struct {
	reserve int64 // configured; 0: DefaultReserve of each disk
	dirs    []string

	mu      sync.Mutex
	checked time.Time
	written int64 // bytes written since the last check
}

func newDisks(reserve int64, dirs ...string) *disks {
	d := &disks{reserve: reserve}
	for _, dir := range dirs {
		if dir != "" && !slices.Contains(d.dirs, dir) {
			d.dirs = append(d.dirs, dir)
		}
	}
	return d
}

// lowDisk returns the first folder whose disk has less free space than
// its reserve, with that free space and reserve; "" when all have room.
func (d *disks) lowDisk() (dir string, free, reserve int64) {
	for _, dir := range d.dirs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			continue // a folder that is not there has nothing to keep free
		}
		free := int64(st.Bavail) * st.Bsize
		reserve := d.reserveOf(int64(st.Blocks) * st.Bsize)
		if free < reserve {
			return dir, free, reserve
		}
	}
	return "", 0, 0
}

// reserveOf returns the bytes to keep free on a disk of size bytes.
func (d *disks) reserveOf(size int64) int64 {
	r := d.reserve
	if r == 0 {
		r = min(max(int64(float64(size)*DefaultReserve), minDefaultReserve), maxDefaultReserve)
	}
	return max(r, minFreeBytes)
}

// due reports whether n more bytes written make it time to look at the
// disks again.
func (d *disks) due(n int64, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written += n
	if d.written < diskCheckEvery && now.Sub(d.checked) < diskCheckInterval {
		return false
	}
	d.written, d.checked = 0, now
	return true
}

// diskErr returns the refusal of a recorded console when a disk is low.
func (s *Store) diskErr() error {
	dir, free, reserve := s.disks.lowDisk()
	if dir == "" {
		return nil
	}
	s.log.Warn("recorded console refused: the disk keeps its reserve for the portal's database", "dir", dir,
		"free_bytes", free, "reserve_bytes", reserve)
	return vdi.Errorf(vdi.EUnavailable, "Ask an admin to delete recordings or free space on the portal's disk (CORRAL_VDI_RECORDING_DISK_RESERVE).",
		"This desktop's sessions are recorded, and the portal's disk is nearly full (%s free; %s is kept for its database).",
		bytesText(free), bytesText(reserve))
}

// addUser counts n more bytes of login's recordings, unless that takes
// them beyond their share; it reports whether it counted them.
func (s *Store) addUser(login string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.share >= 0 && s.users[login]+n > s.share {
		if !s.over[login] {
			s.over[login] = true
			s.log.Warn("a user's recordings reached their share of the cap: their recorded consoles are refused",
				"user", login, "bytes", s.users[login], "share_bytes", s.share)
		}
		return false
	}
	s.users[login] += n
	return true
}

// overShare reports whether login's recordings reached their share.
func (s *Store) overShare(login string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.share >= 0 && (s.over[login] || s.users[login] >= s.share)
}

// shareErr is the refusal of a recorded console of a user over their share.
func (s *Store) shareErr() error {
	return vdi.Errorf(vdi.EUnavailable, "Ask an admin to delete some of your recordings (they expire after the retention) or to raise CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER.",
		"This desktop's sessions are recorded, and your recordings reached your share of the space for recordings (%s).", bytesText(s.share))
}

// Notice says, for the admin dashboard, whose recorded consoles are
// refused because the recordings are full; empty when nobody's are.
func (s *Store) Notice() string {
	var parts []string
	if s.max >= 0 && (s.full.Load() || s.used.Load() >= s.max) {
		parts = append(parts, fmt.Sprintf("The recordings are full (%s of %s): every recorded console is refused. Delete recordings on the Recordings page or raise CORRAL_VDI_RECORDING_MAX_BYTES.",
			bytesText(s.used.Load()), bytesText(s.max)))
	}
	s.mu.Lock()
	var over []string
	for login := range s.over {
		over = append(over, login)
	}
	s.mu.Unlock()
	if len(over) > 0 {
		slices.Sort(over)
		parts = append(parts, fmt.Sprintf("Recorded consoles of %s are refused: their recordings reached the share of one user (%s). Delete some on the Recordings page or raise CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER.",
			strings.Join(over, ", "), bytesText(s.share)))
	}
	return strings.Join(parts, " ")
}

// bytesText writes a size for people.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
