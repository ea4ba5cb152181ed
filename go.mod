module github.com/fastnet-engine/fastnet

go 1.26
