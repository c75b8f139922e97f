package daemon

import "github.com/dynrt/dynrt/wire"

// Wire additions of the session services (kv.go, events.go and the
// master's fence.go, kv.go) that the catalogue does not have yet. Like
// proto.go they embed the catalogue bodies, so a peer that knows only the
// catalogue still decodes them. The lead moves the fields into wire/.

// FenceBody is kv.fence as a daemon sends it to the master: the client's
// FenceReq with Local set to the entering ranks and Job to their job.
// Pending in wire: FenceReq.Job.
type FenceBody struct {
	wire.FenceReq
	Job string `msgpack:"j,omitempty"` // job of the ranks in Local (and of Procs entries without a job)
}

// FetchBody is kv.fetch with an optional key to wait for: the owner's
// daemon answers once the (single) owner has committed Key, so that a
// get with wait for a remote process needs no polling.
// Pending in wire: KVFetchReq.Key, .Wait and .TimeoutMS.
type FetchBody struct {
	wire.KVFetchReq
	Key       string `msgpack:"k,omitempty"`   // key to wait for
	Wait      bool   `msgpack:"w,omitempty"`   // wait until Key is committed
	TimeoutMS int64  `msgpack:"tmo,omitempty"` // with Wait: give up after this many ms (0 = no limit)
}

// KVGetBody is kv.get with a refresh flag: the daemon fetches a remote
// owner's data again instead of answering from its cache (PMIx's
// PMIX_GET_REFRESH_CACHE). Pending in wire: KVGetReq.Refresh.
type KVGetBody struct {
	wire.KVGetReq
	Refresh bool `msgpack:"rf,omitempty"` // bypass the cache of remote data
}
