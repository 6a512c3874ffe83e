// The canned server (-canned, -canned-tls): a client benchmark's server that costs little per
// request, so that one CPU of it outruns one CPU of any client and the client's cost shows.
//
// Every request, whatever its method and path, gets 200 with the body "hello" in the shape nginx
// gives it: over HTTP/1.1 the same status line and header fields (Server, Date, Content-Type,
// Content-Length, Connection); over HTTP/2 the same header block, each field a literal with
// incremental indexing and a Huffman-coded value, so each reply grows the client's HPACK table as
// nginx's replies do, and the Date changes every second. It speaks HTTP/1.1 (requests without a
// body) and HTTP/2 (h2c with prior knowledge, told apart by the preface; over TLS, by ALPN). Per
// connection one goroutine reads, answers every whole request of the read, and writes the
// answers in one write. HTTP/2 as far as a client needs: SETTINGS and their ACK, PING, the
// connection's flow-control window for its replies, WINDOW_UPDATE for a request's DATA,
// CONTINUATION, RST_STREAM, GOAWAY. It never parses a request's header block: a reply does not
// depend on it.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"syscall"
	"time"

	"golang.org/x/net/http2/hpack"
)

const (
	cannedServer = "canned"
	cannedBody   = "hello"
	h2Preface    = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	maxFrame     = 1 << 24
)

var cannedBodyBytes = []byte(cannedBody) // a reply's DATA payload, made once

// HTTP/2 frame types and flags.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRstStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameGoaway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9
	flagEndStream     = 0x1
	flagAck           = 0x1
	flagEndHeaders    = 0x4
	flagPadded        = 0x8
	flagPriority      = 0x20
)

// replies: the header block (HTTP/2) and head (HTTP/1.1) of the current second.
type replies struct {
	second int64
	block  []byte
	head   []byte
}

func (r *replies) now() {
	t := time.Now()
	if t.Unix() == r.second {
		return
	}
	r.second = t.Unix()
	date := t.UTC().Format(http.TimeFormat)
	r.head = []byte("HTTP/1.1 200 OK\r\nServer: " + cannedServer + "\r\nDate: " + date +
		"\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n" +
		cannedBody)
	block := []byte{0x88} // :status 200, indexed
	for _, f := range []struct {
		index byte // the static table's entry for the name
		value string
	}{{54, cannedServer}, {33, date}, {31, "text/plain"}, {28, "5"}} {
		block = append(block, 0x40|f.index) // literal with incremental indexing, indexed name
		if n := hpack.HuffmanEncodeLength(f.value); n < uint64(len(f.value)) {
			block = appendLength(block, 0x80, n)
			block = hpack.AppendHuffmanString(block, f.value)
		} else {
			block = appendLength(block, 0, uint64(len(f.value)))
			block = append(block, f.value...)
		}
	}
	r.block = block
}

// appendLength appends an HPACK string length (7-bit prefix) with the Huffman bit given.
func appendLength(b []byte, huffman byte, n uint64) []byte {
	if n < 127 {
		return append(b, huffman|byte(n))
	}
	b = append(b, huffman|127)
	for n -= 127; n >= 128; n >>= 7 {
		b = append(b, byte(n&0x7f)|0x80)
	}
	return append(b, byte(n))
}

func appendFrame(b []byte, kind, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), kind, flags)
	b = binary.BigEndian.AppendUint32(b, stream)
	return append(b, payload...)
}

func serveCanned(lis net.Listener, config *tls.Config) {
	for {
		conn, err := lis.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go cannedConn(conn, config)
	}
}

func cannedConn(conn net.Conn, config *tls.Config) {
	defer conn.Close()
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	var first []byte
	h2 := false
	if config != nil {
		t := tls.Server(conn, config)
		if t.Handshake() != nil {
			return
		}
		conn = t
		h2 = t.ConnectionState().NegotiatedProtocol == "h2"
	} else { // the preface or a request line
		buf := make([]byte, len(h2Preface))
		n, err := io.ReadAtLeast(conn, buf, 3)
		if err != nil {
			return
		}
		first = buf[:n]
		h2 = bytes.HasPrefix([]byte(h2Preface), first[:3])
	}
	var err error
	if h2 {
		err = cannedH2(conn, first)
	} else {
		err = cannedH1(conn, first)
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) &&
		!errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		log.Printf("canned: %v", err)
	}
}

// reader: a connection's bytes read and not yet used, in one buffer reused for every read.
type reader struct {
	conn net.Conn
	buf  []byte
	in   []byte // buf's unused bytes
}

func newReader(conn net.Conn, pending []byte) *reader {
	buf := make([]byte, 1<<20)
	return &reader{conn: conn, buf: buf, in: buf[:copy(buf, pending)]}
}

// more moves the unused bytes to the buffer's start and reads once after them.
func (r *reader) more() error {
	k := copy(r.buf, r.in)
	if k == len(r.buf) {
		return errors.New("a request larger than the read buffer")
	}
	n, err := r.conn.Read(r.buf[k:])
	r.in = r.buf[:k+n]
	return err
}

// cannedH1 answers every request (a head ending in an empty line) of each read.
func cannedH1(conn net.Conn, pending []byte) error {
	var r replies
	rd := newReader(conn, pending)
	out := []byte(nil)
	for {
		r.now()
		out = out[:0]
		for {
			end := bytes.Index(rd.in, []byte("\r\n\r\n"))
			if end < 0 {
				break
			}
			out = append(out, r.head...)
			rd.in = rd.in[end+4:]
		}
		if len(out) > 0 {
			if _, err := conn.Write(out); err != nil {
				return err
			}
		}
		if err := rd.more(); err != nil {
			return err
		}
	}
}

