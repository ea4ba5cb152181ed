module github.com/fastnet-engine/fastnet/bench/peers/peerkit

go 1.26.0
