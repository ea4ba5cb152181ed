package main

import (
	"context"
	"flag"
	"net"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
	"github.com/fastnet-engine/fastnet/internal/usernat"
)

// defaultNATInside is where nat serves its inside without --inside.
const defaultNATInside = "127.0.0.1:7300"

// natTypes are nat's --type values, as the simulator's presets.
var natTypes = map[string]fastnettest.NATType{
	"full-cone":          fastnettest.FullCone,
	"address-restricted": fastnettest.AddressRestricted,
	"port-restricted":    fastnettest.PortRestricted,
	"symmetric":          fastnettest.Symmetric,
}

func natCommand() *command {
	return &command{
		name:    "nat",
		summary: "run a userspace NAT of a chosen type, for peers to try introductions and hole punching through",
		usage:   "nat --outside IP [--inside HOST:PORT] [--type TYPE] [--timeout D] [--hairpinning] [--first-port N]",
		details: `
Runs one NAT as a process of its own, with the behaviour of the simulator's
NAT models (docs/nat.md, X22): its mapping and filtering as --type says
(full-cone, address-restricted, port-restricted or symmetric, the presets of
package fastnettest), mappings that lapse --timeout after the last datagram
out refreshed them, and hairpinning with --hairpinning.

Its outside is the IP address --outside, an address of this host that only
the NAT uses (127.0.0.2 and up on a Linux loopback, say): each mapping is a
UDP socket bound on it, on a port from --first-port up, and what reaches
that port is passed in if the mapping's filter admits the sender. A
datagram from --outside itself is one hairpinned from inside.

Its inside is the UDP socket --inside (default ` + defaultNATInside + `), a gateway
rather than a network: each internal host is a UDP socket that sends to it,
and the NAT maps that socket's address. "fastnet peer --nat HOST:PORT" is
such a host. Every datagram between an internal host and the gateway starts
with the address at the other end of its way through the NAT: a family byte
(4 or 6), the IPv4 or IPv6 address, and the port in 2 bytes, big-endian;
the datagram as it is on the outside follows. From the host the address is
where it goes, from the gateway where it came from. Datagrams to the
gateway without such a header are dropped and counted.

It runs until SIGINT or SIGTERM. Standard output has a line when it starts,
one per mapping created (with the destination of the datagram that made
it) and expired, and one at the end:

	nat port-restricted udp 127.0.0.1:7300 outside=127.0.0.2 timeout=2m0s hairpinning=off
	mapped udp 127.0.0.1:43122 external=127.0.0.2:20000 remote=127.0.0.1:7000
	expired udp 127.0.0.1:43122 external=127.0.0.2:20000
	translated 212 datagrams out, 198 in (0 hairpinned); dropped in: 3 without a mapping, 7 filtered, 0 hairpinned without hairpinning; 2 mappings made, 1 live at the end; 0 malformed from inside

	fastnet nat --outside 127.0.0.2 --inside 127.0.0.1:7301 --type symmetric &
	fastnet peer --via 127.0.0.1:7000 --nat 127.0.0.1:7301 --accept`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			var o natOptions
			outside := fs.String("outside", "", "the NAT's outside `IP` address, one of this host's that only the NAT uses (required)")
			fs.StringVar(&o.inside, "inside", defaultNATInside, "serve the inside, the gateway of the internal hosts, on this UDP `HOST:PORT`")
			typ := fs.String("type", "port-restricted", "the NAT's `TYPE`: full-cone, address-restricted, port-restricted or symmetric")
			fs.DurationVar(&o.cfg.MappingTimeout, "timeout", fastnettest.DefaultMappingTimeout, "end a mapping `D` after the last datagram out through it")
			fs.BoolVar(&o.cfg.Hairpinning, "hairpinning", false, "pass datagrams from inside to the outside address back inside")
			firstPort := fs.Int("first-port", fastnettest.DefaultFirstPort, "take the mappings' external ports from `N` up, 1..65535")
			return func(ctx context.Context, args []string, s *stdio) int {
				bad := func(format string, a ...any) int { return usageError(s, "nat", format, a...) }
				t, ok := natTypes[*typ]
				switch {
				case len(args) > 0:
					return bad("unexpected argument %q", args[0])
				case *outside == "":
					return bad("missing --outside IP, the NAT's outside address")
				case !ok:
					return bad("--type %q: want full-cone, address-restricted, port-restricted or symmetric", *typ)
				case o.cfg.MappingTimeout <= 0:
					return bad("--timeout %v: must be positive", o.cfg.MappingTimeout)
				case *firstPort < 1 || *firstPort > 65535:
					return bad("--first-port %d: want 1..65535", *firstPort)
				}
				ip, err := netip.ParseAddr(*outside)
				if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
					return bad("--outside %q: want one IP address of this host", *outside)
				}
				if err := checkAddr(o.inside); err != nil {
					return bad("--inside: %v", err)
				}
				cfg := t.Config()
				cfg.MappingTimeout, cfg.Hairpinning, cfg.FirstPort = o.cfg.MappingTimeout, o.cfg.Hairpinning, uint16(*firstPort)
				o.cfg, o.outside, o.name = cfg, ip.Unmap(), *typ
				return runNAT(ctx, s, o)
			}
		},
	}
}

// natOptions are the settings of nat.
type natOptions struct {
	name    string // the --type
	outside netip.Addr
	inside  string
	cfg     fastnettest.NATConfig
}

// runNAT is the nat command.
func runNAT(ctx context.Context, s *stdio, o natOptions) int {
	// The outside address must be this host's: a mapping's socket is
	// bound on it.
	network := "udp6"
	if o.outside.Is4() {
		network = "udp4"
	}
	probe, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(o.outside, 0)))
	if err != nil {
		s.errorf("fastnet nat: outside address %s: %v", o.outside, err)
		return exitFailure
	}
	probe.Close()
	setup, cancel := context.WithTimeout(ctx, 10*time.Second) // for the name
	defer cancel()
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(setup, "udp", o.inside)
	if err != nil {
		s.errorf("fastnet nat: %v", err)
		return exitFailure
	}
	g := usernat.NewGateway(pc.(*net.UDPConn), usernat.Config{
		Public: o.outside,
		NAT:    o.cfg,
		Events: func(e usernat.Event) {
			switch e.Kind {
			case usernat.MappingCreated:
				s.printf("mapped udp %s external=%s remote=%s", e.Inside, e.External, e.Remote)
			case usernat.MappingExpired:
				s.printf("expired udp %s external=%s", e.Inside, e.External)
			}
		},
		Errors: func(err error) { s.errorf("fastnet nat: %v", err) },
	})
	hp := "off"
	if o.cfg.Hairpinning {
		hp = "on"
	}
	s.printf("nat %s udp %s outside=%s timeout=%v hairpinning=%s", o.name, g.Addr(), o.outside, o.cfg.MappingTimeout, hp)
	served := make(chan error, 1)
	go func() { served <- g.Serve() }()
	code := exitOK
	select {
	case <-ctx.Done():
	case err := <-served:
		s.errorf("fastnet nat: %v", err)
		code = exitFailure
	}
	live := g.NAT().Live()
	g.Close()
	st := g.NAT().Stats()
	s.printf("translated %d datagrams out, %d in (%d hairpinned); dropped in: %d without a mapping, %d filtered, %d hairpinned without hairpinning; %d mappings made, %d live at the end; %d malformed from inside",
		st.Outbound, st.Inbound, st.Hairpinned, st.NoMapping, st.Filtered, st.HairpinDropped, st.MappingsCreated, live, g.Malformed())
	return code
}
