package console

import (
	"context"
	"log/slog"
	"time"
)

// releaseTries are the waits before each try of an owner record's delete:
// a delete the API server refuses or does not answer (a restart, an
// admission webhook down) is tried again for about half a minute, so that
// the record does not stay until another replica's console takes it over.
// A record that changed meanwhile (another replica took it over) is left.
var releaseTries = []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second}

// releaseOwner gives key's record o up, in the background, trying again
// as releaseTries says: a hub or a stream calls it while it closes.
func releaseOwner(owners Owners, log *slog.Logger, key string, o Owner) {
	tries := releaseTries
	go func() {
		for i, wait := range tries {
			time.Sleep(wait)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := owners.Release(ctx, key, o)
			cancel()
			switch {
			case err == nil && i > 0:
				log.Info("the owner record deleted, tried again", "console", key, "tries", i+1)
				return
			case err == nil:
				return
			case i < len(tries)-1:
				log.Warn("the owner record not deleted: trying again", "console", key, "try", i+1, "next", tries[i+1], "err", err)
			default:
				log.Warn("the owner record not deleted, tried again and again: it stays until another replica takes it over", "console", key, "tries", i+1, "err", err)
			}
		}
	}()
}
