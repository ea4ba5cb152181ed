package datagram

import (
	"slices"
	"testing"
)

func TestDatagrams(t *testing.T) {
	tests := []struct {
		name string
		n    int
		seg  int
		want []int // lengths of the pieces
	}{
		{"single", 10, 0, []int{10}},
		{"empty", 0, 0, []int{0}},
		{"seg equals length", 10, 10, []int{10}},
		{"seg above length", 10, 20, []int{10}},
		{"even pieces", 12, 4, []int{4, 4, 4}},
		{"short last piece", 10, 4, []int{4, 4, 2}},
		{"negative seg", 7, -1, []int{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]byte, 32)
			for i := range buf {
				buf[i] = byte(i)
			}
			m := Message{Buf: buf, N: tt.n, Seg: tt.seg}
			var got []int
			off := 0
			for d := range m.Datagrams() {
				got = append(got, len(d))
				if cap(d) != len(d) {
					t.Errorf("piece %d has capacity %d beyond its length %d", len(got), cap(d), len(d))
				}
				if len(d) > 0 && d[0] != byte(off) {
					t.Errorf("piece %d starts with byte %d, want %d", len(got), d[0], off)
				}
				off += len(d)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("pieces %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDatagramsStop(t *testing.T) {
	m := Message{Buf: make([]byte, 12), N: 12, Seg: 4}
	n := 0
	for range m.Datagrams() {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d pieces after break, want 1", n)
	}
}
