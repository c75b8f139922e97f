// Package dvmdir manages the rendezvous files through which tools find a
// running DVM (DESIGN §3): one private directory per user holding
// `<id>.json` per DVM (addresses, token, master pid) and `<id>/` for the unix
// sockets of that DVM's master and daemons.
//
// Environment lookups go through a func(string) string argument (os.Getenv in
// the binaries) so that callers and tests decide what the environment is.
package dvmdir

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Environment variables read by this package.
const (
	EnvDir   = "DYNRT_DIR"   // the rendezvous directory
	EnvDVM   = "DYNRT_DVM"   // default DVM selection, same forms as --dvm
	EnvToken = "DYNRT_TOKEN" // token for a uri: selection
)

// MaxSocketPath is the longest unix socket path Linux accepts (sun_path is
// 108 bytes including the terminating NUL).
const MaxSocketPath = 107

// Info is the content of a rendezvous file.
type Info struct {
	ID      string `json:"id"`
	Name    string `json:"name,omitempty"`
	Socket  string `json:"socket,omitempty"` // unix socket path of the master
	TCP     string `json:"tcp,omitempty"`    // host:port of the master
	Token   string `json:"token,omitempty"`  // TCP credential (hex)
	PID     int    `json:"pid"`              // master process id
	Host    string `json:"host,omitempty"`   // host of the master; the pid is only checked there
	Nodes   int    `json:"nodes"`
	Version string `json:"version"`
	// StartTime is when the DVM started (shown as its age).
	StartTime time.Time `json:"start_time"`
	// ProcStart is the start time of PID in clock ticks after boot, field 22
	// of /proc/<pid>/stat, and BootID the kernel's boot id: together they tell
	// a live master from a process that reused its pid. Write fills both.
	ProcStart uint64 `json:"proc_start,omitempty"`
	BootID    string `json:"boot_id,omitempty"`

	// Path is the file the Info was read from (not stored).
	Path string `json:"-"`
}

// Age is how long the DVM has been running at now; ok is false when the
// file records no start time (or one in the future), which has no age to
// show.
func (i Info) Age(now time.Time) (age time.Duration, ok bool) {
	if i.StartTime.IsZero() || i.StartTime.After(now) {
		return 0, false
	}
	return now.Sub(i.StartTime), true
}

// Uptime is Age for people: rounded to the second, "-" when unknown.
func (i Info) Uptime(now time.Time) string {
	age, ok := i.Age(now)
	if !ok {
		return "-"
	}
	return age.Round(time.Second).String()
}

// Path returns the rendezvous directory: $DYNRT_DIR, else
// $XDG_RUNTIME_DIR/dynrt, else /tmp/dynrt-<uid>. It does not create it.
func Path(env func(string) string) (string, error) {
	if d := env(EnvDir); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", wire.Errorf(wire.ErrInvalid, "dvmdir: $%s: %w", EnvDir, err)
		}
		return abs, nil
	}
	if x := env("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "dynrt"), nil
	}
	return fmt.Sprintf("/tmp/dynrt-%d", os.Getuid()), nil
}

// Open returns the rendezvous directory, created if needed and checked with
// Ensure.
func Open(env func(string) string) (string, error) {
	dir, err := Path(env)
	if err != nil {
		return "", err
	}
	return dir, Ensure(dir)
}

// Ensure creates dir (mode 0700) if missing and checks that it is a real
// directory owned by the caller with no group or other permissions. It does
// not repair a wrong mode: a directory shared with others may hold planted
// files, and the user should look at it.
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return wire.Errorf(wire.ErrPermission, "dvmdir: create %s: %w", dir, err)
	}
	return checkDir(dir)
}

func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return wire.Errorf(wire.ErrNotFound, "dvmdir: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return wire.Errorf(wire.ErrPermission, "dvmdir: %s is a symbolic link; it must be a private directory (set $%s to choose another)", dir, EnvDir)
	}
	if !fi.IsDir() {
		return wire.Errorf(wire.ErrPermission, "dvmdir: %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return wire.Errorf(wire.ErrPermission, "dvmdir: %s is owned by uid %d, not by you (uid %d); set $%s to a private directory", dir, st.Uid, os.Getuid(), EnvDir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return wire.Errorf(wire.ErrPermission, "dvmdir: %s has mode %04o; it must not be accessible to others (chmod 700 %s)", dir, perm, dir)
	}
	return nil
}

