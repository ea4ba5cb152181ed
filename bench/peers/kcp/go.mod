module github.com/fastnet-engine/fastnet/bench/peers/kcp

go 1.26.2

replace github.com/fastnet-engine/fastnet/bench/peers/peerkit => ../peerkit

require (
	github.com/fastnet-engine/fastnet/bench/peers/peerkit v0.0.0-00010101000000-000000000000
	github.com/xtaci/kcp-go/v5 v5.7.5
)

require (
	github.com/juju/ratelimit v1.0.2 // indirect
	github.com/klauspost/cpuid/v2 v2.4.1 // indirect
	github.com/klauspost/reedsolomon v1.14.2 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/pion/transport/v5 v5.1.4 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/tjfoc/gmsm v1.4.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
