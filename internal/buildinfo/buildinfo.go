package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Unknown stands for a value the binary does not record (a test binary, a
// build outside version control).
const Unknown = "unknown"

// version and revision, when set at link time, win over what the toolchain
// recorded: builds without the .git directory (a container build) or with
// -buildvcs=false record no revision. make build and the Dockerfile set
// them:
//
//	go build -ldflags "-X github.com/paycallback/paycallback/internal/buildinfo.version=v1.2.3 \
//	  -X github.com/paycallback/paycallback/internal/buildinfo.revision=$(git rev-parse HEAD)"
var version, revision string

// Info identifies a build.
type Info struct {
	// Version is the main module's version ("(devel)" for a build from a
	// work tree) or Unknown.
	Version string
	// Revision is the VCS revision, with "-dirty" when the work tree had
	// uncommitted changes, or Unknown.
	Revision string
	// GoVersion is the Go toolchain's version.
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	info := fromToolchain()
	if version != "" {
		info.Version = version
	}
	if revision != "" {
		info.Revision = revision
	}
	return info
}

// fromToolchain returns what the Go toolchain recorded in the binary.
func fromToolchain() Info {
	info := Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.Revision != Unknown {
		info.Revision += "-dirty"
	}
	return info
}

// String formats the build as "VERSION (revision REVISION, GOVERSION)".
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
