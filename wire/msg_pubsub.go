package wire

// Pubsub family: publish/lookup/unpublish on the master's data server.

const (
	KindPublish   = "pub.publish"   // →daemon→master: PublishReq → empty
	KindLookup    = "pub.lookup"    // →daemon→master: LookupReq → LookupReply
	KindUnpublish = "pub.unpublish" // →daemon→master: UnpublishReq → empty
)

// Publish ranges.
const (
	RangeJob = "job" // visible to the publisher's job (default)
	RangeDVM = "dvm" // visible to every job of the DVM
)

// Publish persistences: how long a published key lives (PMIx's
// PMIX_PERSISTENCE). Whatever the persistence, an unpublish removes the
// key, and the end of a job removes the keys of its job range.
const (
	PersistDefault   = ""           // until unpublished (the publisher's daemon withdraws PMI and PMIx names at the job's end)
	PersistIndef     = "indef"      // until unpublished or the DVM ends
	PersistSession   = "session"    // as indef: the DVM is the session
	PersistApp       = "app"        // until the publisher's job ends
	PersistProc      = "proc"       // until the publishing process ends
	PersistFirstRead = "first-read" // removed by the first lookup that finds it
)

// PublishReq publishes keys; a key already published in the range gets
// ErrExists.
type PublishReq struct {
	Job     string `msgpack:"j,omitempty"`   // publisher's job
	Rank    uint32 `msgpack:"r,omitempty"`   // publisher's rank
	Range   string `msgpack:"rng,omitempty"` // RangeJob (default) or RangeDVM
	Data    []KV   `msgpack:"d,omitempty"`   // keys and values
	Persist string `msgpack:"per,omitempty"` // PersistIndef, PersistSession, PersistApp, PersistProc or PersistFirstRead; absent = PersistDefault
}

// LookupReq looks keys up. Without Wait, any missing key gives ErrNotFound;
// with Wait, the reply comes once all keys exist (or ErrTimeout).
type LookupReq struct {
	Job       string   `msgpack:"j,omitempty"`   // caller's job
	Rank      uint32   `msgpack:"r,omitempty"`   // caller's rank
	Range     string   `msgpack:"rng,omitempty"` // RangeJob (default) or RangeDVM
	Keys      []string `msgpack:"k,omitempty"`   // keys wanted
	Wait      bool     `msgpack:"w,omitempty"`   // wait until every key is published
	TimeoutMS int64    `msgpack:"tmo,omitempty"` // with Wait: give up after this many ms (0 = no limit)
}

// LookupReply carries the values found, in the order of the keys asked.
type LookupReply struct {
	Data []KV `msgpack:"d,omitempty"` // keys and values
}

// UnpublishReq removes keys the caller published (all of them when Keys is
// empty).
type UnpublishReq struct {
	Job   string   `msgpack:"j,omitempty"`   // publisher's job
	Rank  uint32   `msgpack:"r,omitempty"`   // publisher's rank
	Range string   `msgpack:"rng,omitempty"` // RangeJob (default) or RangeDVM
	Keys  []string `msgpack:"k,omitempty"`   // keys; empty = all of the caller's
}
