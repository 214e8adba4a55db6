package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// AudioHello is the first (text) message of an audio websocket; every
// later message is one Opus packet, binary, AudioHello.FrameMs long.
type AudioHello struct {
	Codec      string `json:"codec"`
	SampleRate int    `json:"sampleRate"`
	Channels   int    `json:"channels"`
	FrameMs    int    `json:"frameMs"`
}

// audioQueue is how many packets may wait for a slow client (20 ms each):
// past it the oldest are dropped, so sound stays live instead of lagging.
const audioQueue = 10

// PipeAudio sends the Opus packets of the Ogg Opus stream src to ws, after
// hello, until src ends, the client goes or ctx is done. The stream's
// OpusHead and OpusTags headers are checked and not sent. A client that
// falls behind loses the oldest packets, never delays the rest. It returns
// the number of packets dropped and why it ended (nil: the client closed).
func PipeAudio(ctx context.Context, ws *websocket.Conn, src io.Reader, hello AudioHello) (int, error) {
	var dropped atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b, _ := json.Marshal(hello)
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		return 0, nil
	}
	go func() { // the client only closes; reading sees that
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				cancel()
				return
			}
		}
	}()
	packets := make(chan []byte, audioQueue)
	readErr := make(chan error, 1)
	go func() {
		defer close(packets)
		readErr <- readOpus(ctx, NewOggPackets(src), packets, &dropped)
	}()
	for {
		select {
		case <-ctx.Done():
			return int(dropped.Load()), nil
		case p, ok := <-packets:
			if !ok {
				return int(dropped.Load()), <-readErr
			}
			ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
				return int(dropped.Load()), nil
			}
		}
	}
}

// readOpus queues the stream's audio packets, dropping the oldest queued
// one when the queue is full.
func readOpus(ctx context.Context, in *OggPackets, out chan []byte, dropped *atomic.Int64) error {
	for i := 0; ; i++ {
		p, err := in.Next()
		if err != nil {
			return err // io.EOF: the encoder ended
		}
		switch {
		case i == 0 && !bytes.HasPrefix(p, []byte("OpusHead")):
			return fmt.Errorf("audio: the stream is not Ogg Opus")
		case i == 1 && !bytes.HasPrefix(p, []byte("OpusTags")):
			return fmt.Errorf("audio: no OpusTags after OpusHead")
		case i < 2:
			continue
		}
		if !queueLatest(ctx, out, append([]byte(nil), p...), dropped) {
			return nil
		}
	}
}

// queueLatest puts p on out, first taking the oldest packet off when out
// is full; it reports false once ctx is done.
func queueLatest(ctx context.Context, out chan []byte, p []byte, dropped *atomic.Int64) bool {
	for {
		select {
		case out <- p:
			return true
		case <-ctx.Done():
			return false
		default:
		}
		select {
		case <-out:
			dropped.Add(1)
		default:
		}
	}
}
