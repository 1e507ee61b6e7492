package doccheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// finding is one drift found: where, and what is wrong.
type finding struct {
	File    string // slash-separated, relative to the module root
	Message string
}

func (f finding) String() string { return f.File + ": " + f.Message }

// pkgInfo is what a directory's non-test Go files declare.
type pkgInfo struct {
	Dir      string // slash-separated, relative to the root ("." for the root)
	Name     string
	Files    []*ast.File
	Names    map[string]bool            // top-level declarations
	Members  map[string]map[string]bool // type name -> methods, fields, interface methods
	Embeds   map[string][]string        // type name -> embedded types of this package
	Foreign  map[string]bool            // types embedding a type of another package
	Filename map[*ast.File]string       // file -> slash path relative to the root
}

// module is every package of the tree under Root.
type module struct {
	Root   string
	Pkgs   []*pkgInfo
	ByName map[string][]*pkgInfo
}

// skipDir reports whether the walk leaves a directory out: hidden ones,
// testdata, and nested modules.
func skipDir(root, path string, d fs.DirEntry) bool {
	name := d.Name()
	if path == root {
		return false
	}
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// loadModule parses the non-test Go files of every directory under root.
func loadModule(root string) (*module, error) {
	m := &module{Root: root, ByName: map[string][]*pkgInfo{}}
	fset := token.NewFileSet()
	byDir := map[string]*pkgInfo{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(root, path, d) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		p := byDir[rel]
		if p == nil {
			p = &pkgInfo{
				Dir: rel, Name: f.Name.Name, Names: map[string]bool{}, Members: map[string]map[string]bool{},
				Embeds: map[string][]string{}, Foreign: map[string]bool{}, Filename: map[*ast.File]string{},
			}
			byDir[rel] = p
			m.Pkgs = append(m.Pkgs, p)
		}
		relFile, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		p.Files = append(p.Files, f)
		p.Filename[f] = filepath.ToSlash(relFile)
		p.declare(f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range m.Pkgs {
		m.ByName[p.Name] = append(m.ByName[p.Name], p)
	}
	return m, nil
}

func (p *pkgInfo) member(typ, name string) {
	if p.Members[typ] == nil {
		p.Members[typ] = map[string]bool{}
	}
	p.Members[typ][name] = true
}

// declare records f's top-level names, methods, fields and embeddings.
func (p *pkgInfo) declare(f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				p.Names[d.Name.Name] = true
				continue
			}
			if typ := receiverType(d.Recv.List[0].Type); typ != "" {
				p.member(typ, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.Names[n.Name] = true
					}
				case *ast.TypeSpec:
					p.Names[s.Name.Name] = true
					p.typeMembers(s.Name.Name, s.Type)
				}
			}
		}
	}
}

// typeMembers records a struct's fields and an interface's methods.
func (p *pkgInfo) typeMembers(typ string, expr ast.Expr) {
	var fields *ast.FieldList
	switch t := expr.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, fld := range fields.List {
		if len(fld.Names) > 0 {
			for _, n := range fld.Names {
				p.member(typ, n.Name)
			}
			continue
		}
		// Embedded: a type of this package, or of another.
		switch e := stripPointer(fld.Type).(type) {
		case *ast.Ident:
			p.member(typ, e.Name)
			p.Embeds[typ] = append(p.Embeds[typ], e.Name)
		case *ast.SelectorExpr:
			p.member(typ, e.Sel.Name)
			p.Foreign[typ] = true
		default:
			p.Foreign[typ] = true
		}
	}
}

func stripPointer(e ast.Expr) ast.Expr {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		default:
			return e
		}
	}
}

