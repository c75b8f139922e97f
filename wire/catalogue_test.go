package wire

import (
	"bytes"
	"encoding/hex"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files and the generated part of docs/wire.md")

func sortedNames(m map[string]any) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func TestCatalogueRoundTrip(t *testing.T) {
	for _, name := range sortedNames(samples()) {
		v := samples()[name]
		t.Run(name, func(t *testing.T) {
			b, err := Marshal(v)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := Unmarshal(b, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(got, v) {
				t.Fatalf("round trip changed the value:\n got %+v\nwant %+v", got, v)
			}
		})
	}
}

// hexLines renders bytes as lowercase hex, 32 bytes per line, so golden
// diffs stay readable.
func hexLines(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		n := min(32, len(b))
		sb.WriteString(hex.EncodeToString(b[:n]))
		sb.WriteByte('\n')
		b = b[n:]
	}
	return sb.String()
}

func TestCatalogueGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	all := samples()
	for _, name := range sortedNames(all) {
		b, err := Marshal(all[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := filepath.Join(dir, name+".hex")
		got := hexLines(b)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (run go test ./wire -run Golden -update to create it)", name, err)
			continue
		}
		if got != string(want) {
			t.Errorf("%s: encoding changed (a wire-visible change! run with -update only if intended)\n got:\n%s\nwant:\n%s", name, got, want)
		}
	}
	// no stale golden files for removed types
	files, _ := filepath.Glob(filepath.Join(dir, "*.hex"))
	for _, f := range files {
		if _, ok := all[strings.TrimSuffix(filepath.Base(f), ".hex")]; !ok && !*update {
			t.Errorf("stale golden file %s", f)
		}
	}
}

func TestEncodingDeterministic(t *testing.T) {
	for name, v := range samples() {
		first, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			again, _ := Marshal(v)
			if !bytes.Equal(first, again) {
				t.Fatalf("%s: two encodings differ", name)
			}
		}
	}
}

// catalogueSource parses the files that define wire-visible types.
func catalogueSource(t *testing.T) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	names, _ := filepath.Glob("*.go")
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// wireStructs returns the exported struct types that carry msgpack tags.
func wireStructs(t *testing.T) []string {
	var out []string
	for _, f := range catalogueSource(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				if fld.Tag != nil && strings.Contains(fld.Tag.Value, "msgpack:") {
					out = append(out, ts.Name.Name)
					break
				}
			}
			return true
		})
	}
	sort.Strings(out)
	return out
}

func TestSamplesComplete(t *testing.T) {
	all := samples()
	types := wireStructs(t)
	if len(types) < 60 {
		t.Fatalf("found only %d wire types; parser broken?", len(types))
	}
	for _, name := range types {
		v, ok := all[name]
		if !ok {
			t.Errorf("type %s has no sample in samples_test.go", name)
			continue
		}
		rv := reflect.ValueOf(v).Elem()
		if rv.Type().Name() != name {
			t.Errorf("sample %s has type %s", name, rv.Type().Name())
		}
		// Every field set, so the round trip and golden tests cover it.
		for i := 0; i < rv.NumField(); i++ {
			if rv.Field(i).IsZero() {
				t.Errorf("sample %s leaves field %s zero", name, rv.Type().Field(i).Name)
			}
		}
	}
	for name := range all {
		if !slices.Contains(types, name) {
			t.Errorf("sample %s is not a wire type", name)
		}
	}
}

// TestWireTypeRules walks every catalogue type and checks the rules that
// keep the encoding stable and language-neutral: every field has an
// explicit msgpack key, keys are unique within a struct, maps are only
// map[string]string (the only kind the encoder sorts) and there are no
// interface fields.
func TestWireTypeRules(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(path, typ.Elem())
		case reflect.Map:
			if typ.Key().Kind() != reflect.String || typ.Elem().Kind() != reflect.String {
				t.Errorf("%s: map type %s would not encode deterministically; use map[string]string", path, typ)
			}
		case reflect.Interface:
			t.Errorf("%s: interface field %s", path, typ)
		case reflect.Struct:
			if typ == reflect.TypeOf(RankRange{}) {
				return // encoded by RankRanges itself
			}
			keys := map[string]string{}
			for i := 0; i < typ.NumField(); i++ {
				f := typ.Field(i)
				tag := f.Tag.Get("msgpack")
				key, _, _ := strings.Cut(tag, ",")
				if key == "" || key == "-" {
					t.Errorf("%s.%s: no explicit msgpack key", typ.Name(), f.Name)
					continue
				}
				if other, dup := keys[key]; dup {
					t.Errorf("%s: key %q used by %s and %s", typ.Name(), key, other, f.Name)
				}
				keys[key] = f.Name
				walk(typ.Name()+"."+f.Name, f.Type)
			}
		}
	}
	for name, v := range samples() {
		walk(name, reflect.TypeOf(v).Elem())
	}
}

