// Package doccheck holds the tests that fail when the documentation drifts
// from the code. It has no production code: its tests read the module's
// sources and Markdown files and report, each with the file and what to
// fix:
//
//   - identifiers a package doc comment names that do not exist. Every
//     non-test file's package comment (doc.go's and any other) is read
//     with go/parser. A name in the form pkg.Name or pkg.Type.Member is
//     checked when pkg is the package's own name or the name of a package
//     of the module (other qualifiers, the standard library's included,
//     are left alone); Type.Member when Type is a type the package
//     declares; and a backquoted name that starts with an upper-case
//     letter and has a lower-case one (a type, or Type.Member; not a value
//     such as `SUCCESS`) must be declared by the package itself; so must
//     every name of a parenthesised list of bare names, such as
//     "(Reconcile, Balances, Orders)", once one of them is; and a Go doc
//     link (a name, Type.Member or pkg.Name in square brackets) must
//     resolve. Names are
//     declarations of non-test files: functions, types, variables and
//     constants, and a type's methods, fields and interface methods,
//     promoted ones included; a type embedding one of another package
//     accepts any member;
//   - package directories the README's layout misses: every directory
//     under cmd/, internal/ and pkg/, and config and schema, that holds a
//     non-test .go file (testdata and nested modules aside) must start a
//     line of the first code block under "## Layout", written dir/; and
//     every directory that block lists must exist;
//   - links to files that are not there: every relative link of README.md
//     and docs/*.md (inline links and reference definitions, outside code)
//     must name an existing file or directory, and its #anchor, when the
//     target is Markdown, a heading (GitHub's slugs) or an <a id>; a
//     repository path those files write as code (a code span starting
//     cmd/, internal/, pkg/, docs/, …) must exist, or name an identifier
//     its package declares (pkg/settlement.Service.SettleBatch), unless it
//     is a pattern or listed in notFiles with its reason; every
//     repository path a package doc comment names (a word starting cmd/,
//     config/, schema/, pkg/, internal/, docs/, deploy/, scripts/ or
//     bench/) must exist;
//   - a package whose one job is not said in one place: every package
//     directory must hold a doc.go carrying the package comment, and no
//     other non-test file of it may carry one (two package comments are
//     merged by go doc into one the reader cannot find the source of).
//
// Each rule is also run on a small fixture in testdata/fixture holding one
// bad identifier, one missing package directory and broken links, and
// must report each of them, so that a rule that stops finding anything
// fails too.
package doccheck
