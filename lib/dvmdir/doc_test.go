package dvmdir

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/wire.md documents the rendezvous file for clients in other
// languages: its key table must list exactly the keys Write stores.
func TestWireDocListsRendezvousKeys(t *testing.T) {
	raw, err := os.ReadFile("../../docs/wire.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "## Finding a DVM")
	if i < 0 {
		t.Fatal("docs/wire.md has no section \"Finding a DVM\"")
	}
	sec := doc[i:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(sec, -1) {
		documented = append(documented, m[1])
	}
	var stored []string
	ty := reflect.TypeOf(Info{})
	for f := range ty.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "-" {
			stored = append(stored, name)
		}
	}
	slices.Sort(documented)
	slices.Sort(stored)
	if !slices.Equal(documented, stored) {
		t.Errorf("docs/wire.md documents the rendezvous keys %v, Info stores %v", documented, stored)
	}
}
