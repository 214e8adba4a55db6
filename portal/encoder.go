package portal

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// encoderCheckTimeout bounds the encoder service's check of its program
// at start (one small screen; a cold start under load takes seconds).
const encoderCheckTimeout = 20 * time.Second

// Encoder is `corral-vdi-portal encoder`: the H.264 encoder service
// (rfb.ServeEncoders) on a Unix socket, for a portal that cannot run
// encoders itself. On Kubernetes it is the encoder sidecar of the
// portal's Pod (deploy/), whose portal container has
// CORRAL_VDI_H264=unix:PATH of the socket in a volume they share. It runs
// until ctx ends; after -h it returns flag.ErrHelp.
func Encoder(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("encoder", flag.ContinueOnError)
	socket := fs.String("socket", "", "the Unix socket to serve on, e.g. /run/corral-vdi-encoder/h264.sock; the portal's h264 is then unix:PATH (required)")
	program := fs.String("program", "gst-launch-1.0", "GStreamer's gst-launch-1.0, with x264enc (gstreamer1.0-plugins-ugly)")
	max := fs.Int("max", rfb.DefaultMaxEncoders, "encoders at once, one per desktop with an H.264 viewer; beyond it a desktop's viewers get tiles")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: corral-vdi-portal encoder -socket PATH [-program P] [-max N]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *socket == "" {
		fs.Usage()
		return errors.New("encoder: -socket is required: the Unix socket the portal's CORRAL_VDI_H264=unix:PATH names")
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	check, cancel := context.WithTimeout(ctx, encoderCheckTimeout)
	err := rfb.CheckH264(check, *program)
	cancel()
	if err != nil {
		return fmt.Errorf("encoder: %s does not encode H.264 here: %w", *program, err)
	}
	ln, err := rfb.ListenEncoders(*socket)
	if err != nil {
		return fmt.Errorf("encoder: %w", err)
	}
	log.Info("H.264 encoder service serving", "socket", *socket, "program", *program, "max", *max)
	return rfb.ServeEncoders(ctx, ln, rfb.EncoderServiceConfig{Program: *program, Max: *max, Log: log})
}
