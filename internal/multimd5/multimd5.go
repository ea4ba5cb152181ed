// Package multimd5 computes the MD5 digests of many independent messages
// at once. The checksum of D3 is an MD5 digest per message; MD5 is a chain
// of dependent steps, so one message at a time leaves most of a processor's
// arithmetic idle. Where the processor has AVX-512 or AVX2, Sums runs
// sixteen messages side by side, one in each 32-bit lane of the vector
// registers (with AVX2 as two groups of eight whose steps interleave),
// for a few times what one message costs alone. Elsewhere, and for a
// single message, it is crypto/md5.
package multimd5

import (
	"crypto/md5"
	"encoding/binary"
)

// Size is the size of a digest in bytes.
const Size = md5.Size

// Lanes is the largest number of messages hashed side by side.
const Lanes = 16

// Vector reports whether Sums runs messages side by side on this machine.
func Vector() bool { return lanes > 1 }

// Sums sets dst[i] to the MD5 digest of msgs[i], for every i below
// len(msgs); dst must be at least as long as msgs. It allocates nothing.
func Sums(dst [][Size]byte, msgs [][]byte) {
	_ = dst[:len(msgs)]
	if lanes == 1 || len(msgs) < 2 {
		for i, m := range msgs {
			dst[i] = md5.Sum(m)
		}
		return
	}
	if nb, ok := equalBlocks(msgs); ok {
		if zmm {
			sumsEqual(dst, msgs, nb, nil)
		} else {
			var data [16][Lanes]uint32
			sumsEqual(dst, msgs, nb, &data)
		}
		return
	}
	var h hasher
	h.run(dst, msgs)
}

// The initial state of RFC 1321.
const (
	init0 = 0x67452301
	init1 = 0xefcdab89
	init2 = 0x98badcfe
	init3 = 0x10325476
)

// lane is what one lane is hashing: message msg, of nblocks blocks in all
// with the padding, of which next is the one to hash next.
type lane struct {
	msg     int // index in msgs; -1: idle
	next    int
	nblocks int
	full    int // blocks taken from the message as they are
	tail    [2 * 64]byte
}

// hasher keeps the lanes' states, in the layout the kernels take: word w
// of lane l at state[w][l]; block8 and block16y transpose the blocks into
// data.
type hasher struct {
	state [4][Lanes]uint32
	data  [16][Lanes]uint32 // block8's and block16y's
	lanes [Lanes]lane
}

// The kernels, as hash tells onHash which one it runs.
const (
	kernel8   = iota // block8, AVX2, lanes 0-7
	kernel16y        // block16y, AVX2
	kernel16         // block16, AVX-512
)

// narrow is the most messages for which block8, half as wide as
// block16y, runs in its place: on 8 messages of 64 bytes Sums took 1.6x
// its time with block16y, whose idle lanes cost as much as busy ones, and
// on 12 0.80-0.86x. It is at most 8, block8's lanes: sumsEqual gives
// block8 a whole group of up to narrow messages (the guard below fails
// to compile otherwise).
const narrow = 8

const _ = uint(Lanes/2 - narrow)

// width returns how many lanes hash uses for n messages: 8 where block8
// runs (narrow), else 16.
func width(n int) int {
	if !zmm && n <= narrow {
		return 8
	}
	return Lanes
}

// hash hashes one block in each of the first w lanes (width), lane l's at
// blocks[l]: block16 with AVX-512; with AVX2 block16y, or block8 with w
// 8; block8 and block16y transpose the blocks into data.
func hash(w int, state *[4][Lanes]uint32, blocks *[Lanes]*byte, data *[16][Lanes]uint32) {
	switch {
	case zmm:
		if onHash != nil {
			onHash(kernel16)
		}
		block16(state, blocks)
	case w == Lanes:
		if onHash != nil {
			onHash(kernel16y)
		}
		block16y(state, blocks, data)
	default:
		if onHash != nil {
			onHash(kernel8)
		}
		block8(state, blocks, data)
	}
}

// onHash, if set, is told which kernel each call of hash runs: a test's
// way to see that the AVX2 kernels run where they should, on a processor
// where block16, which gives the same digests, would run too. Set only by
// tests.
var onHash func(kernel int)

// idleBlock is what an idle lane hashes. It is only read.
var idleBlock [64]byte

func (h *hasher) run(dst [][Size]byte, msgs [][]byte) {
	w := width(len(msgs))
	nextMsg := 0
	// The kernels' blocks: kept apart from h, which they may point
	// into, so that h stays on the stack.
	var blocks [Lanes]*byte
	for l := range h.lanes[:w] {
		h.lanes[l].msg = -1
	}
	for {
		active := 0
		for l := range h.lanes[:w] {
			ln := &h.lanes[l]
			if ln.msg < 0 && nextMsg < len(msgs) {
				h.start(l, nextMsg, msgs[nextMsg])
				nextMsg++
			}
			if ln.msg < 0 {
				blocks[l] = &idleBlock[0]
				continue
			}
			active++
			blocks[l] = &ln.block(msgs[ln.msg])[0]
		}
		if active == 0 {
			return
		}
		hash(w, &h.state, &blocks, &h.data)
		for l := range h.lanes[:w] {
			ln := &h.lanes[l]
			if ln.msg < 0 {
				continue
			}
			ln.next++
			if ln.next == ln.nblocks {
				d := &dst[ln.msg]
				for w := 0; w < 4; w++ {
					binary.LittleEndian.PutUint32(d[4*w:], h.state[w][l])
				}
				ln.msg = -1
			}
		}
	}
}