// NewID returns a random DVM id: 8 lowercase base32 characters (40 bits).
func NewID() (string, error) {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", wire.Errorf(wire.ErrInternal, "dvmdir: random id: %w", err)
	}
	return strings.ToLower(base32.StdEncoding.EncodeToString(b[:])), nil
}

// NewToken returns a random TCP token: 32 bytes, hex encoded.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", wire.Errorf(wire.ErrInternal, "dvmdir: random token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// validID accepts what may safely become a file name: 1-32 characters of
// [a-z0-9]. Ids from NewID always pass.
func validID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// File returns the rendezvous file path of DVM id.
func File(dir, id string) string { return filepath.Join(dir, id+".json") }

// Write stores info as <dir>/<id>.json, mode 0600, atomically (a temporary
// file renamed over the target), so readers never see a partial file. It
// fills Host, BootID and ProcStart from the running system when they are
// empty and info.PID is set. It returns the file path.
func Write(dir string, info Info) (string, error) {
	if !validID(info.ID) {
		return "", wire.Errorf(wire.ErrInvalid, "dvmdir: invalid DVM id %q", info.ID)
	}
	if info.Host == "" {
		info.Host, _ = os.Hostname()
	}
	if info.BootID == "" {
		info.BootID = bootID()
	}
	if info.ProcStart == 0 && info.PID > 0 {
		info.ProcStart, _, _ = procStat(info.PID)
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return "", wire.Errorf(wire.ErrInternal, "dvmdir: encode: %w", err)
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(dir, "."+info.ID+".json.tmp-*") // mode 0600
	if err != nil {
		return "", wire.Errorf(wire.ErrPermission, "dvmdir: write: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	path := File(dir, info.ID)
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", wire.Errorf(wire.ErrPermission, "dvmdir: write %s: %w", path, err)
	}
	return path, nil
}

// Read parses one rendezvous file.
func Read(path string) (Info, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Info{}, wire.Errorf(wire.ErrNotFound, "dvmdir: %w", err)
		}
		return Info{}, wire.Errorf(wire.ErrPermission, "dvmdir: %w", err)
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return Info{}, wire.Errorf(wire.ErrMalformed, "dvmdir: %s: %w", path, err)
	}
	if !validID(info.ID) {
		return Info{}, wire.Errorf(wire.ErrMalformed, "dvmdir: %s: invalid DVM id %q", path, info.ID)
	}
	info.Path = path
	return info, nil
}

// LogName is the log of a DVM started with --daemonize, in its socket
// directory.
const LogName = "dvm.log"

// Remove deletes the rendezvous file and the socket directory of DVM id.
// Missing files are not an error.
func Remove(dir, id string) error {
	_, err := remove(dir, id, false)
	return err
}

// CrashLog is where the log of DVM id is kept when its master died without
// cleaning up: <dir>/<id>.crash.log.
func CrashLog(dir, id string) string { return filepath.Join(dir, id+".crash.log") }

// remove deletes DVM id's files. With keepLog, a non-empty log in the
// socket directory is first moved to CrashLog, whose path it returns: after
// a crash it is the only record of what happened.
func remove(dir, id string, keepLog bool) (kept string, err error) {
	if !validID(id) {
		return "", wire.Errorf(wire.ErrInvalid, "dvmdir: invalid DVM id %q", id)
	}
	if keepLog {
		log := filepath.Join(dir, id, LogName)
		if fi, serr := os.Lstat(log); serr == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			if rerr := os.Rename(log, CrashLog(dir, id)); rerr != nil {
				// Keep the whole directory rather than lose the log.
				return "", wire.Errorf(wire.ErrPermission, "dvmdir: keep the log of DVM %s: %w", id, rerr)
			}
			kept = CrashLog(dir, id)
		}
	}
	err = os.Remove(File(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if rerr := os.RemoveAll(filepath.Join(dir, id)); err == nil {
		err = rerr
	}
	if err != nil {
		return kept, wire.Errorf(wire.ErrPermission, "dvmdir: remove DVM %s: %w", id, err)
	}
	return kept, nil
}

// Stale is a rendezvous file that does not name a live DVM.
type Stale struct {
	Path    string
	Info    Info   // as read; zero when the file could not be parsed
	Reason  string // why it is not live
	Removed bool   // the file and socket directory were deleted
	Log     string // where the dead DVM's log was kept ("" if it had none)
}

// List returns the live DVMs of dir, oldest first, and the files that are
// not live. Files of DVMs whose master is gone are removed (with their socket
// directories, keeping a log as CrashLog); unreadable files are reported but
// left alone, since they may come from a newer version. A DVM whose master
// socket still accepts connections is live whatever its file says: nothing
// of a running DVM is ever removed. A missing dir means no DVMs.
func List(dir string) (live []Info, stale []Stale, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, wire.Errorf(wire.ErrPermission, "dvmdir: %w", err)
	}
	if err := checkDir(dir); err != nil {
		return nil, nil, err
	}
	sys := currentSystem()
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !validID(id) || e.IsDir() {
			continue // temporary files start with '.', so they land here
		}
		path := filepath.Join(dir, name)
		info, err := Read(path)
		if err != nil {
			if errors.Is(err, wire.ErrNotFound) {
				continue // removed since ReadDir
			}
			stale = append(stale, Stale{Path: path, Reason: "unreadable: " + err.Error()})
			continue
		}
		if info.ID != id {
			stale = append(stale, Stale{Path: path, Info: info, Reason: fmt.Sprintf("file holds DVM id %q", info.ID)})
			continue
		}
		if reason := sys.deadReason(info); reason != "" && !answers(dir, info) {
			kept, rerr := remove(dir, id, true)
			if rerr != nil {
				reason += " (not removed: " + rerr.Error() + ")"
			}
			stale = append(stale, Stale{Path: path, Info: info, Reason: reason, Removed: rerr == nil, Log: kept})
			continue
		}
		live = append(live, info)
	}
	sort.Slice(live, func(a, b int) bool {
		if !live[a].StartTime.Equal(live[b].StartTime) {
			return live[a].StartTime.Before(live[b].StartTime)
		}
		return live[a].ID < live[b].ID
	})
	return live, stale, nil
}

