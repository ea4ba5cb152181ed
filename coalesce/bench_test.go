package coalesce

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeVerify encodes and decodes one message per iteration: the
// cost of the message format alone, for comparison with the channel round
// trips (64 B uses MD5, as does 64 KiB; 15 B uses the short checksum).
func BenchmarkEncodeVerify(b *testing.B) {
	for _, n := range []int{15, 64, 1200, 64 << 10} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			payload := pattern(n)
			buf := make([]byte, 0, EncodedLen(n))
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendMessage(buf[:0], payload, true)
				if _, err := ParseMessage(buf, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
