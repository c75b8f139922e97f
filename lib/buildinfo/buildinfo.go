// Package buildinfo reports the version of the dynrt binaries from the Go
// build information, so `--version` is right without a release script.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// version may be set at link time (-ldflags "-X ...buildinfo.version=v1.2.3");
// when empty, the module version recorded by the Go toolchain is used. It is
// the one package-level variable here because the linker can only set those.
var version string

// Info is what --version prints.
type Info struct {
	Version  string // module version, or "(devel)" for a local build
	Revision string // VCS revision when the toolchain recorded one
	Modified bool   // the work tree had uncommitted changes at build time
	Go       string // Go toolchain version
}

// Read returns the build information of the running binary.
func Read() Info {
	info := Info{Version: version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = "(unknown)"
		}
		return info
	}
	info.Go = bi.GoVersion
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String formats the info on one line, e.g.
// "v0.1.0 (rev 1a2b3c4d5e6f, go1.26.8)".
func (i Info) String() string {
	extra := ""
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		extra = "rev " + rev
		if i.Modified {
			extra += "+dirty"
		}
		extra += ", "
	}
	return fmt.Sprintf("%s (%s%s)", i.Version, extra, i.Go)
}
