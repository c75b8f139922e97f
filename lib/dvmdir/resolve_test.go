package dvmdir

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

func TestResolve(t *testing.T) {
	// Fixed ids make the table readable; all DVMs "run" as this test process.
	mk := func(id, name string, age time.Duration) Info {
		return Info{ID: id, Name: name, Socket: "/s/" + id, TCP: "h:1", Token: "tok-" + id, PID: os.Getpid(),
			Nodes: 1, StartTime: time.Now().Add(-age)}
	}
	alpha := mk("aaaaaaaa", "alpha", 2*time.Hour)
	beta := mk("bbbbbbbb", "beta", time.Minute)
	twin1 := mk("cccccccc", "twin", time.Second)
	twin2 := mk("dddddddd", "twin", time.Second)
	dead := mk("eeeeeeee", "dead", time.Second)
	dead.PID = exitedPid(t)

	other := privateDir(t) // a rendezvous file outside the searched directory
	elsewhere := mk("ffffffff", "far", time.Second)
	elsePath, _ := Write(other, elsewhere)
	deadPath, _ := Write(other, dead)

	type want struct {
		id     string // chosen DVM, or
		err    *wire.Error
		msgs   []string // substrings of the error
		socket string   // uri: results
		tcp    string
		token  string
	}
	tests := []struct {
		name string
		dvms []Info
		sel  string
		env  map[string]string
		want want
	}{
		{"by id", []Info{alpha, beta}, "bbbbbbbb", nil, want{id: "bbbbbbbb"}},
		{"by name", []Info{alpha, beta}, "alpha", nil, want{id: "aaaaaaaa"}},
		{"id before name", []Info{alpha, mk("alphaxyz", "aaaaaaaa", 0)}, "aaaaaaaa", nil, want{id: "aaaaaaaa"}},
		{"from env", []Info{alpha, beta}, "", map[string]string{EnvDVM: "beta"}, want{id: "bbbbbbbb"}},
		{"flag beats env", []Info{alpha, beta}, "alpha", map[string]string{EnvDVM: "beta"}, want{id: "aaaaaaaa"}},
		{"only one", []Info{beta}, "", nil, want{id: "bbbbbbbb"}},
		{"only live one", []Info{beta, dead}, "", nil, want{id: "bbbbbbbb"}},
		{"none", nil, "", nil, want{err: wire.ErrNotFound, msgs: []string{"no running DVM", "dynrun dvm start"}}},
		{"none but stale", []Info{dead}, "", nil, want{err: wire.ErrNotFound, msgs: []string{"dynrun dvm start"}}},
		{"several", []Info{alpha, beta}, "", nil, want{err: wire.ErrInvalid,
			msgs: []string{"2 DVMs are running", "--dvm", "aaaaaaaa", "alpha", "up 2h0m", "bbbbbbbb", "beta"}}},
		{"unknown", []Info{alpha, beta}, "gamma", nil, want{err: wire.ErrNotFound,
			msgs: []string{`--dvm "gamma" names no running DVM`, "aaaaaaaa", "bbbbbbbb", "--dvm ID|NAME"}}},
		{"unknown from env", []Info{alpha}, "", map[string]string{EnvDVM: "gamma"}, want{err: wire.ErrNotFound,
			msgs: []string{`$DYNRT_DVM "gamma"`, "aaaaaaaa"}}},
		{"stale by id", []Info{alpha, dead}, "eeeeeeee", nil, want{err: wire.ErrNotFound, msgs: []string{"names no running DVM"}}},
		{"unknown and none", nil, "gamma", nil, want{err: wire.ErrNotFound, msgs: []string{"dynrun dvm start"}}},
		{"ambiguous name", []Info{twin1, twin2}, "twin", nil, want{err: wire.ErrInvalid,
			msgs: []string{"names 2 DVMs", "use the id", "cccccccc", "dddddddd"}}},
		{"file", []Info{alpha}, "file:" + elsePath, nil, want{id: "ffffffff"}},
		{"file from env", []Info{alpha}, "", map[string]string{EnvDVM: "file:" + elsePath}, want{id: "ffffffff"}},
		{"file stale", nil, "file:" + deadPath, nil, want{err: wire.ErrNotFound, msgs: []string{"not running", "is gone"}}},
		{"file missing", nil, "file:/no/such.json", nil, want{err: wire.ErrNotFound, msgs: []string{"/no/such.json"}}},
		{"file empty", nil, "file:", nil, want{err: wire.ErrInvalid}},
		{"uri unix", []Info{alpha, beta}, "uri:unix:///run/m.sock", nil, want{socket: "/run/m.sock"}},
		{"uri unix with token", nil, "uri:unix:///run/m.sock", map[string]string{EnvToken: "t1"}, want{socket: "/run/m.sock", token: "t1"}},
		{"uri tcp", nil, "uri:tcp://node7:4711", map[string]string{EnvToken: "t2"}, want{tcp: "node7:4711", token: "t2"}},
		{"uri tcp ipv6", nil, "uri:tcp://[::1]:4711", map[string]string{EnvToken: "t2"}, want{tcp: "[::1]:4711", token: "t2"}},
		{"uri tcp from env", nil, "", map[string]string{EnvDVM: "uri:tcp://n:1", EnvToken: "t3"}, want{tcp: "n:1", token: "t3"}},
		{"uri tcp without token", nil, "uri:tcp://node7:4711", nil, want{err: wire.ErrInvalid, msgs: []string{EnvToken}}},
		{"uri tcp without port", nil, "uri:tcp://node7", map[string]string{EnvToken: "t"}, want{err: wire.ErrInvalid, msgs: []string{"host:port"}}},
		{"uri unix relative", nil, "uri:unix://rel/m.sock", nil, want{err: wire.ErrInvalid, msgs: []string{"absolute"}}},
		{"uri bad scheme", nil, "uri:http://x:1", nil, want{err: wire.ErrInvalid, msgs: []string{"unix or tcp"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := privateDir(t)
			for _, d := range tc.dvms {
				if _, err := Write(dir, d); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Resolve(dir, tc.sel, envOf(tc.env))
			w := tc.want
			if w.err != nil {
				if !errors.Is(err, w.err) {
					t.Fatalf("err %v (code %s), want code %s", err, wire.CodeOf(err), w.err.Code)
				}
				for _, m := range w.msgs {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error does not mention %q:\n%v", m, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != w.id || got.Socket != w.socket && w.id == "" || got.TCP != w.tcp && w.id == "" {
				t.Fatalf("got %+v, want %+v", got, w)
			}
			if w.id == "" && got.Token != w.token {
				t.Fatalf("token %q, want %q", got.Token, w.token)
			}
			if w.id != "" && got.Token != "tok-"+w.id {
				t.Fatalf("token %q not read from the file", got.Token)
			}
		})
	}
	// The stale file named by file: is reported, not deleted: it may live
	// outside the rendezvous directory.
	if _, err := os.Stat(deadPath); err != nil {
		t.Fatalf("file: selection removed %s: %v", deadPath, err)
	}
}

// A tool that finds no DVM because the one it wanted has just crashed says
// where that DVM's log was kept.
func TestResolveNamesCrashLog(t *testing.T) {
	dir := privateDir(t)
	info := Info{ID: "aaaaaaaa", PID: exitedPid(t), Nodes: 1, StartTime: time.Now()}
	if _, err := Write(dir, info); err != nil {
		t.Fatal(err)
	}
	sd, err := SocketDir(dir, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sd+"/"+LogName, []byte("panic: the master crashed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(dir, "", func(string) string { return "" })
	if !errors.Is(err, wire.ErrNotFound) || !strings.Contains(err.Error(), "its log is kept in "+CrashLog(dir, info.ID)) {
		t.Fatalf("Resolve: %v", err)
	}
	if b, err := os.ReadFile(CrashLog(dir, info.ID)); err != nil || string(b) != "panic: the master crashed\n" {
		t.Errorf("crash log: %q %v", b, err)
	}
}
