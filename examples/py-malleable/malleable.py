#!/usr/bin/env python3
"""A malleable application in Python that speaks dynrt's wire protocol itself.

Written from docs/wire.md alone (the section names in the comments are that page's),
with docs/environment.md for the variables and docs/rc.md for the phases. It needs
only python3 and msgpack (Debian: python3-msgpack).

Every iteration each member of the current set puts its rank, commits, enters a
fence over the set and reads every member's value back: the sum must equal the sum
of the set's ranks. The root (lowest rank) also tells everyone, in its value, what
to do next: go on, apply a resource change, or stop. A change is applied by every
member at the same iteration, so nobody waits in a fence for a member that is busy
accepting.

Output, one line per iteration and rank (the test reads it):
    iter <i> rank <r> set <name>@<ver> size <n> sum <s> ok
and at the end "done rank <r> iters <i>" or "left rank <r> delta <d>".

Usage: malleable.py [--stop-file PATH] [--max-iters N] [--sleep SECONDS] [--poll]
                    [--follow N] [--odd PROG ARGS...]
"""

import argparse
import json
import os
import socket
import struct
import sys
import time

import msgpack

PROTO = 1  # wire.md, "Reference: Handshake": ProtoMin = ProtoMax = 1


class WireError(Exception):
    """An error reply: wire.md, "Errors" (switch on code, never on msg)."""

    def __init__(self, kind, code, msg):
        super().__init__(f"{kind}: {code}: {msg}")
        self.code = code


