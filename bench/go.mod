module github.com/fastnet-engine/fastnet/bench

go 1.26.0

require (
	github.com/fastnet-engine/fastnet v0.0.0-00010101000000-000000000000
	golang.org/x/net v0.62.0
)

require golang.org/x/sys v0.49.0

replace github.com/fastnet-engine/fastnet => ../
