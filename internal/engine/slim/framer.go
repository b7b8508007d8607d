package slim

import (
	"bytes"
	"encoding/json"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/framer"
)

// objectFramer finds the frames of a watch, one JSON object each, by the brackets and
// strings that delimit them, where the JSON framer runs encoding/json's scanner over
// each frame twice (once to find its end, once more to copy it out): for a ConfigMap's
// event, that was most of the time its frame took to read.
//
// It checks no more than it needs to find an object's end; the frame's decoding then
// reads it all (the event's members, its object) and fails where encoding/json would
// have failed the frame, so that a malformed frame still ends the watch with an error.
// A stream whose next value is not an object is framed by the JSON framer from there.
type objectFramer struct{ runtime.Framer }

func (f objectFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, buf: make([]byte, 0, 4096)}
}

// frameReader is an io.ReadCloser with the contract of the JSON framer's: each Read
// returns one frame, or as much of it as fits with io.ErrShortBuffer, and the rest of
// it by the next Reads; a stream that ends inside a frame gives io.ErrUnexpectedEOF
// (or the syntax error the JSON framer finds in what came), and the stream's other errors are given as they are, after the frames read before
// them.
type frameReader struct {
	r         io.ReadCloser
	buf       []byte // read from r; buf[off:] not yet framed
	off       int
	scan      frameScan // of the frame that starts at buf[off]
	err       error     // r's error, given once buf holds no more frames
	remaining []byte    // of a frame larger than the caller's buffer
	fallback  io.ReadCloser
}

func (f *frameReader) Read(data []byte) (int, error) {
	if f.fallback != nil {
		return f.fallback.Read(data)
	}
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		f.remaining = f.remaining[n:]
		if len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		return n, nil
	}
	frame, err := f.next()
	if err != nil {
		return 0, err
	}
	if frame == nil { // not an object: the JSON framer reads on
		return f.fallback.Read(data)
	}
	n := copy(data, frame)
	if n < len(frame) {
		f.remaining = bytes.Clone(frame[n:]) // buf is read into again
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *frameReader) Close() error { return f.r.Close() }

// next returns the next frame, a slice of buf, or nil when the stream's next value is
// not an object (f.fallback reads from there).
func (f *frameReader) next() ([]byte, error) {
	for {
		for f.off < len(f.buf) && isSpace(f.buf[f.off]) {
			f.off++
		}
		if f.off < len(f.buf) {
			if f.buf[f.off] != '{' {
				f.fallBack()
				return nil, nil
			}
			if end, ok := f.scan.end(f.buf[f.off:]); ok {
				frame := f.buf[f.off : f.off+end]
				f.off += end
				f.scan = frameScan{}
				return frame, nil
			}
		}
		if f.err != nil {
			if f.err == io.EOF && f.off < len(f.buf) {
				return nil, partialFrameError(f.buf[f.off:])
			}
			return nil, f.err
		}
		f.fill()
	}
}

// partialFrameError is the JSON framer's error for a stream that ends with data, the
// start of a frame: io.ErrUnexpectedEOF, or the syntax error it finds in data first.
func partialFrameError(data []byte) error {
	var frame json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&frame); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF // not reached: data is no whole object
}

// fill reads more of the stream into buf, making room first.
func (f *frameReader) fill() {
	if f.off > 0 {
		f.buf = f.buf[:copy(f.buf, f.buf[f.off:])]
		f.off = 0
	}
	if len(f.buf) == cap(f.buf) {
		f.buf = append(f.buf, make([]byte, cap(f.buf))...)[:len(f.buf)]
	}
	n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
	f.buf = f.buf[:len(f.buf)+n]
	f.err = err
}

// fallBack hands the stream, from buf[off], to the JSON framer.
func (f *frameReader) fallBack() {
	rest := io.MultiReader(bytes.NewReader(bytes.Clone(f.buf[f.off:])), &afterError{r: f.r, err: f.err})
	f.fallback = framer.NewJSONFramedReader(readCloser{rest, f.r})
	f.buf, f.off = nil, 0
}

// afterError reads r, or gives err once r gave it already.
type afterError struct {
	r   io.Reader
	err error
}

func (a *afterError) Read(p []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	return a.r.Read(p)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// frameScan is where the scan of a frame for its end stopped: how far it read, how
// deeply nested it is there, and whether inside a string.
type frameScan struct {
	pos, depth int
	inString   bool
}

// end returns the length of the JSON object that data starts with, continuing the
// scan where it stopped, or false when data ends before the object does.
func (s *frameScan) end(data []byte) (int, bool) {
	i := s.pos
	for i < len(data) {
		if s.inString {
			j := bytes.IndexAny(data[i:], `"\`)
			if j < 0 {
				i = len(data)
				break
			}
			i += j
			if data[i] == '\\' {
				if i+1 >= len(data) {
					break // the escaped byte is not read yet
				}
				i += 2
				continue
			}
			s.inString = false
			i++
			continue
		}
		switch data[i] {
		case '"':
			s.inString = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				s.pos = 0
				return i + 1, true
			}
		}
		i++
	}
	s.pos = i
	return 0, false
}
