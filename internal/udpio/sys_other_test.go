//go:build !linux

package udpio

// segmentOf reads back the segment size putSegmentCmsg wrote: nothing
// here, where writes are never offloaded.
func segmentOf([]byte) int { return 0 }
