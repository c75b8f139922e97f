package cliutil

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	return &cli.App{
		Name: "t",
		Commands: []*cli.Command{
			{Name: "ok", Action: func(*cli.Context) error { return nil }},
			{Name: "soon", Action: func(c *cli.Context) error { return NotYet(c, "Issue X") }},
			{Name: "fail", Action: func(*cli.Context) error { return Exitf(7, "boom %d", 1) }},
			{Name: "usage", Action: func(*cli.Context) error { return Usagef("bad -n") }},
			{Name: "plain", Action: func(*cli.Context) error { return errors.New("plain error") }},
			{Name: "exiter", Action: func(*cli.Context) error { return cli.Exit("exit coder", 5) }},
		},
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		errFrag string
		outFrag string
	}{
		{[]string{"t", "ok"}, 0, "", ""},
		{[]string{"t", "soon"}, 1, `t soon: not implemented yet (arrives with "Issue X")`, ""},
		{[]string{"t", "fail"}, 7, "t: boom 1", ""},
		{[]string{"t", "usage"}, 2, "bad -n", ""},
		{[]string{"t", "plain"}, 2, "plain error", ""},
		{[]string{"t", "exiter"}, 5, "exit coder", ""},
		{[]string{"t", "--nope"}, 2, "flag provided but not defined: -nope", ""},
		{[]string{"t", "--version"}, 0, "", "t version "},
		{[]string{"t", "--help"}, 0, "", "COMMANDS"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Run(context.Background(), testApp(), tt.args, &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.errFrag) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.errFrag)
			}
			if !strings.Contains(out.String(), tt.outFrag) {
				t.Errorf("stdout %q lacks %q", out.String(), tt.outFrag)
			}
		})
	}
}