// SocketDir creates (if needed) and returns <dir>/<id>/, the directory for
// the unix sockets of DVM id, mode 0700.
func SocketDir(dir, id string) (string, error) {
	if !validID(id) {
		return "", wire.Errorf(wire.ErrInvalid, "dvmdir: invalid DVM id %q", id)
	}
	sd := filepath.Join(dir, id)
	if err := os.Mkdir(sd, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", wire.Errorf(wire.ErrPermission, "dvmdir: %w", err)
	}
	return sd, checkDir(sd)
}

// SocketPath returns <dir>/<id>/<name> for a unix socket, creating the socket
// directory, or an error if the path exceeds the kernel's limit.
func SocketPath(dir, id, name string) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') {
		return "", wire.Errorf(wire.ErrInvalid, "dvmdir: invalid socket name %q", name)
	}
	p := filepath.Join(dir, id, name)
	if len(p) > MaxSocketPath {
		return "", wire.Errorf(wire.ErrInvalid, "dvmdir: socket path %s is %d bytes, over the unix socket limit of %d; set $%s to a shorter directory", p, len(p), MaxSocketPath, EnvDir)
	}
	if _, err := SocketDir(dir, id); err != nil {
		return "", err
	}
	return p, nil
}

// MaxNameLen is the longest DVM name `dvm start --name` accepts.
const MaxNameLen = 64

// CheckName checks a DVM name: 1 to MaxNameLen characters of letters,
// digits, '.', '_' and '-', starting with a letter or digit. Names end up
// in listings, error messages and --dvm selections, so nothing that could
// break a line, a path or a selection form (file:, uri:) is allowed.
func CheckName(name string) error {
	const rule = "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
	if name == "" {
		return wire.Errorf(wire.ErrInvalid, "dvmdir: empty DVM name; %s", rule)
	}
	if len(name) > MaxNameLen {
		return wire.Errorf(wire.ErrInvalid, "dvmdir: DVM name of %d characters is too long (at most %d); %s", len(name), MaxNameLen, rule)
	}
	for i, c := range name {
		alnum := c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return wire.Errorf(wire.ErrInvalid, "dvmdir: DVM name %q: character %q at position %d is not allowed; %s", name, c, i+1, rule)
		}
	}
	return nil
}

// CheckNameFree checks that no live DVM in dir already answers to name,
// as its name or its id (ids are matched first, so such a name could never
// be selected).
func CheckNameFree(dir, name string) error {
	live, _, err := List(dir)
	if err != nil {
		return err
	}
	for _, i := range live {
		if i.Name == name || i.ID == name {
			return wire.Errorf(wire.ErrExists, "dvmdir: DVM name %q is already used by the running DVM %s (pid %d); choose another name or stop it with `dynrun dvm stop --dvm %s`", name, i.ID, i.PID, i.ID)
		}
	}
	return nil
}
