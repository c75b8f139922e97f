package proc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// defaultPath is searched when the process environment has no PATH, the same
// fallback a POSIX shell uses.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultPath is defaultPath, for callers that build a PATH themselves.
const DefaultPath = defaultPath

// lookPath resolves name the way exec.LookPath does, but against the
// process's own environment and working directory rather than the daemon's.
// It returns the path to hand to execve: names containing a slash are
// returned unchanged (the child resolves them after its chdir), others become
// the absolute path found in PATH. Relative PATH entries are skipped, like
// exec.LookPath refusing results relative to the current directory.
//
// Errors carry wire.ErrNotFound (nothing found: a launcher reports 127) or
// wire.ErrPermission (found but not executable: 126).
func lookPath(name, dir string, env []string) (string, error) {
	if name == "" {
		return "", wire.Errorf(wire.ErrInvalid, "proc: empty program path")
	}
	if strings.Contains(name, "/") {
		check := name
		if dir != "" && !filepath.IsAbs(name) {
			check = filepath.Join(dir, name)
		}
		if err := executable(check); err != nil {
			return "", progError(name, err)
		}
		return name, nil
	}
	path, ok := envValue(env, "PATH")
	if !ok {
		path = defaultPath
	}
	var denied error
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		err := executable(p)
		if err == nil {
			return p, nil
		}
		if denied == nil && !os.IsNotExist(err) {
			denied = err
		}
	}
	if denied != nil {
		return "", progError(name, denied)
	}
	return "", wire.Errorf(wire.ErrNotFound, "proc: %q: executable file not found in $PATH", name)
}

// executable returns nil for a regular file with an execute bit.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &fs.PathError{Op: "exec", Path: p, Err: errIsDir}
	}
	if fi.Mode()&0o111 == 0 {
		return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	}
	return nil
}

var errIsDir = errors.New("is a directory")

func progError(name string, err error) error {
	if os.IsNotExist(err) {
		return wire.Errorf(wire.ErrNotFound, "proc: %q: no such file", name)
	}
	return wire.Errorf(wire.ErrPermission, "proc: %q: cannot execute: %w", name, err)
}

// envValue returns the first value of key in env, the one getenv in the
// child sees.
func envValue(env []string, key string) (string, bool) {
	for _, kv := range env {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return kv[len(key)+1:], true
		}
	}
	return "", false
}
