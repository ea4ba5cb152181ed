package coalesce

import (
	"bytes"
	"crypto/md5"
	"testing"
)

// A deferred encoding, once its checksum is filled, is the encoding of
// AppendMessage, whether filled alone or in batches of any size (D3,
// N86); short checksums are never deferred.
func TestDeferredChecksums(t *testing.T) {
	var msgs, want [][]byte
	for n := 0; n < 300; n += 7 {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(n*31 + i)
		}
		msgs = append(msgs, p)
		want = append(want, AppendMessage(nil, p, n%2 == 0))
	}
	for _, batch := range []int{1, 2, 5, 16, 33, len(msgs)} {
		encs := make([][]byte, len(msgs))
		for i, p := range msgs {
			enc, deferred := AppendMessageDeferred(nil, p, len(p)%2 == 0)
			if deferred != (len(p) > ShortChecksumMax) {
				t.Fatalf("%d bytes: deferred %v", len(p), deferred)
			}
			if len(enc) != len(want[i]) {
				t.Fatalf("%d bytes: %d encoded, want %d", len(p), len(enc), len(want[i]))
			}
			encs[i] = enc
		}
		for i := 0; i < len(encs); i += batch {
			FillChecksums(encs[i:min(i+batch, len(encs))])
		}
		for i := range encs {
			if !bytes.Equal(encs[i], want[i]) {
				t.Fatalf("batch %d, %d bytes: %x, want %x", batch, len(msgs[i]), encs[i], want[i])
			}
		}
	}
}

// PutMessageDeferred writes what AppendMessageDeferred appends, into a
// buffer of EncodedLen bytes whatever it held, but for the place of a
// deferred checksum, which it leaves as it was; once filled, the
// encoding is AppendMessage's (N128), for length fields of 1 to 4
// bytes. A buffer shorter than EncodedLen panics rather than be written
// past.
func TestPutMessageDeferred(t *testing.T) {
	lengths := []int{0, 1, ShortChecksumMax, ShortChecksumMax + 1, 64, 0xff, 0x100, 1024, 4096, 0xffff, 0x10000, 70000, 0xffffff, 0x1000000}
	for _, n := range lengths {
		for _, reliable := range []bool{false, true} {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(n*7 + i)
			}
			want, wantDeferred := AppendMessageDeferred(nil, p, reliable)
			enc := bytes.Repeat([]byte{0xa5}, EncodedLen(n))
			deferred := PutMessageDeferred(enc, p, reliable)
			if deferred != wantDeferred {
				t.Fatalf("%d bytes, reliable %v: deferred %v, want %v", n, reliable, deferred, wantDeferred)
			}
			end := len(want)
			if deferred {
				end -= MD5Len
				if !bytes.Equal(enc[end:], bytes.Repeat([]byte{0xa5}, MD5Len)) {
					t.Errorf("%d bytes: the checksum's place was written: %x", n, enc[end:])
				}
			}
			if !bytes.Equal(enc[:end], want[:end]) {
				t.Fatalf("%d bytes, reliable %v: %x, want %x", n, reliable, enc[:min(end, 40)], want[:min(end, 40)])
			}
			FillChecksum(enc)
			if full := AppendMessage(nil, p, reliable); !bytes.Equal(enc, full) {
				t.Fatalf("%d bytes, reliable %v: filled, not AppendMessage's encoding", n, reliable)
			}
			if n > 0 {
				func() {
					defer func() {
						if recover() == nil {
							t.Errorf("%d bytes into %d: no panic", n, EncodedLen(n)-1)
						}
					}()
					PutMessageDeferred(make([]byte, EncodedLen(n)-1), p, reliable)
				}()
			}
		}
	}
}

// FillChecksums leaves alone what is not one message with a deferred
// checksum: a truncated encoding, one with bytes after it.
func TestFillChecksumsLeavesOthers(t *testing.T) {
	p := bytes.Repeat([]byte{7}, 40)
	enc, _ := AppendMessageDeferred(nil, p, true)
	short := bytes.Clone(enc[:len(enc)-1])
	long := append(bytes.Clone(enc), 0)
	FillChecksums([][]byte{short, long})
	FillChecksum(short)
	if !bytes.Equal(short, enc[:len(enc)-1]) || !bytes.Equal(long[:len(enc)], enc) {
		t.Error("a malformed encoding was changed")
	}
}

// VerifyChecksumWith takes a digest from Presums only for the very slice
// it was set for, and still compares it with the checksum: a wrong digest
// or a wrong checksum fails, another slice of the same bytes is verified
// on its own, and nothing is used after Clear.
func TestPresums(t *testing.T) {
	payload := bytes.Repeat([]byte("fastnet!"), 8)
	sum := md5.Sum(payload)
	copyOf := bytes.Clone(payload)
	var ps Presums
	ps.Set(payload, sum)
	if !VerifyChecksumWith(&ps, payload, sum[:]) {
		t.Error("right digest, right sum: refused")
	}
	bad := sum
	bad[0] ^= 1
	if VerifyChecksumWith(&ps, payload, bad[:]) {
		t.Error("a wrong checksum passed")
	}
	ps.Set(payload, bad) // a wrong digest
	if VerifyChecksumWith(&ps, payload, sum[:]) {
		t.Error("a wrong digest was not noticed")
	}
	if !VerifyChecksumWith(&ps, copyOf, sum[:]) {
		t.Error("another slice took the digest set for the first")
	}
	if !VerifyChecksumWith(&ps, payload[:len(payload)-1], AppendChecksum(nil, payload[:len(payload)-1])) {
		t.Error("a shorter slice at the same place took the digest")
	}
	ps.Clear()
	if !VerifyChecksumWith(&ps, payload, sum[:]) {
		t.Error("after Clear: refused")
	}
	if !VerifyChecksumWith(nil, payload, sum[:]) {
		t.Error("nil Presums: refused")
	}
	enc := AppendMessage(nil, payload, true)
	ps.Set(enc[2:2+len(payload)], bad)
	if _, err := ParseMessageWith(&ps, enc, 1<<20); err != ErrChecksum {
		t.Errorf("ParseMessageWith with a wrong digest: %v, want ErrChecksum", err)
	}
	ps.Clear()
	if m, err := ParseMessageWith(&ps, enc, 1<<20); err != nil || !bytes.Equal(m.Payload, payload) {
		t.Errorf("ParseMessageWith: %v", err)
	}
}

func TestDeferredAllocs(t *testing.T) {
	p := make([]byte, 64)
	buf := make([]byte, 0, 128)
	encs := make([][]byte, 20)
	for i := range encs {
		encs[i], _ = AppendMessageDeferred(make([]byte, 0, 128), p, true)
	}
	n := testing.AllocsPerRun(100, func() {
		AppendMessageDeferred(buf[:0], p, true)
		FillChecksums(encs)
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}
