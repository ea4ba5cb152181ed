package fuzz

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// messageSeeds are golden message encodings (D2, D3) and near misses.
var messageSeeds = []string{
	"0000",                    // empty, unreliable
	"0100",                    // empty, reliable
	"0101017f",                // one byte
	"000361626339b979",        // "abc", short checksum
	"400003616263 39b979",     // non-shortest length field
	"c000000003616263 39b979", // 4-byte length field
	"3f03616263 39b979",       // reserved bits set
	"010f000102030405060708090a0b0c0d0e 8f4fcf2faf6fef1f9f5fdf3fbf7fff",     // 15 bytes
	"0010000102030405060708090a0b0c0d0e0f 1ac1ef01e96caf1be0d329331a4fc2a8", // 16 bytes, MD5
	"000361626339b978",   // bad checksum
	"000361626339b97900", // trailing byte
	"c0ffffffff",         // huge claim
	"8000",               // cut length field
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzParseMessage parses arbitrary bytes as one encoded message. A valid
// message must re-encode to the same payload and reliability, byte for byte
// when the input was in the encoder's canonical form (shortest length,
// reserved bits clear, D2), and its EncodedLen must match; an invalid one
// must fail with one of the package's sentinels, agreeing with ParseHeader.
func FuzzParseMessage(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add(unhex(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxLen = 1 << 16
		h, herr := coalesce.ParseHeader(b, maxLen)
		m, err := coalesce.ParseMessage(b, maxLen)
		if herr != nil {
			if !errors.Is(err, herr) {
				t.Fatalf("ParseHeader: %v, but ParseMessage: %v", herr, err)
			}
			if herr != coalesce.ErrShort && herr != coalesce.ErrTooLarge {
				t.Fatalf("ParseHeader: unexpected error %v", herr)
			}
			return
		}
		if h.HeaderLen < 2 || h.HeaderLen > coalesce.MaxHeaderLen || h.Len < 0 || h.Len > maxLen {
			t.Fatalf("ParseHeader = %+v", h)
		}
		if err != nil {
			switch {
			case err == coalesce.ErrShort && len(b) < h.EncodedLen(),
				err == coalesce.ErrTrailing && len(b) > h.EncodedLen(),
				err == coalesce.ErrChecksum && len(b) == h.EncodedLen():
			default:
				t.Fatalf("ParseMessage: %v for %d bytes, header %+v (EncodedLen %d)", err, len(b), h, h.EncodedLen())
			}
			return
		}
		if len(b) != h.EncodedLen() || len(m.Payload) != h.Len || m.Reliable != h.Reliable {
			t.Fatalf("message %d bytes, payload %d, header %+v", len(b), len(m.Payload), h)
		}
		re := coalesce.AppendMessage(nil, m.Payload, m.Reliable)
		if len(re) != coalesce.EncodedLen(len(m.Payload)) {
			t.Fatalf("EncodedLen %d, AppendMessage wrote %d", coalesce.EncodedLen(len(m.Payload)), len(re))
		}
		canonical := b[0]&0x3e == 0 && len(re) == len(b)
		if canonical != bytes.Equal(re, b) {
			t.Fatalf("re-encoding %x of %x (canonical %v)", re, b, canonical)
		}
		m2, err := coalesce.ParseMessage(re, maxLen)
		if err != nil || m2.Reliable != m.Reliable || !bytes.Equal(m2.Payload, m.Payload) {
			t.Fatalf("re-encoding does not parse back: %v", err)
		}
		if !coalesce.VerifyChecksum(m.Payload, coalesce.AppendChecksum(nil, m.Payload)) {
			t.Fatal("VerifyChecksum rejects AppendChecksum")
		}
	})
}
