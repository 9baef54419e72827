package mllp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// The MLLP block characters.
const (
	StartBlock     = 0x0B // VT: begins a frame
	EndBlock       = 0x1C // FS: ends a frame, followed by CarriageReturn
	CarriageReturn = 0x0D
)

// ErrFrameTooLarge is returned by [Reader.Next] when a frame grows past the
// reader's bound. The stream cannot be resynchronised cheaply after it (the
// rest of the frame would have to be read and thrown away), so the caller
// closes the connection.
var ErrFrameTooLarge = errors.New("frame exceeds the size bound")

// ErrTruncated is returned by [Reader.Next] when the stream ends inside a
// frame (a start block was read, its end block never came).
var ErrTruncated = errors.New("stream ended inside a frame")

// Reader reads MLLP frames from a byte stream: a frame split over many reads
// and many frames in one read both work, since it reads through a buffer.
type Reader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewReader returns a Reader of r whose frames may hold at most max bytes
// of message (max > 0).
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 16<<10), max: max}
}

// Next returns the message of the next frame; the slice is valid until the
// next call. skipped counts the bytes thrown away before it: bytes before a
// start block, and a frame abandoned because a new start block began before
// its end block (a sender that lost its place). At the end of the stream
// between frames Next returns io.EOF (with skipped > 0 when the stream ended
// in garbage); inside a frame, ErrTruncated. A read error of the stream
// (such as a deadline) is returned as it is.
func (r *Reader) Next() (msg []byte, skipped int, err error) {
	if skipped, err = r.seekStart(); err != nil {
		return nil, skipped, err
	}
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice(EndBlock)
		// A start block inside the frame: the frame before it never ended.
		// Keep what follows the last one as the beginning of a new frame.
		if i := bytes.LastIndexByte(chunk, StartBlock); i >= 0 {
			skipped += len(r.buf) + i + 1
			r.buf = r.buf[:0]
			chunk = chunk[i+1:]
		}
		switch {
		case err == nil:
			r.buf = append(r.buf, chunk[:len(chunk)-1]...)
		case errors.Is(err, bufio.ErrBufferFull):
			r.buf = append(r.buf, chunk...)
		case errors.Is(err, io.EOF):
			return nil, skipped + len(r.buf) + len(chunk) + 1, ErrTruncated
		default:
			return nil, skipped, err
		}
		if len(r.buf) > r.max {
			return nil, skipped, fmt.Errorf("%w of %d bytes", ErrFrameTooLarge, r.max)
		}
		if err != nil {
			continue // buffer full: the frame goes on
		}
		// An end block must be followed by a carriage return; an end block
		// alone is taken as part of the message, as lenient receivers do.
		next, err := r.br.ReadByte()
		switch {
		case err == nil && next == CarriageReturn:
			return r.buf, skipped, nil
		case err == nil:
			if err := r.br.UnreadByte(); err != nil {
				return nil, skipped, err
			}
			r.buf = append(r.buf, EndBlock)
		case errors.Is(err, io.EOF):
			return nil, skipped + len(r.buf) + 2, ErrTruncated
		default:
			return nil, skipped, err
		}
	}
}

// seekStart consumes bytes up to and including the next start block and
// returns how many came before it.
func (r *Reader) seekStart() (int, error) {
	skipped := 0
	for {
		chunk, err := r.br.ReadSlice(StartBlock)
		switch {
		case err == nil:
			return skipped + len(chunk) - 1, nil
		case errors.Is(err, bufio.ErrBufferFull):
			skipped += len(chunk)
		default:
			return skipped + len(chunk), err
		}
	}
}

// Write writes msg as one frame. It makes one Write call, so frames written
// by one goroutine at a time never interleave.
func Write(w io.Writer, msg []byte) error {
	_, err := w.Write(AppendFrame(make([]byte, 0, len(msg)+3), msg))
	return err
}

// AppendFrame appends msg framed (start block, msg, end block, carriage
// return) to dst, so a connection can reuse one buffer for its answers.
func AppendFrame(dst, msg []byte) []byte {
	dst = append(dst, StartBlock)
	dst = append(dst, msg...)
	return append(dst, EndBlock, CarriageReturn)
}
