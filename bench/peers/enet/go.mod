module github.com/fastnet-engine/fastnet/bench/peers/enet

go 1.26.0

replace github.com/fastnet-engine/fastnet/bench/peers/peerkit => ../peerkit

require github.com/fastnet-engine/fastnet/bench/peers/peerkit v0.0.0-00010101000000-000000000000
