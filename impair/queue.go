package impair

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// A Queue is the bottleneck of one direction of a path: a first-in,
// first-out queue that sends at a fixed rate and drops at its tail what
// would make the bytes waiting pass a limit. It holds no packets: it
// computes when each one it takes will have been sent, for the caller to
// deliver it then (plus any propagation delay). The relay has one per
// direction with a Config.Rate; a program that moves packets of its own
// (IP packets between two TUN devices, say) can shape them with one
// exactly as the relay does. Its methods are safe for concurrent use.
type Queue struct {
	mu    sync.Mutex
	rate  int64 // bytes a second
	limit int64 // bytes
	busy  time.Time
	qs    QueueStats
	hist  []uint64 // queueing delays by delayBucket
}

// QueueStats counts what a Queue did. Bytes are as the sizes given to
// Enqueue (for the relay: headers included, see the package
// documentation). Queued + Dropped is every packet offered.
type QueueStats struct {
	Queued       uint64 // packets that took their place in the queue
	QueuedBytes  uint64
	Dropped      uint64 // packets dropped because the queue was full
	DroppedBytes uint64
	// MaxBytes is the most bytes that were waiting at once, the
	// packet being sent included.
	MaxBytes int
	// DelayP50 and DelayP99 are the median and 99th percentile of the
	// time queued packets spent waiting and being sent, to a tenth of a
	// millisecond; DelayMax is the longest.
	DelayP50, DelayP99, DelayMax time.Duration
}

// delayBucket is the width of a bucket of the queueing delay histogram.
const delayBucket = 100 * time.Microsecond

// NewQueue returns an empty queue that sends rate bytes a second, 1 to
// MaxRate, and holds at most limit bytes, 1 to MaxQueue.
func NewQueue(rate int64, limit int) (*Queue, error) {
	if rate < 1 || rate > MaxRate {
		return nil, fmt.Errorf("impair: queue rate %d: want 1 to %d bytes a second", rate, int64(MaxRate))
	}
	if limit < 1 || limit > MaxQueue {
		return nil, fmt.Errorf("impair: queue limit %d: want 1 to %d bytes", limit, MaxQueue)
	}
	return newQueue(rate, limit), nil
}

func newQueue(rate int64, limit int) *Queue {
	// The longest wait is the queue and one more packet of up to 64 KiB.
	longest := float64(int64(limit)+bufSize) / float64(rate) * float64(time.Second)
	return &Queue{
		rate:  rate,
		limit: int64(limit),
		hist:  make([]uint64, min(int(longest/float64(delayBucket))+2, 1<<20)),
	}
}

// Enqueue offers a packet of size bytes at now, and returns when it will
// have been sent, or false if it is dropped: the bytes still waiting (the
// packet being sent included) plus size would pass the limit, and the
// queue is not empty. Calls must come with times that do not go back.
func (q *Queue) Enqueue(now time.Time, size int) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	start := now
	var waiting int64
	if q.busy.After(now) {
		start = q.busy
		// The bytes not yet sent, the one being sent included.
		waiting = (int64(q.busy.Sub(now))*q.rate + int64(time.Second) - 1) / int64(time.Second)
	}
	if waiting > 0 && waiting+int64(size) > q.limit {
		q.qs.Dropped++
		q.qs.DroppedBytes += uint64(size)
		return time.Time{}, false
	}
	q.busy = start.Add(time.Duration((int64(size)*int64(time.Second) + q.rate - 1) / q.rate))
	q.qs.Queued++
	q.qs.QueuedBytes += uint64(size)
	q.qs.MaxBytes = max(q.qs.MaxBytes, int(waiting)+size)
	wait := q.busy.Sub(now)
	q.qs.DelayMax = max(q.qs.DelayMax, wait)
	q.hist[min(int(wait/delayBucket), len(q.hist)-1)]++
	return q.busy, true
}

// Stats returns what the queue did so far.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.qs
	s.DelayP50 = q.quantile(0.5)
	s.DelayP99 = q.quantile(0.99)
	return s
}

// quantile returns the p-quantile of the queueing delays, the upper edge
// of its bucket, at most DelayMax.
func (q *Queue) quantile(p float64) time.Duration {
	if q.qs.Queued == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p * float64(q.qs.Queued)))
	var seen uint64
	for i, c := range q.hist {
		seen += c
		if seen >= rank {
			return min(time.Duration(i+1)*delayBucket, q.qs.DelayMax)
		}
	}
	return q.qs.DelayMax
}
