package tcpdriver

import (
	"bytes"
	"context"
	"testing"
	"time"
)

func TestEcho(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{}
	cfg.Engine.MaxMessageSize = 4 << 20
	l, err := Listen(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				return
			}
			c.Send(ctx, m.Channel, m.Data, m.Reliable)
		}
	}()
	c, err := Dial(ctx, l.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("fastnet "), 400000)
	for _, msg := range [][]byte{[]byte("hello"), big} {
		if err := c.Send(ctx, 3, msg, true); err != nil {
			t.Fatal(err)
		}
		m, err := c.Receive(ctx)
		if err != nil || !bytes.Equal(m.Data, msg) || m.Channel != 3 {
			t.Fatalf("got %d bytes, %v", len(m.Data), err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
