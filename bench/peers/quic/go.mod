module github.com/fastnet-engine/fastnet/bench/peers/quic

go 1.26.0

replace github.com/fastnet-engine/fastnet/bench/peers/peerkit => ../peerkit

require (
	github.com/fastnet-engine/fastnet/bench/peers/peerkit v0.0.0-00010101000000-000000000000
	github.com/quic-go/quic-go v0.65.0
)

require (
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