func receiverType(e ast.Expr) string {
	if id, ok := stripPointer(e).(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// hasMember reports whether typ has member name, promoted ones included;
// a type embedding another package's type accepts any member.
func (p *pkgInfo) hasMember(typ, name string, seen map[string]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	if p.Members[typ][name] || p.Foreign[typ] {
		return true
	}
	for _, e := range p.Embeds[typ] {
		if p.hasMember(e, name, seen) {
			return true
		}
	}
	return false
}

// isType reports whether the package declares typ as a type (one with
// members or declared by a TypeSpec).
func (p *pkgInfo) isType(typ string) bool {
	if !p.Names[typ] {
		return false
	}
	for _, f := range p.Files {
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if s.(*ast.TypeSpec).Name.Name == typ {
						return true
					}
				}
			}
		}
	}
	return false
}

var (
	// qualifiedRE matches pkg.Name and pkg.Type.Member, pkg lower case,
	// optionally after a path (internal/metrics.Settlement).
	qualifiedRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])(?:[a-z][a-z0-9_]*/)*([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)
	// typeMemberRE matches Type.Member.
	typeMemberRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([A-Z][A-Za-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)`)
	// backquotedRE matches a backquoted Go name, possibly Type.Member.
	backquotedRE = regexp.MustCompile("`([A-Z][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?`")
	// docLinkRE matches a Go doc link: [Name], [Type.Member], [pkg.Name].
	docLinkRE = regexp.MustCompile(`\[(\*?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2})\](?:[^(]|$)`)
	// nameListRE matches a parenthesised list of two or more bare names:
	// "(Check, Balances, Orders)", "(Reconcile and Checks)".
	nameListRE = regexp.MustCompile(`\(((?:[A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)?)(?:(?:,\s*|,?\s+(?:and|or)\s+)(?:[A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)?))+)\)`)
	nameSepRE  = regexp.MustCompile(`,\s*|,?\s+(?:and|or)\s+`)
)

// resolve reports whether name (and member, when not empty) exists in one
// of pkgs.
func resolve(pkgs []*pkgInfo, name, member string) bool {
	for _, p := range pkgs {
		if !p.Names[name] {
			continue
		}
		if member == "" || p.hasMember(name, member, map[string]bool{}) {
			return true
		}
	}
	return false
}

func hasLower(s string) bool { return strings.IndexFunc(s, unicode.IsLower) >= 0 }

// checkIdentifiers reports the names package doc comments give that do
// not exist (see the package doc for the rule).
func checkIdentifiers(m *module) []finding {
	var out []finding
	for _, p := range m.Pkgs {
		self := []*pkgInfo{p}
		for _, f := range p.Files {
			if f.Doc == nil {
				continue
			}
			file := p.Filename[f]
			text := f.Doc.Text()
			report := func(ref string) {
				out = append(out, finding{file, fmt.Sprintf("package %s's doc comment names %s, which does not exist", p.Name, ref)})
			}
			seen := map[string]bool{}
			once := func(ref string) bool {
				if seen[ref] {
					return false
				}
				seen[ref] = true
				return true
			}
			for _, sm := range qualifiedRE.FindAllStringSubmatch(text, -1) {
				qual, name, member := sm[1], sm[2], sm[3]
				var pkgs []*pkgInfo
				switch {
				case qual == p.Name:
					pkgs = self
				case m.ByName[qual] != nil && qual != "main":
					pkgs = m.ByName[qual]
				default:
					continue // not a package of the module: the standard library, or prose
				}
				ref := qual + "." + name
				if member != "" {
					ref += "." + member
				}
				ok := resolve(pkgs, name, member)
				if !ok && member != "" && resolve(pkgs, name, "") {
					// pkg.Name followed by a sentence's next word ("…
					// settlement.Reconcile. Then …") is not a member.
					ok = !isTypeIn(pkgs, name)
				}
				if !ok && once(ref) {
					report(ref)
				}
			}
			for _, sm := range typeMemberRE.FindAllStringSubmatch(text, -1) {
				typ, member := sm[1], sm[2]
				if !p.isType(typ) {
					continue // not a type of the package: prose (REFUND.SUCCESS)
				}
				if !p.hasMember(typ, member, map[string]bool{}) && once(typ+"."+member) {
					report(typ + "." + member)
				}
			}
			for _, sm := range docLinkRE.FindAllStringSubmatch(text, -1) {
				ref := strings.TrimPrefix(sm[1], "*")
				parts := strings.Split(ref, ".")
				var ok bool
				switch {
				case len(parts) == 1:
					ok = resolve(self, parts[0], "")
				case len(parts) == 2 && resolve(self, parts[0], ""):
					ok = resolve(self, parts[0], parts[1])
				case m.ByName[parts[0]] != nil && parts[0] != "main":
					member := ""
					if len(parts) == 3 {
						member = parts[2]
					}
					ok = resolve(m.ByName[parts[0]], parts[1], member)
				case parts[0] == p.Name:
					ok = false
				default:
					ok = true // another module's or the standard library's
				}
				if !ok && once(ref) {
					report("[" + ref + "]")
				}
			}
			for _, sm := range nameListRE.FindAllStringSubmatch(text, -1) {
				names := nameSepRE.Split(sm[1], -1)
				known := 0
				for _, n := range names {
					typ, member, _ := strings.Cut(n, ".")
					if resolve(self, typ, member) {
						known++
					}
				}
				if known == 0 {
					continue // prose, not names of this package
				}
				// A bare name may be a member of a type the list names:
				// "(Main.Start and Close)", "(Store, Acquire)".
				var listed []string
				for _, n := range names {
					if typ, _, ok := strings.Cut(n, "."); ok || p.isType(typ) {
						listed = append(listed, typ)
					}
				}
				memberOfListed := func(name string) bool {
					for _, typ := range listed {
						if p.hasMember(typ, name, map[string]bool{}) {
							return true
						}
					}
					return false
				}
				for _, n := range names {
					typ, member, _ := strings.Cut(n, ".")
					if hasLower(typ) && !resolve(self, typ, member) && (member != "" || !memberOfListed(typ)) && once(n) {
						report(n + " (listed with names that exist)")
					}
				}
			}
			for _, sm := range backquotedRE.FindAllStringSubmatch(text, -1) {
				name, member := sm[1], sm[2]
				if !hasLower(name) {
					continue // SUCCESS, CNY: values, not names
				}
				ref := name
				if member != "" {
					ref += "." + member
				}
				if !resolve(self, name, member) && once(ref) {
					report("`" + ref + "`")
				}
			}
		}
	}
	return out
}

func isTypeIn(pkgs []*pkgInfo, name string) bool {
	for _, p := range pkgs {
		if p.isType(name) {
			return true
		}
	}
	return false
}

// packageDirs lists the directories that must be in the README's layout:
// those under cmd/, internal/ and pkg/, and config and schema, with a
// non-test .go file.
func packageDirs(m *module) []string {
	var out []string
	for _, p := range m.Pkgs {
		d := p.Dir
		if d == "config" || d == "schema" || strings.HasPrefix(d, "config/") || strings.HasPrefix(d, "schema/") ||
			strings.HasPrefix(d, "cmd/") || strings.HasPrefix(d, "internal/") || strings.HasPrefix(d, "pkg/") {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// layoutDirs reads the directories the first code block under "## Layout"
// lists: each line whose first field ends in a slash.
func layoutDirs(readme string) ([]string, error) {
	data, err := os.ReadFile(readme)
	if err != nil {
		return nil, err
	}
	var dirs []string
	inSection, inBlock, found := false, false, false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			inSection = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == "Layout"
		case inSection && strings.HasPrefix(line, "```"):
			if inBlock {
				return dirs, nil
			}
			inBlock, found = true, true
		case inBlock:
			fields := strings.Fields(line)
			if len(fields) > 0 && strings.HasSuffix(fields[0], "/") {
				dirs = append(dirs, strings.TrimSuffix(fields[0], "/"))
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%s has no code block under \"## Layout\"", readme)
	}
	return dirs, sc.Err()
}

// checkLayout reports the package directories README.md's layout misses
// and the directories it lists that do not exist.
func checkLayout(m *module) ([]finding, error) {
	listed, err := layoutDirs(filepath.Join(m.Root, "README.md"))
	if err != nil {
		return nil, err
	}
	var missing, absent []string
	for _, d := range packageDirs(m) {
		if !slices.Contains(listed, d) {
			missing = append(missing, d)
		}
	}
	for _, d := range listed {
		if st, err := os.Stat(filepath.Join(m.Root, filepath.FromSlash(d))); err != nil || !st.IsDir() {
			absent = append(absent, d)
		}
	}
	var out []finding
	if len(missing) > 0 {
		out = append(out, finding{"README.md", "the layout misses these package directories; add a line `dir/  what it is` for each:\n\t" +
			strings.Join(missing, "/\n\t") + "/"})
	}
	if len(absent) > 0 {
		out = append(out, finding{"README.md", "the layout lists directories that do not exist:\n\t" + strings.Join(absent, "/\n\t") + "/"})
	}
	return out, nil
}

var (
	fenceRE    = regexp.MustCompile("(?s)(?m)^\\s*(```|~~~).*?^\\s*(```|~~~)[^\\n]*$")
	codeSpanRE = regexp.MustCompile("`[^`\\n]*`")
	linkRE     = regexp.MustCompile(`\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE   = regexp.MustCompile(`(?m)^ {0,3}\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	schemeRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	anchorRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	headingRE  = regexp.MustCompile(`(?m)^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$`)
	// codePathRE matches a repository path in a Markdown code span:
	// `internal/ops/statement.go`, `pkg/settlement.Service.SettleBatch`.
	codePathRE = regexp.MustCompile("`((?:cmd|config|schema|pkg|internal|docs|deploy|scripts|bench)/[^`\\s]*)`")
	// dirIdentRE splits a path that names a package's identifier.
	dirIdentRE = regexp.MustCompile(`^([A-Za-z0-9_/-]+)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?$`)
	// docPathRE matches a repository path in a doc comment.
	docPathRE = regexp.MustCompile(`(?:^|[\s("'\x60])((?:cmd|config|schema|pkg|internal|docs|deploy|scripts|bench)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`)
)

// stripCode removes fenced blocks and code spans, keeping line breaks.
func stripCode(s string) string {
	s = fenceRE.ReplaceAllStringFunc(s, func(b string) string { return strings.Repeat("\n", strings.Count(b, "\n")) })
	return codeSpanRE.ReplaceAllString(s, "")
}

// slug is GitHub's anchor for a heading: lower case, only letters, digits,
// spaces, hyphens and underscores kept, spaces turned into hyphens.
func slug(heading string) string {
	heading = codeSpanRE.ReplaceAllStringFunc(heading, func(c string) string { return strings.Trim(c, "`") })
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file: its headings' slugs
// (repeated ones numbered as GitHub does) and its <a id> / <a name>.
func anchors(data string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	for _, sm := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(data, ""), -1) {
		s := slug(sm[1])
		if n := count[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		count[s]++
	}
	for _, sm := range anchorRE.FindAllStringSubmatch(data, -1) {
		out[sm[1]] = true
	}
	return out
}

// markdownFiles are README.md and docs/*.md.
func markdownFiles(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...), nil
}

// checkLinks reports the relative links of README.md and docs/*.md that
// point at nothing, and the repository paths in package doc comments that
// do not exist.
func checkLinks(m *module) ([]finding, error) {
	files, err := markdownFiles(m.Root)
	if err != nil {
		return nil, err
	}
	var out []finding
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchorCache[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchorCache[path] = anchors(string(data))
		return anchorCache[path], nil
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(m.Root, file)
		rel = filepath.ToSlash(rel)
		for _, sm := range codePathRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(string(data), ""), -1) {
			if msg := checkCodePath(m, sm[1]); msg != "" {
				out = append(out, finding{rel, msg})
			}
		}
		text := stripCode(string(data))
		var targets []string
		for _, sm := range linkRE.FindAllStringSubmatch(text, -1) {
			targets = append(targets, sm[1])
		}
		for _, sm := range refDefRE.FindAllStringSubmatch(text, -1) {
			targets = append(targets, sm[1])
		}
		for _, target := range targets {
			if schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
				continue // an outside URL
			}
			pathPart, frag, _ := strings.Cut(target, "#")
			p, err := url.PathUnescape(pathPart)
			if err != nil {
				out = append(out, finding{rel, fmt.Sprintf("link %s: %v", target, err)})
				continue
			}
			dest := file
			if p != "" {
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(p))
				if _, err := os.Stat(dest); err != nil {
					out = append(out, finding{rel, fmt.Sprintf("link %s points at %s, which does not exist", target, p)})
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				return nil, err
			}
			if !a[frag] {
				out = append(out, finding{rel, fmt.Sprintf("link %s: %s has no heading or anchor #%s", target, filepath.Base(dest), frag)})
			}
		}
	}
	for _, p := range m.Pkgs {
		for _, f := range p.Files {
			if f.Doc == nil {
				continue
			}
			seen := map[string]bool{}
			for _, sm := range docPathRE.FindAllStringSubmatch(f.Doc.Text(), -1) {
				path := strings.TrimSuffix(sm[1], ".")
				if seen[path] {
					continue
				}
				seen[path] = true
				if checkCodePath(m, path) != "" {
					out = append(out, finding{p.Filename[f], fmt.Sprintf("package %s's doc comment names %s, which does not exist", p.Name, path)})
				}
			}
		}
	}
	return out, nil
}

// notFiles are repository paths the docs name in code spans that are not
// files of the repository on purpose, with why.
var notFiles = map[string]string{
	"config/consumer.yaml": "the default --config path, read when present",
}

// checkCodePath checks one path written in a Markdown code span: it must
// exist, or name an identifier of a package directory (dir.Name,
// dir.Type.Member), or be a pattern (braces, globs, placeholders), which is
// left alone. It returns what is wrong, or "".
func checkCodePath(m *module, path string) string {
	clean := strings.TrimSuffix(strings.SplitN(path, "#", 2)[0], "/")
	if strings.ContainsAny(clean, "{}*<>|()[]") {
		return ""
	}
	if _, ok := notFiles[clean]; ok {
		return ""
	}
	if _, err := os.Stat(filepath.Join(m.Root, filepath.FromSlash(clean))); err == nil {
		return ""
	}
	if sm := dirIdentRE.FindStringSubmatch(clean); sm != nil {
		for _, p := range m.Pkgs {
			if p.Dir == sm[1] {
				if resolve([]*pkgInfo{p}, sm[2], sm[3]) {
					return ""
				}
				return fmt.Sprintf("`%s` names an identifier package %s does not declare", path, p.Name)
			}
		}
	}
	return fmt.Sprintf("`%s` names a path that does not exist", path)
}

// checkDocFiles reports each package without a doc.go holding its package
// comment, and each other non-test file that carries a package comment.
func checkDocFiles(m *module) []finding {
	var fs []finding
	for _, p := range m.Pkgs {
		docGo := p.Dir + "/doc.go"
		if p.Dir == "." {
			docGo = "doc.go"
		}
		var haveDoc bool
		for _, f := range p.Files {
			name := p.Filename[f]
			switch {
			case name == docGo && f.Doc != nil:
				haveDoc = true
			case name != docGo && f.Doc != nil:
				fs = append(fs, finding{File: name, Message: fmt.Sprintf(
					"carries package %s's comment; move it into %s, the one place that says the package's job", p.Name, docGo)})
			}
		}
		if !haveDoc {
			fs = append(fs, finding{File: docGo, Message: fmt.Sprintf(
				"is missing or has no package comment: package %s must say its one job (and what it must never do) there", p.Name)})
		}
	}
	return fs
}
