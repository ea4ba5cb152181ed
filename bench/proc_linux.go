package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procStatus reads this process's resident memory (VmRSS of
// /proc/self/status) and the voluntary and involuntary context switches
// of all its threads (/proc/self/task/*/status); ok is false if it cannot.
func procStatus() (rss, voluntary, involuntary uint64, ok bool) {
	st, err := readStatus("/proc/self/status")
	if err != nil {
		return 0, 0, 0, false
	}
	rss, ok = st["VmRSS"]
	rss <<= 10 // kB
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, 0, 0, false
	}
	for _, t := range tasks {
		ts, err := readStatus("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		voluntary += ts["voluntary_ctxt_switches"]
		involuntary += ts["nonvoluntary_ctxt_switches"]
	}
	return rss, voluntary, involuntary, ok
}

// readStatus returns the numeric fields of a /proc status file, by name
// (the first number of each line).
func readStatus(file string) (map[string]uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	fields := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, _ := bytes.Cut(sc.Bytes(), []byte(":"))
		f := bytes.Fields(val)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(string(f[0]), 10, 64); err == nil {
			fields[string(key)] = n
		}
	}
	return fields, nil
}

// udpDrops returns the datagrams the kernel dropped at the UDP socket
// bound to port (the drops column of /proc/net/udp and udp6, summed); ok
// is false if no such socket was found.
func udpDrops(port uint16) (drops uint64, ok bool) {
	want := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // the header
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 13 || !strings.HasSuffix(f[1], want) {
				continue
			}
			n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
			if err != nil {
				continue
			}
			drops += n
			ok = true
		}
	}
	return drops, ok
}
