package pmi

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// The PMI-1 spawn of pmi-wire.md §2.4: two executables, args with spaces
// and '=', one preput key, info keys.
const spawn1Example = `mcmd=spawn
nprocs=2
execname=./pmispawn
totspawns=2
spawnssofar=1
arg1=a b c
arg2=x=y
argcnt=2
preput_num=1
preput_key_0=PARENT_ROOT_PORT_NAME
preput_val_0=tag#0$connentry#0200A5B4$
info_num=2
info_key_0=wdir
info_val_0=/tmp
info_key_1=host
info_val_1=localhost
endcmd
mcmd=spawn
nprocs=1
execname=./pmispawn
totspawns=2
spawnssofar=2
arg1=second
argcnt=1
preput_num=1
preput_key_0=PARENT_ROOT_PORT_NAME
preput_val_0=tag#0$connentry#0200A5B4$
info_num=0
endcmd
`

var spawn1Want = &Spawn{
	Apps: []SpawnApp{
		{Cmd: "./pmispawn", Args: []string{"a b c", "x=y"}, MaxProcs: 2, Info: []Pair{{"wdir", "/tmp"}, {"host", "localhost"}}},
		{Cmd: "./pmispawn", Args: []string{"second"}, MaxProcs: 1, Info: []Pair{}},
	},
	Preput: []Pair{{"PARENT_ROOT_PORT_NAME", "tag#0$connentry#0200A5B4$"}},
}

// collect feeds a whole multi-line spawn to a collector.
func collect(t *testing.T, text string) (*Spawn, error) {
	t.Helper()
	var c SpawnCollector
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "mcmd=spawn" && !c.Active() {
			c.Begin()
			continue
		}
		done, err := c.Feed([]byte(line))
		if err != nil {
			return nil, err
		}
		if done {
			return c.Result()
		}
	}
	t.Fatal("spawn never completed")
	return nil, nil
}

func TestSpawnCollector(t *testing.T) {
	got, err := collect(t, spawn1Example)
	if err != nil || !reflect.DeepEqual(got, spawn1Want) {
		t.Fatalf("spawn = %+v, %v\nwant %+v", got, err, spawn1Want)
	}
	if got.Procs() != 3 {
		t.Errorf("Procs = %d", got.Procs())
	}
	bad := map[string]string{
		"no totspawns":      "mcmd=spawn\nnprocs=1\nexecname=a\nspawnssofar=1\nendcmd\n",
		"zero procs":        "mcmd=spawn\nnprocs=0\nexecname=a\ntotspawns=1\nspawnssofar=1\nendcmd\n",
		"missing arg":       "mcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=1\nspawnssofar=1\nargcnt=2\narg1=x\nendcmd\n",
		"missing preput":    "mcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=1\nspawnssofar=1\npreput_num=1\nendcmd\n",
		"no execname":       "mcmd=spawn\nnprocs=1\ntotspawns=1\nspawnssofar=1\nendcmd\n",
		"line without =":    "mcmd=spawn\nnprocs=1\nexecname=a\nbogus\ntotspawns=1\nspawnssofar=1\nendcmd\n",
		"segments reversed": "mcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=2\nspawnssofar=2\nendcmd\nmcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=2\nspawnssofar=1\nendcmd\n",
	}
	for name, text := range bad {
		if got, err := collect(t, text); err == nil {
			t.Errorf("%s: spawn = %+v, want an error", name, got)
		}
	}
	var c SpawnCollector
	if _, err := c.Feed([]byte("nprocs=1")); !errors.Is(err, wire.ErrState) {
		t.Errorf("Feed outside a segment: %v", err)
	}
}

func TestParseSpawn2(t *testing.T) {
	// pmi-wire.md §3.4, then a two-executable variant with args and info.
	c, err := ParseFrame([]byte("cmd=spawn;ncmds=1;preputcount=1;ppkey0=PARENT_ROOT_PORT_NAME;ppval0=fakeport;subcmd=./drv2;maxprocs=2;argc=0;infokeycount=0;"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSpawn2(&c)
	want := &Spawn{Apps: []SpawnApp{{Cmd: "./drv2", MaxProcs: 2}}, Preput: []Pair{{"PARENT_ROOT_PORT_NAME", "fakeport"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSpawn2 = %+v, %v; want %+v", got, err, want)
	}
	c, _ = ParseFrame([]byte("cmd=spawn;ncmds=2;preputcount=0;subcmd=a;maxprocs=1;argc=2;argv0=x y;argv1=k=v;infokeycount=1;infokey0=wdir;infoval0=/tmp;subcmd=b;maxprocs=3;argc=1;argv0=z;infokeycount=0;"))
	got, err = ParseSpawn2(&c)
	want = &Spawn{Apps: []SpawnApp{
		{Cmd: "a", Args: []string{"x y", "k=v"}, MaxProcs: 1, Info: []Pair{{"wdir", "/tmp"}}},
		{Cmd: "b", Args: []string{"z"}, MaxProcs: 3},
	}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSpawn2 = %+v, %v; want %+v", got, err, want)
	}
	for _, in := range []string{
		"cmd=spawn;ncmds=1;",
		"cmd=spawn;ncmds=2;subcmd=a;maxprocs=1;",
		"cmd=spawn;subcmd=a;maxprocs=0;",
		"cmd=spawn;subcmd=a;maxprocs=1;argc=1;",
		"cmd=spawn;preputcount=1;subcmd=a;maxprocs=1;",
		"cmd=spawn;subcmd=;maxprocs=1;",
		"cmd=spawn;ncmds=x;subcmd=a;maxprocs=1;",
		"cmd=kvs-fence;",
	} {
		c, err := ParseFrame([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ParseSpawn2(&c); err == nil {
			t.Errorf("ParseSpawn2(%q) = %+v, want an error", in, got)
		}
	}
}