class Client:
    """One connection to the node daemon (wire.md, "Transport", "Framing", "Envelope")."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.next_id = 1  # "Request ids": we dialed, so our ids are odd: 1 (hello), 3, 5, ...

    def _send(self, env):
        body = msgpack.packb(env, use_bin_type=True)
        # "Framing": uint32 big-endian length, then one msgpack value.
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def _read_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("daemon closed the connection")
            buf += chunk
        return buf

    def _recv(self):
        (n,) = struct.unpack(">I", self._read_exact(4))
        return msgpack.unpackb(self._read_exact(n), raw=False)

    def call(self, kind, body=None):
        """Send one request and wait for its reply (replies are matched by id)."""
        rid = self.next_id
        self.next_id += 2
        # "Envelope": write v, id and kind first; leave body out when empty.
        env = {"v": PROTO, "id": rid, "kind": kind}
        if body:
            env["body"] = body
        self._send(env)
        while True:
            f = self._recv()
            fid = f.get("id") or 0
            if fid == rid:
                if f.get("err"):
                    e = f["err"]
                    raise WireError(kind, e.get("code", ""), e.get("msg", ""))
                return f.get("body") or {}
            if fid == 0:
                # "Frames whose id cannot be read": id 0 with err is a notice, not an event.
                if f.get("err"):
                    print(f"notice from daemon: {f['err']}", file=sys.stderr)
                continue  # events: we did not subscribe, nothing to do
            # Any other id: a late reply, dropped ("Request ids"); a daemon sends a client no
            # requests ("Writing a client", step 4).

    def hello(self, name):
        # "Handshake": first frame, id 1, v = our highest version; name is <job>/<rank>.
        return self.call("hello", {"min": PROTO, "max": PROTO, "role": "client", "name": name,
                                   "pid": os.getpid()})


def ranks_of(ranges):
    """"RankRanges": [[lo, hi], ...] inclusive pairs -> list of ranks."""
    return [r for lo, hi in (ranges or []) for r in range(lo, hi + 1)]


class App:
    def __init__(self, args):
        self.args = args
        # docs/environment.md: the daemon sets these for every process it launches.
        self.job = os.environ["DYNRT_JOB"]
        self.rank = int(os.environ["DYNRT_RANK"])
        self.c = Client(os.environ["DYNRT_DAEMON"])
        self.c.hello(f"{self.job}/{self.rank}")
        # "Reference: Session": SessionInitReq -> SessionInfo (identity, app name, delta).
        self.info = self.c.call("session.init", {"j": self.job, "r": self.rank, "pid": os.getpid()})
        self.app_set = f"mpi://app/{self.info['app']}"

    def members(self, name, ver):
        # PsetGetReq: send ver even when 0 (absent = latest), m: true for the members.
        info = self.c.call("pset.get", {"j": self.job, "n": name, "ver": ver, "m": True})
        return ranks_of(info.get("m"))

    def log(self, line):
        print(line, flush=True)

    # -- phase 3 for a new process ("Phase 3: rc.confirm") --------------------------

    def confirm(self, delta):
        rep = self.c.call("rc.confirm", {"d": delta, "tmo": 60000})
        if rep.get("st") != "FINALIZED":
            raise RuntimeError(f"confirm of {delta} answered {rep}")
        s = rep["set"]
        return s["n"], s.get("ver", 0)

    # -- phases 2 and 3 for a member ("Phase 3: rc.accept, member form") ------------

    def apply_change(self, delta, cur):
        # "Who takes part": the record from rc.query; bound sets with versions in bv.
        rc = self.c.call("rc.query", {"j": self.job, "d": delta}).get("rc")
        if not rc:
            raise RuntimeError(f"change {delta} vanished")
        bound = None
        for b in rc.get("bv") or []:
            if self.rank in self.members(b["n"], b.get("ver", 0)):
                bound = b
        if bound is None:
            return cur, "none"  # in no bound set: no part in phase 3
        mem = self.members(bound["n"], bound.get("ver", 0))
        # "rc.accept, member form": the same fields from every member; blk or, with --poll,
        # the same request again while an ADD or REPLACE is PENDING.
        req = {"d": delta, "b": bound["n"], "blk": not self.args.poll, "tmo": 60000}
        if self.rank == min(mem):
            # Phase 2 (docs/rc.md): the root builds the new set as a new version of the bound set.
            t = rc["t"]
            op = {"j": self.job, "r": self.rank, "p1": bound["n"], "p2": delta, "t": bound["n"],
                  "op": "difference" if t == "SUB" else "union"}
            try:
                res = self.c.call("pset.op", op)
                if t == "REPLACE":  # "An ADD, message by message": UNION then DIFFERENCE rc.os
                    res = self.c.call("pset.op", {"j": self.job, "r": self.rank, "op": "difference",
                                                  "p1": bound["n"], "p2": rc["os"], "t": bound["n"]})
                req["set"] = {"n": res["n"], "ver": res.get("ver", 0)}
            except WireError as e:
                if e.code != "aborted":
                    raise
                # "Aborts": accept without set, every member then learns the abort itself.
        try:
            rep = self.c.call("rc.accept", req)
            # A SUB's accept is complete even when PENDING (other bound sets still to accept).
            while rep.get("st") == "PENDING" and rc["t"] != "SUB":
                time.sleep(0.02)  # every member's n-th call gets the root's n-th answer
                rep = self.c.call("rc.accept", req)
        except WireError as e:
            if e.code == "aborted":
                return cur, "ABORTED"
            raise
        # "The terminate rule": term tells this caller to leave.
        if rep.get("term"):
            return cur, "left"
        s = rep.get("set") or {}
        if s.get("n"):
            return (s["n"], s.get("ver", 0)), rep["st"]
        # SUB accepted without a set: continue with the latest version of our set.
        return (cur[0], self.members_ver(cur[0])), rep["st"]

    # -- the root's decision --------------------------------------------------------

    def decide(self, it):
        """Root only: 'rc <delta>', 'stop' or 'go'."""
        # RCQueryReq: b empty = a change bound to mpi://app/<app>; need: only one that still
        # needs this process (the daemon knows which it took part in); rc absent = NULL.
        rc = self.c.call("rc.query", {"j": self.job, "need": True}).get("rc")
        if rc and rc.get("st") == "ANNOUNCED":
            return "rc " + rc["d"]
        a = self.args
        if (a.stop_file and os.path.exists(a.stop_file)) or (a.max_iters and it >= a.max_iters):
            return "stop"
        return "go"

    # -- --follow: only the changes, alongside other programs ------------------------

    def say(self, word, **kv):
        print(word, json.dumps({"rank": self.rank, **kv}), flush=True)

    def follow(self, last):
        """Take part in every change until change number `last` has ended, with no work of
        our own: the mode for a job whose other ranks run another program (the phase 3
        messages are the same whatever the members are written in)."""
        delta = self.info.get("delta")
        cur = (self.app_set, 0)
        if delta:
            cur = self.confirm(delta)
            self.say("CONFIRMED", delta=delta, set=cur[0], version=cur[1])
            self.say("STATE", delta=delta, status="FINALIZED", set=cur[0], version=cur[1])
        last_delta = f"mpi://rte/{self.info['app']}/rc/{last}"
        while True:
            rc = self.c.call("rc.query", {"b": cur[0], "need": True}).get("rc")
            if rc and rc.get("st") in ("ANNOUNCED", "PENDING"):  # not a reported abort
                new, how = self.apply_change(rc["d"], cur)
                if how == "left":
                    self.say("LEFT", delta=rc["d"])
                    break
                cur = new
                if how != "none":
                    self.say("STATE", delta=rc["d"], status=how, set=cur[0], version=cur[1])
                continue
            try:
                end = self.c.call("rc.query", {"d": last_delta}).get("rc") or {}
            except WireError as e:
                if e.code != "not_found":  # change `last` not requested yet
                    raise
                end = {}
            if end.get("st") in ("FINALIZED", "ABORTED"):
                self.say("DONE", set=cur[0], version=cur[1], last=end["st"])
                break
            time.sleep(0.02)
        self.c.call("session.fin", {"j": self.job, "r": self.rank})
        self.c.sock.close()

    # -- the loop ---------------------------------------------------------------------

    def run(self):
        delta = self.info.get("delta")
        if delta:  # launched by an ADD or REPLACE: confirm before anything else
            cur = self.confirm(delta)
        else:
            cur = (self.app_set, self.members_ver(self.app_set))
        it, k = 0, 0  # global iteration (the root's word), and iterations at this set version
        while True:
            mem = self.members(*cur)
            root = min(mem)
            word = self.decide(it) if self.rank == root else ""
            # Key-value data: put + commit, a fence over the set, then get every member's value.
            key = f"py:{cur[0]}@{cur[1]}:{k}"
            val = f"{self.rank} {it} {word}".encode()
            self.c.call("kv.put", {"j": self.job, "r": self.rank, "k": key, "v": val})
            self.c.call("kv.commit", {"j": self.job, "r": self.rank})
            self.c.call("kv.fence", {"id": key, "p": [{"j": self.job, "r": [[r, r] for r in mem]}],
                                     "tmo": 60000})
            total, root_val = 0, None
            for r in mem:
                v = self.c.call("kv.get", {"j": self.job, "r": r, "k": key}).get("v", b"").decode()
                total += int(v.split(" ", 1)[0])
                if r == root:
                    root_val = v.split(" ", 2)
            if total != sum(mem):
                raise RuntimeError(f"iter {it}: sum {total} != {sum(mem)} over {mem}")
            it = int(root_val[1])  # new processes take the iteration from the root
            self.log(f"iter {it} rank {self.rank} set {cur[0]}@{cur[1]} size {len(mem)} sum {total} ok")
            word = root_val[2] if len(root_val) > 2 else "go"
            it, k = it + 1, k + 1
            if word == "stop":
                self.log(f"done rank {self.rank} iters {it}")
                break
            if word.startswith("rc "):
                new, how = self.apply_change(word[3:], cur)
                if how in ("left", "ABORTED"):
                    self.log(f"{how} rank {self.rank} delta {word[3:]}")
                if how == "left":
                    break
                if new != cur:
                    cur, k = new, 0
            time.sleep(self.args.sleep)
        # "The terminate rule" / Sessions: session.fin, close, exit.
        self.c.call("session.fin", {"j": self.job, "r": self.rank})
        self.c.sock.close()

    def members_ver(self, name):
        return self.c.call("pset.get", {"j": self.job, "n": name}).get("ver", 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stop-file", help="stop (at an iteration all members agree on) once this file exists")
    p.add_argument("--max-iters", type=int, default=0, help="stop after this many iterations (0 = no limit)")
    p.add_argument("--sleep", type=float, default=0.05, help="seconds between iterations")
    p.add_argument("--poll", action="store_true",
                   help="accept without blocking: call again while the change is PENDING")
    p.add_argument("--follow", type=int, default=0, metavar="N",
                   help="no work: take part in every change until change number N has ended")
    p.add_argument("--odd", nargs=argparse.REMAINDER, metavar="PROG ARGS",
                   help="odd ranks run PROG ARGS instead (a job of two programs); must come last")
    a = p.parse_args()
    if a.odd and int(os.environ.get("DYNRT_RANK", "0")) % 2 == 1:
        # Same pid, so the daemon's hello check still holds ("Handshake", Name).
        os.execv(a.odd[0], a.odd)
    app = App(a)
    app.follow(a.follow) if a.follow else app.run()


if __name__ == "__main__":
    main()
