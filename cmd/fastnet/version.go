package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/fastnet-engine/fastnet/fastnet"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version of this program and of the protocol",
		usage:   "version",
		details: `
Prints the module's version, the version-control revision the program was
built from (and whether the checkout had changes not committed), the Go
version that built it, and the protocol version it speaks:

	fastnet v0.0.0-20261125200033-785119ea92db+dirty
	module:   github.com/fastnet-engine/fastnet v0.0.0-20261125200033-785119ea92db+dirty
	revision: 785119ea92db 2026-11-25T20:00:33Z (modified)
	go:       go1.26.8 linux/amd64
	protocol: Fastnet 1.0

"go build" and "go install" in a checkout record the revision, and a version
made from it; "go run" and "go test" do not, and neither does a build with
-buildvcs=false or outside a checkout: the version is then "(devel)" and the
revision line says it was not recorded. "go install ...@v1.2.3" records
v1.2.3.`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			return func(ctx context.Context, args []string, s *stdio) int {
				if len(args) > 0 {
					return usageError(s, "version", "unexpected argument %q", args[0])
				}
				bi, ok := debug.ReadBuildInfo()
				for _, l := range versionLines(bi, ok) {
					s.printf("%s", l)
				}
				return exitOK
			}
		},
	}
}

// versionLines describes the build bi (ok false: the binary carries no
// build information).
func versionLines(bi *debug.BuildInfo, ok bool) []string {
	if !ok || bi == nil {
		return []string{
			"fastnet (unknown version: the program carries no build information)",
			fmt.Sprintf("go:       %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH),
			"protocol: Fastnet " + fastnet.Version,
		}
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	switch {
	case rev == "":
		rev = "not recorded (built by go run or go test, with -buildvcs=false, or outside a checkout)"
	default:
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if t := settings["vcs.time"]; t != "" {
			rev += " " + t
		}
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	if goos == "" || goarch == "" {
		goos, goarch = runtime.GOOS, runtime.GOARCH
	}
	goVersion := bi.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	path := bi.Main.Path
	if path == "" {
		path = "github.com/fastnet-engine/fastnet"
	}
	return []string{
		"fastnet " + version,
		fmt.Sprintf("module:   %s %s", path, version),
		"revision: " + rev,
		fmt.Sprintf("go:       %s %s/%s", goVersion, goos, goarch),
		"protocol: Fastnet " + fastnet.Version,
	}
}
