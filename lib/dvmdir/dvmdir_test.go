package dvmdir

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestPath(t *testing.T) {
	cwd, _ := os.Getwd()
	def := fmt.Sprintf("/tmp/dynrt-%d", os.Getuid())
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvDir: "/x/d", "XDG_RUNTIME_DIR": "/run/user/1"}, "/x/d"},
		{map[string]string{EnvDir: "rel"}, filepath.Join(cwd, "rel")},
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"}, "/run/user/1/dynrt"},
		{map[string]string{"XDG_RUNTIME_DIR": "relative"}, def},
		{map[string]string{"TMPDIR": "/elsewhere"}, def},
		{nil, def},
	}
	for _, tc := range tests {
		got, err := Path(envOf(tc.env))
		if err != nil || got != tc.want {
			t.Errorf("Path(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestEnsure(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "a", "dynrt")
	dir, err := Open(envOf(map[string]string{EnvDir: fresh}))
	if err != nil || dir != fresh {
		t.Fatalf("Open: %q %v", dir, err)
	}
	if m := mode(t, fresh); m != 0o700 {
		t.Fatalf("created with mode %04o", m)
	}
	if err := Ensure(fresh); err != nil {
		t.Fatalf("existing private dir: %v", err)
	}

	loose := filepath.Join(base, "loose")
	if err := os.Mkdir(loose, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o755)
	link := filepath.Join(base, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	tests := []struct {
		dir, msg string
	}{
		{loose, "chmod 700"},
		{link, "symbolic link"},
		{file, "not a directory"},
	}
	if os.Getuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct{ dir, msg string }{other, "owned by uid 65534"})
	}
	for _, tc := range tests {
		err := Ensure(tc.dir)
		if !errors.Is(err, wire.ErrPermission) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Ensure(%s) = %v; want permission error mentioning %q", tc.dir, err, tc.msg)
		}
	}
	// List refuses an insecure directory too: it may hold planted files.
	if _, _, err := List(loose); !errors.Is(err, wire.ErrPermission) {
		t.Errorf("List(loose) = %v", err)
	}
}

func privateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	if err := Ensure(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newInfo(t *testing.T, name string, age time.Duration) Info {
	t.Helper()
	id, err := NewID()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return Info{ID: id, Name: name, Socket: "/s/" + id, TCP: "127.0.0.1:5000", Token: tok,
		PID: os.Getpid(), Nodes: 2, Version: "v0-test", StartTime: time.Now().Add(-age).Round(0)}
}

func TestWriteRead(t *testing.T) {
	dir := privateDir(t)
	in := newInfo(t, "mine", time.Minute)
	path, err := Write(dir, in)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, in.ID+".json") {
		t.Fatalf("path %s", path)
	}
	if m := mode(t, path); m != 0o600 {
		t.Fatalf("file mode %04o, want 0600", m)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.ProcStart == 0 || got.BootID == "" || got.Host == "" {
		t.Fatalf("Write did not record pid start, boot id and host: %+v", got)
	}
	if !got.StartTime.Equal(in.StartTime) {
		t.Fatalf("start time %v, want %v", got.StartTime, in.StartTime)
	}
	want := in
	want.ProcStart, want.BootID, want.Host, want.Path = got.ProcStart, got.BootID, got.Host, path
	want.StartTime = got.StartTime
	if got != want {
		t.Fatalf("read back\n %+v\nwant\n %+v", got, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(entries))
	}
	if _, err := Write(dir, Info{ID: "../x"}); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "none.json")); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestWriteAtomic rewrites a file while readers parse it: no reader may see
