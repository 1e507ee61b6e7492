package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleRoot is the repository's root, two directories up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root holds go.mod")
	return root
}

func mustLoad(t *testing.T, root string) *module {
	t.Helper()
	m, err := loadModule(root)
	require.NoError(t, err)
	require.NotEmpty(t, m.Pkgs)
	return m
}

func list(fs []finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n")
		b.WriteString(f.String())
	}
	return b.String()
}

// TestDocCommentsNameExistingIdentifiers fails when a package doc comment
// names an identifier that does not exist (see the package doc).
func TestDocCommentsNameExistingIdentifiers(t *testing.T) {
	m := mustLoad(t, moduleRoot(t))
	if fs := checkIdentifiers(m); len(fs) > 0 {
		t.Errorf("doc comments name identifiers that do not exist; fix the comment or the name:%s", list(fs))
	}
}

// TestReadmeLayoutListsEveryPackage fails when README.md's layout misses a
// package directory or lists one that does not exist.
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	m := mustLoad(t, moduleRoot(t))
	fs, err := checkLayout(m)
	require.NoError(t, err)
	if len(fs) > 0 {
		t.Errorf("%s", list(fs))
	}
}

// TestLinksPointAtFiles fails when README.md or docs/*.md links a file or
// anchor that is not there, or a package doc comment names a path that is
// not.
func TestLinksPointAtFiles(t *testing.T) {
	m := mustLoad(t, moduleRoot(t))
	fs, err := checkLinks(m)
	require.NoError(t, err)
	if len(fs) > 0 {
		t.Errorf("links and paths that point at nothing:%s", list(fs))
	}
}

// The fixture holds one drift of each kind; every rule must report it, and
// only it.
// TestEveryPackageSaysItsJobInDocGo fails when a package has no doc.go
// holding its package comment, or another file carries one.
func TestEveryPackageSaysItsJobInDocGo(t *testing.T) {
	m := mustLoad(t, moduleRoot(t))
	if fs := checkDocFiles(m); len(fs) > 0 {
		t.Errorf("package comments outside doc.go:%s", list(fs))
	}
}

func TestCheckersReportTheFixturesDrift(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "fixture"))

	t.Run("identifiers", func(t *testing.T) {
		fs := checkIdentifiers(m)
		got := list(fs)
		for _, want := range []string{
			"pkg/good/doc.go: package good's doc comment names good.Missing, which does not exist",
			"pkg/good/doc.go: package good's doc comment names `Absent`, which does not exist",
			"pkg/good/doc.go: package good's doc comment names Thing.Nope, which does not exist",
			"pkg/good/doc.go: package good's doc comment names forgotten.Gone, which does not exist",
			"pkg/good/doc.go: package good's doc comment names good.Phantom, which does not exist",
			"pkg/good/doc.go: package good's doc comment names [Phantom], which does not exist",
			"pkg/good/doc.go: package good's doc comment names Ghost (listed with names that exist), which does not exist",
		} {
			assert.Contains(t, got, want)
		}
		assert.Len(t, fs, 7, "the names that exist, other packages' and prose are not reported:%s", got)
	})
	t.Run("layout", func(t *testing.T) {
		fs, err := checkLayout(m)
		require.NoError(t, err)
		require.Len(t, fs, 2, list(fs))
		assert.Equal(t, "README.md", fs[0].File)
		assert.Equal(t, "the layout misses these package directories; add a line `dir/  what it is` for each:\n\tpkg/forgotten/", fs[0].Message,
			"a directory with only tests is not a package to list")
		assert.Equal(t, "the layout lists directories that do not exist:\n\tpkg/moved/", fs[1].Message)
	})
	t.Run("doc.go", func(t *testing.T) {
		fs := checkDocFiles(m)
		got := list(fs)
		assert.Contains(t, got, "pkg/forgotten/forgotten.go: carries package forgotten's comment; move it into pkg/forgotten/doc.go")
		assert.Contains(t, got, "pkg/forgotten/doc.go: is missing or has no package comment: package forgotten must say its one job")
		assert.Len(t, fs, 2, "pkg/good's doc.go holds its comment and good.go has none:%s", got)
	})
	t.Run("links", func(t *testing.T) {
		fs, err := checkLinks(m)
		require.NoError(t, err)
		got := list(fs)
		for _, want := range []string{
			"README.md: link docs/missing.md points at docs/missing.md, which does not exist",
			"README.md: link docs/guide.md#no-such-heading: guide.md has no heading or anchor #no-such-heading",
			"README.md: link #nowhere: README.md has no heading or anchor #nowhere",
			"docs/guide.md: link ../pkg/gone/doc.go points at ../pkg/gone/doc.go, which does not exist",
			"docs/guide.md: link [ref] points at ../notes.md, which does not exist",
			"pkg/good/doc.go: package good's doc comment names docs/missing-notes.md, which does not exist",
			"docs/guide.md: `pkg/good.Thing.Gone` names an identifier package good does not declare",
			"docs/guide.md: `pkg/good/moved.go` names a path that does not exist",
		} {
			if strings.Contains(want, "[ref]") {
				want = "docs/guide.md: link ../notes.md points at ../notes.md, which does not exist"
			}
			assert.Contains(t, got, want)
		}
		assert.Len(t, fs, 8, "links inside code, outside URLs and existing targets and anchors are not reported:%s", got)
	})
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Batches: one path":                                              "batches-one-path",
		"A secured deployment, start to finish":                          "a-secured-deployment-start-to-finish",
		"`ss_dead_letter`: dead letters (migration 3)":                   "ss_dead_letter-dead-letters-migration-3",
		"Recovering what only the statement knows (`--publish-missing`)": "recovering-what-only-the-statement-knows---publish-missing",
		"Shouqianba upay (`SQB`)":                                        "shouqianba-upay-sqb",
		"对账单 WeChat":                                                     "对账单-wechat",
	} {
		assert.Equal(t, want, slug(heading), heading)
	}
}
