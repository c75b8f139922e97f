package wire

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The second half of docs/wire.md (kinds, error codes, value lists and
// field tables) is generated from the source by this test so that it can
// never drift from the code: the test fails when the file differs, and
// `go test ./wire -run Docs -update` rewrites it.

const (
	docsPath = "../docs/wire.md"
	genBegin = "<!-- BEGIN GENERATED (go test ./wire -run Docs -update) -->"
	genEnd   = "<!-- END GENERATED -->"
)

// docFiles lists the files whose types and values are documented, with a
// section title, in document order.
var docFiles = []struct{ file, title string }{
	{"envelope.go", "Envelope"},
	{"errors.go", "Errors"},
	{"hello.go", "Handshake"},
	{"types.go", "Shared types"},
	{"msg_session.go", "Session"},
	{"msg_pset.go", "Process sets"},
	{"msg_rc.go", "Resource changes"},
	{"msg_kv.go", "Key-value store and fences"},
	{"msg_pubsub.go", "Publish / lookup"},
	{"msg_event.go", "Events"},
	{"msg_job.go", "Jobs"},
	{"msg_node.go", "Nodes and daemons"},
	{"msg_relay.go", "Relays"},
	{"msg_pmi.go", "PMI service"},
	{"msg_tool.go", "DVM (tools)"},
}

func TestDocsUpToDate(t *testing.T) {
	gen := generateDocs(t)
	// Every key and value has a meaning: a comment on its line or above it.
	for _, l := range strings.Split(gen, "\n") {
		if strings.HasSuffix(l, "|  |") {
			t.Errorf("undocumented in docs/wire.md (add a comment in the source): %s", l)
		}
	}
	raw, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, genBegin), strings.Index(doc, genEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated-section markers", docsPath)
	}
	updated := doc[:i+len(genBegin)] + "\n" + gen + doc[j:]
	if updated == doc {
		return
	}
	if *update {
		if err := os.WriteFile(docsPath, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date with the source; run go test ./wire -run Docs -update", docsPath)
}

// TestDocsKeepEveryParagraph: every paragraph of a message type's doc
// comment reaches wire.md. Only the first did once, so rules written in a
// later paragraph (FenceReq's participants and instances, PsetOpReq's
// split) were in the Go source but missing from the page a client in
// another language is written from.
func TestDocsKeepEveryParagraph(t *testing.T) {
	gen := generateDocs(t)
	fset := token.NewFileSet()
	checked := 0
	for _, df := range docFiles {
		f, err := parser.ParseFile(fset, df.file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				doc := gd.Doc
				if ts.Doc != nil {
					doc = ts.Doc
				}
				if !strings.Contains(gen, "\n### "+ts.Name.Name+"\n") || doc == nil {
					continue // not a documented message type
				}
				for _, p := range strings.Split(strings.TrimSpace(doc.Text()), "\n\n") {
					p = strings.ReplaceAll(strings.TrimSpace(p), "\n", " ")
					checked++
					if !strings.Contains(gen, p) {
						t.Errorf("%s: a paragraph of %s's comment is missing from docs/wire.md: %q", df.file, ts.Name.Name, p)
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d paragraphs: the walk over the message types is broken", checked)
	}
}

func generateDocs(t *testing.T) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	// A worked example, computed from the encoder itself.
	body, err := Marshal(&Ping{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	req := AppendFrame(nil, AppendEnvelope(nil, &Envelope{V: 1, ID: 3, Kind: KindPing, Body: body}))
	rep := AppendFrame(nil, AppendEnvelope(nil, &Envelope{V: 1, ID: 3, Kind: KindPing, Err: &Error{Code: CodeBusy, Msg: "later"}}))
	w("\n## Worked example\n\n")
	w("A `ping` request with id 3 and body `{\"seq\": 1}`, as sent by the dialing side:\n\n```\n%s```\n\n", hexLines(req))
	w("which reads: length %d; map of 4; `\"v\"` 1; `\"id\"` 3; `\"kind\"` `\"ping\"`; `\"body\"` map of 1 `{\"seq\": 1}`.\n", len(req)-HeaderSize)
	w("An error reply to it (code `busy`, message `later`):\n\n```\n%s```\n", hexLines(rep))

	w("\n## Message kinds\n\n")
	w("Request bodies and reply bodies name the types described below; \"—\" means no body.\n")
	w("Events are sent with id 0 and get no reply. In the direction column, a→b→c means that a sends the\n")
	w("request to b, which relays it to c (a client's requests for the master go through its daemon: the\n")
	w("master does not admit clients); a/b stands for either role.\n\n")
	w("| kind | direction | body | reply |\n|---|---|---|---|\n")
	for _, k := range Catalogue() {
		reply := "—"
		if k.Event {
			reply = "(event)"
		} else if k.Reply != nil {
			reply = typeLink(reflect.TypeOf(k.Reply).Elem().Name())
		}
		w("| `%s` | %s | %s | %s |\n", k.Kind, k.Dir, typeLink(reflect.TypeOf(k.Req).Elem().Name()), reply)
	}

	fset := token.NewFileSet()
	for _, df := range docFiles {
		f, err := parser.ParseFile(fset, df.file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		w("\n## Reference: %s\n", df.title)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.CONST:
				writeConsts(w, gd)
			case token.TYPE:
				for _, s := range gd.Specs {
					writeType(w, gd, s.(*ast.TypeSpec))
				}
			}
		}
	}
	return b.String()
}

func typeLink(name string) string {
	return fmt.Sprintf("[%s](#%s)", name, strings.ToLower(name))
}

// writeConsts documents a block of exported string constants (kinds are
// already in the kinds table).
func writeConsts(w func(string, ...any), gd *ast.GenDecl) {
	type row struct{ name, val, doc string }
	var rows []row
	for _, s := range gd.Specs {
		vs := s.(*ast.ValueSpec)
		for i, n := range vs.Names {
			if !n.IsExported() || strings.HasPrefix(n.Name, "Kind") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok {
				continue
			}
			val := lit.Value
			if lit.Kind == token.STRING {
				val, _ = strconv.Unquote(lit.Value)
				val = strconv.Quote(val)
			}
			rows = append(rows, row{n.Name, val, fieldDoc(n.Name, vs.Comment, vs.Doc)})
		}
	}
	if len(rows) == 0 {
		return
	}
	w("\n%s\n\n| name | value | meaning |\n|---|---|---|\n", firstLine(gd.Doc, "Values."))
	for _, r := range rows {
		w("| %s | `%s` | %s |\n", r.name, r.val, r.doc)
	}
}

func writeType(w func(string, ...any), gd *ast.GenDecl, ts *ast.TypeSpec) {
	st, ok := ts.Type.(*ast.StructType)
	if !ok || !ts.Name.IsExported() {
		return
	}
	var rows [][3]string
	for _, f := range st.Fields.List {
		if f.Tag == nil || len(f.Names) == 0 {
			continue
		}
		tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("msgpack")
		key, _, _ := strings.Cut(tag, ",")
		if key == "" || key == "-" {
			continue
		}
		rows = append(rows, [3]string{key, wireType(f.Type), fieldDoc(f.Names[0].Name, f.Comment, f.Doc)})
	}
	if len(rows) == 0 {
		return
	}
	doc := gd.Doc
	if ts.Doc != nil {
		doc = ts.Doc
	}
	w("\n### %s\n\n%s\n\n| key | type | meaning |\n|---|---|---|\n", ts.Name.Name, paragraphs(doc))
	for _, r := range rows {
		w("| `%s` | %s | %s |\n", r[0], r[1], r[2])
	}
}

// wireType names the msgpack shape of a Go field type.
func wireType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		switch x.Name {
		case "string", "Code":
			return "str"
		case "bool":
			return "bool"
		case "int", "int64":
			return "int"
		case "uint8", "uint32", "uint64":
			return "uint"
		case "RankRanges":
			return "[ranks](#rankranges)"
		}
		return typeLink(x.Name)
	case *ast.StarExpr:
		return wireType(x.X) + " (optional)"
	case *ast.ArrayType:
		if id, ok := x.Elt.(*ast.Ident); ok && id.Name == "byte" {
			return "bin"
		}
		return "array of " + wireType(x.Elt)
	case *ast.MapType:
		return "map " + wireType(x.Key) + "→" + wireType(x.Value)
	case *ast.SelectorExpr:
		if x.Sel.Name == "RawMessage" {
			return "any msgpack value"
		}
	}
	return fmt.Sprintf("%T", e)
}

// fieldDoc is the meaning of a field or value: its line comment, else the
// comment above it in one line, without a leading "Name is" or "Name:".
func fieldDoc(name string, line, above *ast.CommentGroup) string {
	if line != nil {
		return comment(line)
	}
	s := strings.ReplaceAll(comment(above), "\n", " ")
	for _, p := range []string{name + " is ", name + ": "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

func comment(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.ReplaceAll(strings.TrimSpace(g.Text()), "|", "\\|")
}

// paragraphs is a doc comment as Markdown: every paragraph in one line,
// paragraphs separated by an empty line. All of them go to wire.md: a
// rule written in a later paragraph (who takes part in a fence, ...) is
// part of the protocol as much as the first sentence.
func paragraphs(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	paras := strings.Split(strings.TrimSpace(g.Text()), "\n\n")
	for i, p := range paras {
		paras[i] = strings.ReplaceAll(strings.TrimSpace(p), "\n", " ")
	}
	return strings.Join(paras, "\n\n")
}

func oneParagraph(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	para, _, _ := strings.Cut(strings.TrimSpace(g.Text()), "\n\n")
	return strings.ReplaceAll(para, "\n", " ")
}

func firstLine(g *ast.CommentGroup, def string) string {
	if g == nil {
		return def
	}
	return oneParagraph(g)
}
