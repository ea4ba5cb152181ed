//go:build !linux

package main

// procStatus reports nothing: only Linux's /proc is read.
func procStatus() (rss, voluntary, involuntary uint64, ok bool) { return 0, 0, 0, false }

// udpDrops reports nothing: only Linux's /proc is read.
func udpDrops(port uint16) (drops uint64, ok bool) { return 0, false }