func TestCatalogueKinds(t *testing.T) {
	// every Kind* constant in the source is in the catalogue
	var consts []string
	for _, f := range catalogueSource(t) {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Kind") {
						consts = append(consts, n.Name)
					}
				}
			}
		}
	}
	cat := Catalogue()
	if len(consts) != len(cat) {
		t.Errorf("%d Kind constants in the source, %d catalogue entries", len(consts), len(cat))
	}
	all := samples()
	seen := map[string]bool{}
	for _, k := range cat {
		if seen[k.Kind] {
			t.Errorf("kind %q listed twice", k.Kind)
		}
		seen[k.Kind] = true
		if k.Req == nil {
			t.Errorf("%s: no request body type", k.Kind)
		}
		if k.Event && k.Reply != nil {
			t.Errorf("%s: events have no reply", k.Kind)
		}
		for _, body := range []any{k.Req, k.Reply} {
			if body == nil {
				continue
			}
			name := reflect.TypeOf(body).Elem().Name()
			if _, ok := all[name]; !ok {
				t.Errorf("%s: body type %s has no sample", k.Kind, name)
			}
		}
		if got, ok := LookupKind(k.Kind); !ok || got.Kind != k.Kind {
			t.Errorf("LookupKind(%q) failed", k.Kind)
		}
	}
	if _, ok := LookupKind("no.such"); ok {
		t.Error("LookupKind found an unknown kind")
	}
}

// TestEnvelopeFastPathMatchesMarshal: the hand-written envelope encoder
// must produce exactly what the generic encoder produces.
func TestEnvelopeFastPathMatchesMarshal(t *testing.T) {
	cases := []Envelope{
		{V: 1, ID: 1, Kind: "hello"},
		{V: 1, ID: 0, Kind: KindEvent, Body: []byte{0x80}},
		{V: 1, ID: 1 << 40, Kind: strings.Repeat("k", 40), Body: []byte{0xc0}},
		{V: 1, ID: 300, Kind: "x", Err: &Error{Code: CodeBusy, Msg: strings.Repeat("m", 300)}},
		{V: 127, ID: 70000, Kind: "", Body: []byte{0x01}, Err: &Error{Code: "", Msg: ""}},
	}
	for i, e := range cases {
		want, err := Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendEnvelope(nil, &e)
		if !bytes.Equal(got, want) {
			t.Errorf("case %d: fast path %x, generic %x", i, got, want)
		}
	}
}

// The docs promise that nil may stand for any field and means its zero
// value: decode a map with every key set to nil into every type.
func TestNilFieldsDecodeAsZero(t *testing.T) {
	for name, v := range samples() {
		typ := reflect.TypeOf(v).Elem()
		m := map[string]any{}
		for i := 0; i < typ.NumField(); i++ {
			key, _, _ := strings.Cut(typ.Field(i).Tag.Get("msgpack"), ",")
			m[key] = nil
		}
		b, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(typ)
		if err := Unmarshal(b, got.Interface()); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !got.Elem().IsZero() {
			t.Errorf("%s: nil fields decoded as %+v", name, got.Elem())
		}
	}
}

func TestKindSends(t *testing.T) {
	tests := []struct {
		dir      string
		from, to string
		want     bool
	}{
		{"client→daemon", RoleClient, RoleDaemon, true},
		{"client→daemon", RoleDaemon, RoleClient, false},
		{"client→daemon→master", RoleDaemon, RoleMaster, true},
		{"client→daemon→master", RoleClient, RoleMaster, false}, // relayed, not sent directly
		{"client→daemon→master, tool→master", RoleTool, RoleMaster, true},
		{"client/tool→master", RoleClient, RoleMaster, true},
		{"daemon→master/daemon", RoleDaemon, RoleDaemon, true},
		{"master→subscriber (daemon relays to clients)", RoleMaster, "subscriber", true},
		{"master→subscriber (daemon relays to clients)", RoleDaemon, RoleClient, false},
		{"either way", RoleTool, RoleMaster, true},
	}
	for _, tc := range tests {
		if got := (KindInfo{Dir: tc.dir}).Sends(tc.from, tc.to); got != tc.want {
			t.Errorf("%q: Sends(%s, %s) = %v, want %v", tc.dir, tc.from, tc.to, got, tc.want)
		}
	}
}

// An optional field (a pointer) tells "not given" from zero, as the docs
// say: absent and nil decode as nil (tested above), the zero value as a
// pointer to zero, so that a receiver can apply the field's documented
// default only when the field was not given (pset.get's ver: latest; 0 is
// version 0).
func TestOptionalFieldsZeroIsAValue(t *testing.T) {
	n := 0
	for name, v := range samples() {
		typ := reflect.TypeOf(v).Elem()
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.Type.Kind() != reflect.Pointer {
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
			var zero any
			switch f.Type.Elem().Kind() {
			case reflect.Struct:
				zero = map[string]any{}
			default:
				zero = reflect.Zero(f.Type.Elem()).Interface()
			}
			b, err := Marshal(map[string]any{key: zero})
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(typ)
			if err := Unmarshal(b, got.Interface()); err != nil {
				t.Errorf("%s.%s = %v: %v", name, f.Name, zero, err)
				continue
			}
			p := got.Elem().Field(i)
			if p.IsNil() || !p.Elem().IsZero() {
				t.Errorf("%s.%s: the zero value %v decoded as %v, want a pointer to zero", name, f.Name, zero, p)
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d optional fields checked", n)
	}
}