// blocksOf returns the number of blocks MD5 hashes for a message of n
// bytes, its padding included.
func blocksOf(n int) int {
	if n%64 >= 56 {
		return n/64 + 2
	}
	return n/64 + 1
}

// equalBlocks reports whether every message of msgs hashes the same
// number of blocks, nb: the common case of a stream of messages of one
// size, which sumsEqual hashes in lockstep.
func equalBlocks(msgs [][]byte) (nb int, ok bool) {
	nb = blocksOf(len(msgs[0]))
	for _, m := range msgs[1:] {
		if blocksOf(len(m)) != nb {
			return 0, false
		}
	}
	return nb, true
}

// sumsEqual is Sums for messages that all hash nb blocks: 16 at a time in
// lockstep, with none of run's bookkeeping of lanes that finish at
// different blocks, nor its hasher, cleared at each call; data is
// block8's and block16y's scratch, nil for block16.
func sumsEqual(dst [][Size]byte, msgs [][]byte, nb int, data *[16][Lanes]uint32) {
	var (
		state  [4][Lanes]uint32
		blocks [Lanes]*byte
		full   [Lanes]int
		tails  [Lanes][2 * 64]byte
	)
	for g := 0; g < len(msgs); g += Lanes {
		group := msgs[g:min(g+Lanes, len(msgs))]
		w := width(len(group))
		state = initState
		for l, m := range group {
			full[l] = padTail(&tails[l], m)
		}
		for l := len(group); l < w; l++ {
			blocks[l] = &idleBlock[0]
		}
		for b := 0; b < nb; b++ {
			for l, m := range group {
				if f := full[l]; b < f {
					blocks[l] = &m[b*64]
				} else {
					blocks[l] = &tails[l][(b-f)*64]
				}
			}
			hash(w, &state, &blocks, data)
		}
		for l := range group {
			d := &dst[g+l]
			binary.LittleEndian.PutUint32(d[0:], state[0][l])
			binary.LittleEndian.PutUint32(d[4:], state[1][l])
			binary.LittleEndian.PutUint32(d[8:], state[2][l])
			binary.LittleEndian.PutUint32(d[12:], state[3][l])
		}
	}
}

// initState is every lane's state before its first block.
var initState = func() (s [4][Lanes]uint32) {
	for l := range Lanes {
		s[0][l], s[1][l], s[2][l], s[3][l] = init0, init1, init2, init3
	}
	return s
}()

// padTail writes to t the last block or two MD5 hashes for m, what is
// left of m after its whole blocks followed by the padding, and returns
// the number of whole blocks. Every byte of the blocks it returns is
// written, with whole-block stores where it can.
func padTail(t *[2 * 64]byte, m []byte) int {
	full := len(m) / 64
	rest := m[full*64:]
	bits := uint64(len(m)) << 3
	if len(rest) < 56 {
		b := (*[64]byte)(t[:64])
		*b = [64]byte{}
		copy(b[:], rest)
		b[len(rest)] = 0x80
		binary.LittleEndian.PutUint64(b[56:], bits)
	} else {
		*t = [2 * 64]byte{}
		copy(t[:], rest)
		t[len(rest)] = 0x80
		binary.LittleEndian.PutUint64(t[120:], bits)
	}
	return full
}

// start puts message i, m, in lane l.
func (h *hasher) start(l, i int, m []byte) {
	ln := &h.lanes[l]
	ln.msg, ln.next = i, 0
	ln.full = len(m) / 64
	rest := m[ln.full*64:]
	// The padding: 0x80, zeros, and the length in bits, little-endian, in
	// the last 8 bytes of the last block.
	tailLen := 64
	if len(rest) >= 56 {
		tailLen = 128
	}
	ln.nblocks = ln.full + tailLen/64
	t := ln.tail[:tailLen]
	n := copy(t, rest)
	t[n] = 0x80
	clear(t[n+1 : tailLen-8])
	binary.LittleEndian.PutUint64(t[tailLen-8:], uint64(len(m))<<3)
	h.state[0][l], h.state[1][l], h.state[2][l], h.state[3][l] = init0, init1, init2, init3
}

// block returns the 64 bytes the lane hashes next, m being its message.
func (ln *lane) block(m []byte) []byte {
	if ln.next < ln.full {
		return m[ln.next*64 : ln.next*64+64]
	}
	k := ln.next - ln.full
	return ln.tail[k*64 : k*64+64]
}
