module github.com/fastnet-engine/fastnet

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	golang.org/x/net v0.62.0
	pgregory.net/rapid v1.3.0
)

require golang.org/x/sys v0.49.0