// h2conn: one HTTP/2 connection's state.
type h2conn struct {
	r         replies
	window    int64    // the connection's send window
	waiting   []uint32 // streams whose reply waits for window
	headersOn uint32   // the stream whose header block goes on in CONTINUATION, 0 if none
	endOn     bool     // whether that stream's HEADERS ended it
	out       []byte
	streamWin int64 // the client's initial stream window
}

func (c *h2conn) reply(stream uint32) {
	if c.window < int64(len(cannedBody)) {
		c.waiting = append(c.waiting, stream)
		return
	}
	c.window -= int64(len(cannedBody))
	c.out = appendFrame(c.out, frameHeaders, flagEndHeaders, stream, c.r.block)
	c.out = appendFrame(c.out, frameData, flagEndStream, stream, cannedBodyBytes)
}

// frame handles one frame: its type, flags, stream, payload (padding and priority taken off)
// and its whole payload's length (what flow control counts).
func (c *h2conn) frame(kind, flags byte, stream uint32, p []byte, size int) error {
	switch kind {
	case frameHeaders:
		if flags&flagEndHeaders == 0 {
			c.headersOn, c.endOn = stream, flags&flagEndStream != 0
		} else if flags&flagEndStream != 0 {
			c.reply(stream)
		}
	case frameContinuation:
		if stream != c.headersOn {
			return errors.New("CONTINUATION of no header block")
		}
		if flags&flagEndHeaders != 0 {
			c.headersOn = 0
			if c.endOn {
				c.reply(stream)
			}
		}
	case frameData:
		if size > 0 { // give the request's bytes back to its sender's windows
			inc := binary.BigEndian.AppendUint32(nil, uint32(size))
			c.out = appendFrame(c.out, frameWindowUpdate, 0, 0, inc)
			if flags&flagEndStream == 0 {
				c.out = appendFrame(c.out, frameWindowUpdate, 0, stream, inc)
			}
		}
		if flags&flagEndStream != 0 {
			c.reply(stream)
		}
	case frameSettings:
		if flags&flagAck != 0 {
			return nil
		}
		for i := 0; i+6 <= len(p); i += 6 {
			if binary.BigEndian.Uint16(p[i:]) == 0x4 { // SETTINGS_INITIAL_WINDOW_SIZE
				c.streamWin = int64(binary.BigEndian.Uint32(p[i+2:]))
			}
		}
		if c.streamWin < int64(len(cannedBody)) {
			return errors.New("the client's stream window is smaller than a reply")
		}
		c.out = appendFrame(c.out, frameSettings, flagAck, 0, nil)
	case frameRstStream: // a reply still waiting for window is not sent
		for i, s := range c.waiting {
			if s == stream {
				c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
				break
			}
		}
	case framePing:
		if flags&flagAck == 0 {
			c.out = appendFrame(c.out, framePing, flagAck, 0, p)
		}
	case frameWindowUpdate:
		if stream == 0 && len(p) == 4 {
			c.window += int64(binary.BigEndian.Uint32(p) & 0x7fffffff)
			waiting := c.waiting
			c.waiting = nil
			for _, s := range waiting {
				c.reply(s)
			}
		}
	case frameGoaway:
		return io.EOF
	}
	return nil
}

// cannedH2 serves one HTTP/2 connection: frames in, every reply of a read in one write.
func cannedH2(conn net.Conn, pending []byte) error {
	c := &h2conn{window: 65535, streamWin: 65535}
	var settings []byte
	settings = binary.BigEndian.AppendUint16(settings, 0x3) // SETTINGS_MAX_CONCURRENT_STREAMS
	settings = binary.BigEndian.AppendUint32(settings, 128)
	c.out = appendFrame(nil, frameSettings, 0, 0, settings)
	grant := binary.BigEndian.AppendUint32(nil, 1<<30) // the connection's receive window
	c.out = appendFrame(c.out, frameWindowUpdate, 0, 0, grant)
	if _, err := conn.Write(c.out); err != nil {
		return err
	}
	rd := newReader(conn, pending)
	for len(rd.in) < len(h2Preface) {
		if err := rd.more(); err != nil {
			return err
		}
	}
	if string(rd.in[:len(h2Preface)]) != h2Preface {
		return errors.New("not the HTTP/2 preface")
	}
	rd.in = rd.in[len(h2Preface):]
	for {
		in := rd.in
		c.r.now()
		c.out = c.out[:0]
		for len(in) >= 9 {
			n := int(in[0])<<16 | int(in[1])<<8 | int(in[2])
			if n > maxFrame {
				return errors.New("frame too large")
			}
			if len(in) < 9+n {
				break
			}
			kind, flags := in[3], in[4]
			stream := binary.BigEndian.Uint32(in[5:9]) & 0x7fffffff
			p := in[9 : 9+n]
			if kind == frameData || kind == frameHeaders {
				if flags&flagPadded != 0 && len(p) > 0 {
					if int(p[0]) >= len(p) {
						return errors.New("bad padding")
					}
					p = p[1 : len(p)-int(p[0])]
				}
				if kind == frameHeaders && flags&flagPriority != 0 && len(p) >= 5 {
					p = p[5:]
				}
			}
			if err := c.frame(kind, flags, stream, p, n); err != nil {
				return err
			}
			in = in[9+n:]
		}
		if len(c.out) > 0 {
			if _, err := conn.Write(c.out); err != nil {
				return err
			}
		}
		rd.in = in
		if err := rd.more(); err != nil {
			return err
		}
	}
}
