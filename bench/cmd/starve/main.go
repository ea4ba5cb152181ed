// Command starve measures the UDP driver on a process starved of
// processor time: an echo server whose own goroutines keep every
// processor busy (a game server at full load), in a process of its own,
// and a client in this one that sends a timestamped 64-byte reliable
// message every -every for -d and reports the echoes' latency
// percentiles and the packets each side resent; with -clients, that
// many connections each send at that rate. It is how N130
// (docs/protocol.md) was measured: build it at two revisions (at one
// from before it, with this directory copied into that checkout's
// bench/cmd) and run the builds in turn,
//
//	go build -o starve-a ./cmd/starve    # in bench/, at each revision
//	for r in 1 2 3 4 5 6; do ./starve-a -busy 16; ./starve-b -busy 16; done
//
// and compare the medians of each column.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// serverEnv, set in the environment of the process the client starts
// (the same executable), makes it the server: "busy,clients".
const serverEnv = "FASTNET_STARVE_SERVER"

func main() {
	if serverMain() {
		return
	}
	busy := flag.Int("busy", 16, "busy goroutines in the server")
	clients := flag.Int("clients", 1, "connections, each sending every -every")
	dur := flag.Duration("d", 6*time.Second, "how long the client sends")
	every := flag.Duration("every", time.Millisecond, "the client's interval between messages")
	flag.Parse()
	if err := run(os.Stdout, *busy, *clients, *dur, *every); err != nil {
		log.Fatal(err)
	}
}

// serverMain runs the server and reports true if this process is one.
func serverMain() bool {
	spec, ok := os.LookupEnv(serverEnv)
	if !ok {
		return false
	}
	var busy, clients int
	if _, err := fmt.Sscanf(spec, "%d,%d", &busy, &clients); err != nil {
		log.Fatalf("%s=%q: %v", serverEnv, spec, err)
	}
	serve(busy, clients)
	return true
}

// serve echoes every message of each connection until the client asks
// for the resends (a message of one byte on each connection): once all
// have asked, it reports the resends of all on standard output, replies
// on each, and closes the connections.
func serve(busy, clients int) {
	ctx := context.Background()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("addr", l.Addr())
	for range busy {
		go func() {
			for x := 0; ; x++ {
				if x%1_000_000 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	asked := make(chan *udpdriver.Conn)
	for range clients {
		c, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			for {
				m, err := c.Receive(ctx)
				if err != nil {
					log.Fatal(err)
				}
				if len(m.Data) == 1 {
					asked <- c
					return
				}
				if err := c.Send(ctx, m.Channel, m.Data, m.Reliable); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	var conns []*udpdriver.Conn
	var resent uint64
	for range clients {
		c := <-asked
		conns = append(conns, c)
		resent += c.Stats().PacketsResent
	}
	fmt.Println("resent", resent)
	for _, c := range conns {
		c.Send(ctx, 0, []byte{1}, true)
	}
	for _, c := range conns {
		c.Close() // graceful: the reply is acked, or Linger ends it
	}
	l.Close()
}

// run starts the server and runs the clients against it, writing the
// report to w.
func run(w io.Writer, busy, clients int, dur, every time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", serverEnv, busy, clients))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		return fmt.Errorf("server: no address")
	}
	addr := strings.TrimPrefix(lines.Text(), "addr ")
	if _, err := net.ResolveUDPAddr("udp", addr); err != nil {
		return fmt.Errorf("server: %q: %v", lines.Text(), err)
	}
	ctx := context.Background()
	conns := make([]*udpdriver.Conn, clients)
	for i := range conns {
		c, err := udpdriver.Dial(ctx, addr, udpdriver.Config{})
		if err != nil {
			return err
		}
		defer c.Close()
		conns[i] = c
	}
	rtts := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := c.Receive(ctx)
				if err != nil || len(m.Data) == 1 {
					return
				}
				sent := int64(binary.LittleEndian.Uint64(m.Data))
				rtts[i] = append(rtts[i], time.Duration(time.Now().UnixNano()-sent))
			}
		}()
	}
	buf := make([]byte, 64)
	tick := time.NewTicker(every)
	defer tick.Stop()
	sent := 0
	for end := time.Now().Add(dur); time.Now().Before(end); {
		<-tick.C
		for _, c := range conns {
			binary.LittleEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
			if err := c.Send(ctx, 1, buf, true); err != nil {
				return err
			}
			sent++
		}
	}
	time.Sleep(500 * time.Millisecond) // the last echoes
	for _, c := range conns {
		if err := c.Send(ctx, 0, []byte{0}, true); err != nil {
			return err
		}
	}
	serverResent := "?"
	if lines.Scan() {
		serverResent = strings.TrimPrefix(lines.Text(), "resent ")
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("no reply to the request for the server's resends")
	}
	var all []time.Duration
	var clientResent uint64
	for i, c := range conns {
		all = append(all, rtts[i]...)
		clientResent += c.Stats().PacketsResent
	}
	slices.Sort(all)
	q := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))].Round(10 * time.Microsecond)
	}
	fmt.Fprintf(w, "sent %d echoed %d p50 %v p99 %v p99.9 %v; resent: clients %d server %s\n",
		sent, len(all), q(.5), q(.99), q(.999), clientResent, serverResent)
	return nil
}
