// Package identity holds what internal/testapp reports about a process,
// shared by the program and the tests that read its output.
package identity

import "github.com/dynrt/dynrt/lib/session"

// Report is what `testapp identity` prints, one JSON object per process;
// the tests that launch testapp decode it.
type Report struct {
	Rank       uint32                       `json:"rank"`
	UID        uint64                       `json:"uid"`
	Job        string                       `json:"job"`
	App        string                       `json:"app"`
	Node       string                       `json:"node"`
	DVM        string                       `json:"dvm"`
	Size       int                          `json:"size"`
	LocalRank  int                          `json:"local_rank"`
	LocalPeers []uint32                     `json:"local_peers"`
	Env        map[string]string            `json:"env"`
	Names      []string                     `json:"names"`
	Sets       map[string]session.Pset      `json:"sets"`
	Info       map[string]map[string]string `json:"info"`
}
