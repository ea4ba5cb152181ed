package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/impair"
	"golang.org/x/sys/unix"
)

// tunPath is W6's bottleneck for any IP traffic: namespace a (the
// clients, 10.77.0.1) and namespace b (the server, 10.77.0.2), each with a
// TUN device whose peer is the other's address; this process reads the IP
// packets each side sends and writes them to the other side's device,
// through an impair.Queue (counting whole IP packets) and half the round
// trip of delay, in each direction.
type tunPath struct {
	ip       string // the ip command
	ns       [2]string
	dev      [2]string
	files    [2]*os.File
	serverIP string
	up, down *impair.Queue
	delay    time.Duration
	wg       sync.WaitGroup
	once     sync.Once
}

func newTunPath(ctx context.Context, l w6Link) (*tunPath, error) {
	if os.Geteuid() != 0 {
		return nil, &skipError{"the tun path needs root, for network namespaces and TUN devices"}
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/ip"); serr != nil {
			return nil, &skipError{"the tun path needs the ip command (iproute2)"}
		}
		ip = "/usr/sbin/ip"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return nil, &skipError{"the tun path needs /dev/net/tun"}
	}
	pid := os.Getpid()
	p := &tunPath{
		ip:       ip,
		ns:       [2]string{fmt.Sprintf("fnbench-%d-a", pid), fmt.Sprintf("fnbench-%d-b", pid)},
		dev:      [2]string{fmt.Sprintf("fnb%da", pid%1000000), fmt.Sprintf("fnb%db", pid%1000000)},
		serverIP: "10.77.0.2",
		delay:    l.RTT / 2,
	}
	if p.up, err = impair.NewQueue(l.Rate, l.Queue); err != nil {
		return nil, err
	}
	if p.down, err = impair.NewQueue(l.Rate, l.Queue); err != nil {
		return nil, err
	}
	for _, ns := range p.ns {
		if out, err := exec.CommandContext(ctx, ip, "netns", "add", ns).CombinedOutput(); err != nil {
			p.close()
			return nil, &skipError{fmt.Sprintf("cannot make a network namespace: %v: %s", err, strings.TrimSpace(string(out)))}
		}
	}
	addrs := [2][2]string{{"10.77.0.1", "10.77.0.2"}, {"10.77.0.2", "10.77.0.1"}}
	for i := range 2 {
		f, err := openTun(p.ns[i], p.dev[i])
		if err != nil {
			p.close()
			return nil, &skipError{fmt.Sprintf("cannot open a TUN device in a namespace: %v", err)}
		}
		p.files[i] = f
		for _, args := range [][]string{
			{"link", "set", "lo", "up"},
			{"addr", "add", addrs[i][0], "peer", addrs[i][1], "dev", p.dev[i]},
			{"link", "set", p.dev[i], "txqueuelen", "10000", "up"},
		} {
			argv := append([]string{"netns", "exec", p.ns[i], ip}, args...)
			if out, err := exec.CommandContext(ctx, ip, argv...).CombinedOutput(); err != nil {
				p.close()
				return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
			}
		}
	}
	p.forward(p.files[0], p.files[1], p.up)
	p.forward(p.files[1], p.files[0], p.down)
	return p, nil
}

// openTun opens a TUN device named name in the network namespace ns, on a
// thread of its own that ends in that namespace.
func openTun(ns, name string) (*os.File, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result)
	go func() {
		// The thread stays locked, so that it ends with the goroutine
		// rather than serve others in the wrong namespace.
		runtime.LockOSThread()
		nsf, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			done <- result{-1, err}
			return
		}
		defer nsf.Close()
		if err := unix.Setns(int(nsf.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{-1, fmt.Errorf("setns: %w", err)}
			return
		}
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			done <- result{-1, err}
			return
		}
		ifr, err := unix.NewIfreq(name)
		if err == nil {
			ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
			err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
		}
		if err != nil {
			unix.Close(fd)
			done <- result{-1, fmt.Errorf("TUNSETIFF: %w", err)}
			return
		}
		done <- result{fd, nil}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	return os.NewFile(uintptr(r.fd), name), nil
}

// delayedPacket is a packet on its way to the other side.
type delayedPacket struct {
	at time.Time
	b  []byte
}

// forward moves packets from one device to the other through q and the
// delay. The queue is FIFO and the delay constant, so the packets leave
// in order, and a channel is the delay line.
func (p *tunPath) forward(from, to *os.File, q *impair.Queue) {
	line := make(chan delayedPacket, 1<<16)
	p.wg.Go(func() {
		defer close(line)
		buf := make([]byte, 65536)
		for {
			n, err := from.Read(buf)
			if err != nil {
				if errors.Is(err, os.ErrClosed) {
					return
				}
				time.Sleep(time.Millisecond) // not to spin on an error that stays
				continue
			}
			leave, ok := q.Enqueue(time.Now(), n)
			if !ok {
				continue
			}
			select {
			case line <- delayedPacket{leave.Add(p.delay), append([]byte(nil), buf[:n]...)}:
			default: // more than 65,536 packets on their way: lost
			}
		}
	})
	p.wg.Go(func() {
		for d := range line {
			if wait := time.Until(d.at); wait > 50*time.Microsecond {
				time.Sleep(wait)
			}
			to.Write(d.b) // a failed write is a lost packet
		}
	})
}

// exec returns the command prefix that runs a program on side "a" (the
// clients) or "b" (the server).
func (p *tunPath) exec(side string) []string {
	i := 0
	if side == "b" {
		i = 1
	}
	return []string{p.ip, "netns", "exec", p.ns[i]}
}

// dropsBefore returns the packets the clients' device dropped before this
// process read them.
func (p *tunPath) dropsBefore() uint64 {
	out, err := exec.Command(p.ip, "netns", "exec", p.ns[0], "cat", "/sys/class/net/"+p.dev[0]+"/statistics/tx_dropped").Output()
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	return v
}

// close stops the forwarding and removes the namespaces, with their
// devices.
func (p *tunPath) close() {
	p.once.Do(func() {
		for _, f := range p.files {
			if f != nil {
				f.Close()
			}
		}
		p.wg.Wait()
		for _, ns := range p.ns {
			exec.Command(p.ip, "netns", "del", ns).Run()
		}
	})
}

// setCongestion makes the TCP socket fd use the congestion control cc.
func setCongestion(fd uintptr, cc string) error {
	return unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
}

// tcpRTT returns the smoothed RTT of the TCP socket fd, or 0.
func tcpRTT(fd uintptr) time.Duration {
	ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0
	}
	return time.Duration(ti.Rtt) * time.Microsecond
}
