package mllp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func frame(s string) string { return "\x0b" + s + "\x1c\r" }

type read struct {
	msg     string
	skipped int
	err     error
}

func readAll(r *Reader) []read {
	var out []read
	for {
		msg, skipped, err := r.Next()
		out = append(out, read{string(msg), skipped, err})
		if err != nil {
			return out
		}
	}
}

func TestReaderFrames(t *testing.T) {
	big := strings.Repeat("x", 40<<10) // larger than the reader's buffer
	cases := []struct {
		name   string
		stream string
		max    int
		want   []read
	}{
		{"one frame", frame("MSH|a"), 100, []read{{"MSH|a", 0, nil}, {"", 0, io.EOF}}},
		{"several frames", frame("A") + frame("B") + frame("C"), 100,
			[]read{{"A", 0, nil}, {"B", 0, nil}, {"C", 0, nil}, {"", 0, io.EOF}}},
		{"garbage before the start block", "hello\r\n" + frame("A"), 100,
			[]read{{"A", 7, nil}, {"", 0, io.EOF}}},
		{"garbage between frames and at the end", frame("A") + "zz" + frame("B") + "tail", 100,
			[]read{{"A", 0, nil}, {"B", 2, nil}, {"", 4, io.EOF}}},
		{"a frame without its end block is abandoned at the next start", "\x0bLOST" + frame("B"), 100,
			[]read{{"B", 5, nil}, {"", 0, io.EOF}}},
		{"an end block without CR is data", frame("A\x1cB"), 100, []read{{"A\x1cB", 0, nil}, {"", 0, io.EOF}}},
		{"the stream ends inside a frame", frame("A") + "\x0bMSH|half", 100,
			[]read{{"A", 0, nil}, {"", 9, ErrTruncated}}},
		{"the stream ends after an end block", "\x0bAB\x1c", 100, []read{{"", 4, ErrTruncated}}},
		{"a frame over the bound", frame(strings.Repeat("y", 101)), 100, []read{{"", 0, ErrFrameTooLarge}}},
		{"a frame exactly at the bound", frame(strings.Repeat("y", 100)), 100,
			[]read{{strings.Repeat("y", 100), 0, nil}, {"", 0, io.EOF}}},
		{"a frame larger than the buffer", frame(big), 1 << 20, []read{{big, 0, nil}, {"", 0, io.EOF}}},
		{"a huge frame over the bound stops early", frame(big + big), 50 << 10, []read{{"", 0, ErrFrameTooLarge}}},
		{"empty stream", "", 100, []read{{"", 0, io.EOF}}},
	}
	for _, tc := range cases {
		for _, split := range []bool{false, true} {
			name := tc.name
			var src io.Reader = strings.NewReader(tc.stream)
			if split {
				name += " (one byte per read)"
				src = iotest.OneByteReader(src)
			}
			t.Run(name, func(t *testing.T) {
				got := readAll(NewReader(src, tc.max))
				if len(got) != len(tc.want) {
					t.Fatalf("got %d results %+v, want %d", len(got), got, len(tc.want))
				}
				for i, w := range tc.want {
					g := got[i]
					if g.msg != w.msg || g.skipped != w.skipped || !errors.Is(g.err, w.err) {
						t.Errorf("result %d: got (%.40q, %d, %v), want (%.40q, %d, %v)", i, g.msg, g.skipped, g.err, w.msg, w.skipped, w.err)
					}
				}
			})
		}
	}
}

func TestReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("deadline")
	r := NewReader(io.MultiReader(strings.NewReader("\x0bMSH"), iotest.ErrReader(boom)), 100)
	if _, _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the stream's error", err)
	}
}

func TestWriteFramesOnce(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, []byte("MSH|x")); err != nil {
		t.Fatal(err)
	}
	if b.String() != frame("MSH|x") {
		t.Fatalf("got %q", b.String())
	}
	msg, _, err := NewReader(&b, 10).Next()
	if err != nil || string(msg) != "MSH|x" {
		t.Fatalf("round trip: %q %v", msg, err)
	}
}

// FuzzReader: whatever the stream, Next never panics, never returns a frame
// over the bound, and a frame it returns holds no start block.
func FuzzReader(f *testing.F) {
	f.Add([]byte(frame("MSH|^~\\&|A")+"junk\x0b\x1c\r"), 16)
	f.Add([]byte("\x0b\x0b\x1c\x1c\r\x0b"), 1)
	f.Fuzz(func(t *testing.T, stream []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 64
		}
		r := NewReader(bytes.NewReader(stream), max)
		for range len(stream) + 1 {
			msg, _, err := r.Next()
			if err != nil {
				return
			}
			if len(msg) > max || bytes.IndexByte(msg, StartBlock) >= 0 {
				t.Fatalf("bad frame %q (max %d)", msg, max)
			}
		}
		t.Fatal("Next returned more frames than the stream has bytes")
	})
}