// a missing, partial or mixed file.
func TestWriteAtomic(t *testing.T) {
	dir := privateDir(t)
	info := newInfo(t, strings.Repeat("n", 4000), 0) // big enough for several write calls
	info.Nodes, info.Version = 0, ""                 // readers check nodes == len(version)
	path, err := Write(dir, info)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := Read(path)
				if err == nil && got.Nodes != len(got.Version) {
					err = fmt.Errorf("mixed content: nodes %d version %q", got.Nodes, got.Version)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 300 {
		info.Nodes, info.Version = i, strings.Repeat("v", i)
		if _, err := Write(dir, info); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// exitedPid returns the pid of a process that has exited and been reaped.
func exitedPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestListStale(t *testing.T) {
	dir := privateDir(t)
	started := time.Now().Add(-time.Second).Round(0)
	write := func(mut func(*Info)) Info {
		t.Helper()
		i := newInfo(t, "", 0)
		i.StartTime = started
		mut(&i)
		if _, err := Write(dir, i); err != nil {
			t.Fatal(err)
		}
		return i
	}
	// A zombie: exited, not yet reaped.
	zombie := exec.Command("/bin/true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	for {
		if _, state, err := procStat(zombie.Process.Pid); err != nil || state == 'Z' {
			break
		}
		time.Sleep(time.Millisecond)
	}

	live := write(func(i *Info) { i.Name = "live" })
	elsewhere := write(func(i *Info) { i.Host = "some-other-host"; i.PID = exitedPid(t) })
	gone := write(func(i *Info) { i.PID = exitedPid(t) })
	if _, err := SocketDir(dir, gone.ID); err != nil {
		t.Fatal(err)
	}
	reused := write(func(i *Info) { i.ProcStart = 1 }) // our pid, another start time
	rebooted := write(func(i *Info) { i.BootID = "00000000-old-boot" })
	zomb := write(func(i *Info) { i.PID = zombie.Process.Pid })
	nopid := write(func(i *Info) { i.PID = 0 })
	os.WriteFile(filepath.Join(dir, "abcdefgh.json"), []byte("{not json"), 0o600)
	mism := newInfo(t, "", 0)
	os.WriteFile(filepath.Join(dir, "zzzzzzzz.json"), []byte(fmt.Sprintf(`{"id":%q,"pid":%d}`, mism.ID, os.Getpid())), 0o600)
	os.WriteFile(filepath.Join(dir, ".tmpfile.json.tmp-1"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o600)

	gotLive, stale, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range gotLive {
		ids = append(ids, i.ID)
	}
	wantLive := []string{live.ID, elsewhere.ID} // equal ages: by id
	if wantLive[0] > wantLive[1] {
		wantLive[0], wantLive[1] = wantLive[1], wantLive[0]
	}
	if fmt.Sprint(ids) != fmt.Sprint(wantLive) {
		t.Fatalf("live %v, want %v", ids, wantLive)
	}
	want := map[string]struct {
		reason  string
		removed bool
	}{
		gone.ID:     {"is gone", true},
		reused.ID:   {"reused", true},
		rebooted.ID: {"reboot", true},
		zomb.ID:     {"has exited", true},
		nopid.ID:    {"no master pid", true},
		"abcdefgh":  {"unreadable", false},
		"zzzzzzzz":  {"file holds DVM id", false},
	}
	if len(stale) != len(want) {
		t.Fatalf("stale %+v, want %d entries", stale, len(want))
	}
	for _, s := range stale {
		id := strings.TrimSuffix(filepath.Base(s.Path), ".json")
		w, ok := want[id]
		if !ok || !strings.Contains(s.Reason, w.reason) || s.Removed != w.removed {
			t.Errorf("stale %s: %q removed=%v; want %q removed=%v", id, s.Reason, s.Removed, w.reason, w.removed)
		}
		_, err := os.Stat(s.Path)
		if exists := err == nil; exists == s.Removed {
			t.Errorf("stale %s: file exists=%v but Removed=%v", id, exists, s.Removed)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, gone.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket dir of a stale DVM survived: %v", err)
	}
	// A second pass finds nothing more to remove.
	_, stale, _ = List(dir)
	if len(stale) != 2 {
		t.Errorf("second List: %+v", stale)
	}
}

func TestListMissingDir(t *testing.T) {
	live, stale, err := List(filepath.Join(t.TempDir(), "none"))
	if live != nil || stale != nil || err != nil {
		t.Fatalf("%v %v %v", live, stale, err)
	}
}

func TestRemove(t *testing.T) {
	dir := privateDir(t)
	i := newInfo(t, "", 0)
	Write(dir, i)
	if _, err := SocketPath(dir, i.ID, "master.sock"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := Remove(dir, i.ID); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
	if err := Remove(dir, ".."); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("Remove(..) = %v", err)
	}
}

func TestSocketPath(t *testing.T) {
	dir := privateDir(t)
	p, err := SocketPath(dir, "abcdefgh", "d12.sock")
	if err != nil || p != filepath.Join(dir, "abcdefgh", "d12.sock") {
		t.Fatalf("%q %v", p, err)
	}
	if m := mode(t, filepath.Join(dir, "abcdefgh")); m != 0o700 {
		t.Fatalf("socket dir mode %04o", m)
	}
	long := filepath.Join(dir, strings.Repeat("l", MaxSocketPath))
	if err := Ensure(long); err != nil {
		t.Fatal(err)
	}
	_, err = SocketPath(long, "abcdefgh", "m.sock")
	if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "unix socket limit") || !strings.Contains(err.Error(), EnvDir) {
		t.Fatalf("long path: %v", err)
	}
	// Exactly at the limit is fine.
	name := strings.Repeat("s", MaxSocketPath-len(filepath.Join(dir, "abcdefgh"))-1)
	if p, err := SocketPath(dir, "abcdefgh", name); err != nil || len(p) != MaxSocketPath {
		t.Fatalf("path of %d bytes: %v", len(p), err)
	}
	for _, bad := range []string{"", "a/b"} {
		if _, err := SocketPath(dir, "abcdefgh", bad); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	if _, err := SocketDir(dir, "../x"); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("bad id: %v", err)
	}
}

func TestNewIDToken(t *testing.T) {
	idRE := regexp.MustCompile(`^[a-z2-7]{8}$`)
	tokRE := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for range 1000 {
		id, err := NewID()
		if err != nil || !idRE.MatchString(id) || !validID(id) {
			t.Fatalf("id %q %v", id, err)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
	a, _ := NewToken()
	b, _ := NewToken()
	if !tokRE.MatchString(a) || a == b {
		t.Fatalf("tokens %q %q", a, b)
	}
}

// TestProcStatOddName checks the /proc/<pid>/stat parser on a command name
// with spaces and parentheses.
func TestProcStatOddName(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	odd := filepath.Join(t.TempDir(), "a) b (c")
	if err := os.Symlink(sleep, odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	start, state, err := procStat(cmd.Process.Pid)
	if err != nil || start == 0 || state == 0 {
		t.Fatalf("procStat: %d %q %v", start, state, err)
	}
	self, _, _ := procStat(os.Getpid())
	if start < self {
		t.Fatalf("child start %d before ours %d", start, self)
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		want string // substring of the error; "" = valid
	}{
		{"life", ""},
		{"My_DVM-2.0", ""},
		{"0", ""},
		{strings.Repeat("a", MaxNameLen), ""},
		{strings.Repeat("a", MaxNameLen+1), "too long"},
		{"", "empty"},
		{"a\nb", `character '\n' at position 2`},
		{"a/b", `character '/'`},
		{"file:x", `character ':'`},
		{".hidden", `character '.' at position 1`},
		{"-x", `character '-' at position 1`},
		{"é", "not allowed"},
		{"a b", `character ' '`},
	}
	for _, tc := range tests {
		err := CheckName(tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckName(%q) = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, wire.ErrInvalid)):
			t.Errorf("CheckName(%q) = %v, want an ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
}

func TestUptime(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		start time.Time
		want  string
	}{
		{now.Add(-90*time.Second - 400*time.Millisecond), "1m30s"},
		{now, "0s"},
		{time.Time{}, "-"},        // no start_time in the file
		{now.Add(time.Hour), "-"}, // clock skew between writer and reader
	}
	for _, tc := range tests {
		if got := (Info{StartTime: tc.start}).Uptime(now); got != tc.want {
			t.Errorf("Uptime with start %v = %q, want %q", tc.start, got, tc.want)
		}
	}
}
