package recording

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Session is one recording being written: give Recorder to the relay and
// Close it when the session ends.
type Session struct {
	relay.Recorder
	s      *Store
	id     string
	login  string
	f      *os.File
	closer interface{ Close() error }
	mu     sync.Mutex
	good   int64 // the file's size after its last complete write
	failed bool
	once   sync.Once
}

// Start begins recording session sid of login on ref over protocol p; with
// input the user's keystrokes are recorded too. It fails with a
// vdi.EUnavailable error when the recordings are full, so the console is
// refused before it opens.
func (s *Store) Start(ctx context.Context, sid, login string, ref vdi.Ref, p vdi.Protocol, input bool) (*Session, error) {
	if !validID.MatchString(sid) {
		return nil, fmt.Errorf("recording: session id %q is not one", sid)
	}
	if s.max >= 0 && (s.full.Load() || s.used.Load() >= s.max) {
		return nil, vdi.Errorf(vdi.EUnavailable, "Ask an admin to free space for recordings or raise CORRAL_VDI_RECORDING_MAX_BYTES.",
			"This desktop's sessions are recorded, and the recordings are full.")
	}
	if s.overShare(login) {
		return nil, s.shareErr()
	}
	if err := s.diskErr(); err != nil {
		return nil, err
	}
	format := relay.FormatAsciicast
	if p == vdi.ProtocolVNC {
		format = relay.FormatRFB
	} else if p != vdi.ProtocolTerminal && p != vdi.ProtocolSerial {
		return nil, vdi.Errorf(vdi.EInvalid, "Use another console of this desktop.", "The portal cannot record %s sessions.", p)
	}
	f, err := os.OpenFile(s.path(sid, format), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	if err := s.db.CreateRecording(ctx, vdi.Recording{ID: sid, Login: login, Namespace: ref.Namespace, Member: ref.Name,
		Protocol: string(p), Format: format, StartedAt: s.now()}); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	rs := &Session{s: s, id: sid, login: login, f: f}
	switch format {
	case relay.FormatRFB:
		rec, e := relay.NewRFBRecorder(rs, relay.RFBRecordConfig{Input: input, Now: s.now})
		rs.Recorder, err = rec, e
	default:
		rec, e := relay.NewAsciicastRecorder(rs, relay.AsciicastConfig{Input: input, Title: ref.String(), Now: s.now})
		rs.Recorder, rs.closer, err = rec, rec, e
	}
	if err != nil {
		rs.Close(ctx)
		return nil, err
	}
	return rs, nil
}

// Write writes one complete event to the file, within the size cap. A
// failed write leaves the file at its last complete event (Close cuts off
// a partial one) and fails every later write.
func (rs *Session) Write(p []byte) (int, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.failed {
		return 0, ErrFull
	}
	s := rs.s
	n := int64(len(p))
	if s.disks.due(n, s.now()) && s.diskErr() != nil {
		rs.failed = true
		return 0, ErrDiskReserve
	}
	if !s.addUser(rs.login, n) {
		rs.failed = true
		return 0, ErrUserShare
	}
	if s.max >= 0 && s.used.Add(n) > s.max {
		s.used.Add(-n)
		s.addUser(rs.login, -n)
		s.full.Store(true)
		rs.failed = true
		return 0, ErrFull
	} else if s.max < 0 {
		s.used.Add(n)
	}
	w, err := rs.f.Write(p)
	if err != nil {
		s.used.Add(int64(w) - n)
		s.addUser(rs.login, int64(w)-n)
		rs.failed = true
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is the portal's business, not the user's
		}
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			s.log.Warn("a recorded session ends: the disk of the recordings is full", "dir", s.dir, "recording", rs.id)
			return w, fmt.Errorf("recording: the disk of the recordings is full: %w", err)
		}
		return w, fmt.Errorf("recording: write failed: %w", err)
	}
	rs.good += n
	return w, nil
}

// Close finishes the recording: writes what the recorder holds back, cuts
// off a partial event, closes the file and records its end and size. It
// may be called more than once.
func (rs *Session) Close(ctx context.Context) error {
	var err error
	rs.once.Do(func() {
		if rs.closer != nil {
			rs.closer.Close() // a failure is already the session's reason
		}
		rs.mu.Lock()
		good := rs.good
		rs.mu.Unlock()
		if info, e := rs.f.Stat(); e == nil && info.Size() > good {
			rs.f.Truncate(good)
			rs.s.used.Add(good - info.Size())
			rs.s.addUser(rs.login, good-info.Size())
		}
		err = errors.Join(rs.f.Sync(), rs.f.Close())
		if e := rs.s.db.FinishRecording(context.WithoutCancel(ctx), rs.id, rs.s.now(), good); e != nil {
			err = errors.Join(err, e)
		}
	})
	return err
}
