package wire

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkRoundTripUnix measures Call→reply over a real unix socket
// (handshake included in setup, not in the timing) and reports the median
// round trip besides the mean.
func BenchmarkRoundTripUnix(b *testing.B) {
	d, a := unixConns(b)
	ctx := context.Background()
	srvCh := make(chan *Conn, 1)
	go func() {
		c, err := Accept(ctx, a, AcceptPolicy{}, Options{Handler: echoMux().Serve})
		if err != nil {
			b.Error(err)
		}
		srvCh <- c
	}()
	cli, err := Client(ctx, d, Hello{Role: RoleClient}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	srv := <-srvCh
	defer func() { _ = cli.Close(); <-cli.Done(); <-srv.Done() }()

	req := &Ping{Seq: 1, Time: 12345}
	var resp Ping
	for i := 0; i < 200; i++ { // warm up pools and the scheduler
		_ = cli.Call(ctx, KindPing, req, &resp)
	}
	durs := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := cli.Call(ctx, KindPing, req, &resp); err != nil {
			b.Fatal(err)
		}
		durs[i] = time.Since(t0)
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "median-ns")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkRoundTripUnixParallel: many goroutines sharing one connection.
func BenchmarkRoundTripUnixParallel(b *testing.B) {
	d, a := unixConns(b)
	ctx := context.Background()
	srvCh := make(chan *Conn, 1)
	go func() {
		c, _ := Accept(ctx, a, AcceptPolicy{}, Options{Handler: echoMux().Serve})
		srvCh <- c
	}()
	cli, err := Client(ctx, d, Hello{Role: RoleClient}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	srv := <-srvCh
	defer func() { _ = cli.Close(); <-cli.Done(); <-srv.Done() }()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var resp Ping
		for pb.Next() {
			if err := cli.Call(ctx, KindPing, &Ping{Seq: 1}, &resp); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPsetEncodeDecode1000: a pset with 1,000 members, worst case for
// the range encoding (no two members adjacent: 1,000 ranges).
func BenchmarkPsetEncodeDecode1000(b *testing.B) {
	var members RankRanges
	for r := uint32(0); r < 2000; r += 2 {
		members = members.Add(r)
	}
	in := &PsetInfo{Name: "mpi://app/lu/grid", Job: "dvm1.1", Version: 3, Active: true, Size: 1000,
		Hints: map[string]string{"walltime": "60"}, Members: members}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf, err := Marshal(in)
		if err != nil {
			b.Fatal(err)
		}
		var out PsetInfo
		if err := Unmarshal(buf, &out); err != nil {
			b.Fatal(err)
		}
		if len(out.Members) != 1000 {
			b.Fatal("lost members")
		}
	}
}

func BenchmarkEnvelopeDecode(b *testing.B) {
	body, _ := Marshal(&Ping{Seq: 1, Time: 2})
	frame := AppendEnvelope(nil, &Envelope{V: 1, ID: 12345, Kind: KindPing, Body: body})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeEnvelope(frame); err != nil {
			b.Fatal(err)
		}
	}
}
