// Package fuzz holds the project's go test -fuzz targets: every wire parser
// (messages, channel headers, acks, channel -1 literals, heartbeats, TCP
// framing), the receive queue driven by operations encoded as bytes, and
// whole endpoints fed arbitrary datagram sequences, or batches of them
// (FuzzBatch: one endpoint given them in one HandleDatagrams call, its
// twin one at a time, must answer alike, and FuzzStreamBatch the same on a
// Stream transport, N121; FuzzReuse: one endpoint lending
// its messages' buffers, N103, its twin giving them, must answer alike,
// and a lent buffer must hold until its next input). Each target checks more than
// "no panic": parsed values re-encode to their input, and memory stays
// within the configured limits.
//
// Seeds live in testdata/fuzz/<Target>/ and in f.Add calls built from the
// golden vectors. Run one target with
//
//	go test -run '^$' -fuzz '^FuzzEndpoint$' -fuzztime 30s ./fuzz
package fuzz
