package gateway

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestResetBucket: ResetBurst resets at once, then ResetRate a second.
func TestResetBucket(t *testing.T) {
	t.Parallel()
	var b resetBucket
	t0 := time.Unix(1000, 0)
	for i := range ResetBurst {
		if !b.take(t0) {
			t.Fatalf("reset %d of the burst refused", i+1)
		}
	}
	if b.take(t0) {
		t.Fatal("a reset beyond the burst taken")
	}
	t1 := t0.Add(time.Second)
	for i := range ResetRate {
		if !b.take(t1) {
			t.Fatalf("reset %d of the second after refused", i+1)
		}
	}
	if b.take(t1) {
		t.Fatal("a reset beyond the rate taken")
	}
}

// TestResetGuardScan: the guard follows frames however the reads cut them
// (one byte at a time, or all at once), counts RST_STREAMs on streams (not
// on stream 0, which the server refuses itself), and cuts the stream the
// server reads at the end of the RST_STREAM that emptied the bucket.
func TestResetGuardScan(t *testing.T) {
	t.Parallel()
	var in bytes.Buffer
	in.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&in, nil)
	_ = fr.WriteSettings()
	_ = fr.WriteData(1, false, make([]byte, 300)) // payload bytes that look like anything
	var cut int
	for i := range ResetBurst + 5 {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: []byte{0x82}, EndHeaders: true})
		_ = fr.WriteRSTStream(uint32(2*i+1), http2.ErrCodeCancel)
		if i == ResetBurst {
			cut = in.Len()
		}
	}
	data := in.Bytes()
	now := time.Unix(1000, 0)
	for _, step := range []int{1, 7, len(data)} {
		g := &resetGuard{now: func() time.Time { return now }, skip: len(http2.ClientPreface)}
		at := -1
		for off := 0; off < len(data) && at < 0; off += step {
			if end := g.scan(data[off:min(off+step, len(data))]); end >= 0 {
				at = off + end
			}
		}
		if at != cut {
			t.Errorf("reads of %d bytes: cut at %d, want %d (after reset %d)", step, at, cut, ResetBurst+1)
		}
	}
}
