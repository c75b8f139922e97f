#!/usr/bin/env bash
# bench-hosts.sh — dynrt across hosts: DVM start, warm launch and dvm grow on
# network-namespace hosts (internal/nshosts; docs/clusters.md, "Test hosts"),
# against Hydra (and srun) in the same run. Needs root; issue 12 item 8.
#
# Hosts h0 h1 h2 (the DVM, 16 slots each, master on h0 and h0 listed) and h3
# (for the grow), each with its own address, hostname and sshd; every command
# is typed on h0, as a user logged in there would. ssh is `ssh -F <cluster
# config>` through a one-line wrapper ($work/ssh), the same for dynrun
# (--launch-agent) and Hydra (-launcher-exec, which takes a path only).
# The ssh sessions get HOME=$SSH_HOME (default: an empty directory): the
# remote shell of every ssh command reads ~/.bashrc, and this machine's
# root's one runs `pyenv init` (about 110 ms of CPU, a second at load 20),
# which no cluster account would pay on every ssh. SSH_HOME=/root measures
# with it; SSH_HOME= leaves HOME alone.
#
# Variants (N is the column the ratios are grouped by):
#   N=3   dvm-start-ssh   dynrun dvm start --daemonize --launcher ssh --host h0:16,h1:16,h2:16
#                         until it has printed the DVM id (every daemon registered); the
#                         `dvm stop` after it is not timed
#         hydra           mpiexec.hydra -launcher ssh -hosts h0,h1,h2 -n 3 /bin/true: Hydra's
#                         whole start, launch and teardown over the same hosts
#         ssh-floor       two ssh round trips in parallel (h1, h2: what dvm start must do)
#   N=8, 48 (NS)
#         dynrt-warm      dynrun --dvm <warm DVM> -n N --map-by node /bin/true
#         hydra           mpiexec.hydra -launcher ssh -hosts h0,h1,h2 -n N /bin/true
#                         (round robin, so both place 3/3/2 at N=8 and 16/16/16 at N=48;
#                         checked before the timed runs with `hostname`)
#         srun            srun -n N /bin/true in an allocation of the 3 hosts (Slurm only)
#         fork-floor      scripts/forkfloor N /bin/true: fork/exec/wait of N x /bin/true
#                         on h0. The hosts share this machine's CPUs, so this is the CPU
#                         floor of any launch across them
#   N=1   grow-ssh        dynrun dvm grow --host h3:8 on the warm DVM
#         grow-ssh+job    the same, then a job of 4 ranks --map-by node (one on h3) has run:
#                         "until its slots are usable"; `dvm shrink --node h3` after each
#                         run is not timed
#         ssh-floor       one ssh round trip (h3)
#
# Then, on a second cluster of 4 hosts running a real Slurm (internal/slurmhosts:
# slurmctld on h0, a slurmd per host, 16 CPUs each; it has no sshd), all inside
# `salloc -N 3 --ntasks-per-node=16` typed on h0:
#   N=3   dvm-start-slurm dynrun dvm start --daemonize (the slurm launcher, chosen by the
#                         allocation: one srun step of daemons); `dvm stop` untimed
#         srun            srun -N 3 -n 3 /bin/true: one step over the allocation
#   N=8, 48
#         dynrt-warm      dynrun --dvm <DVM started in the allocation> -n N --map-by node /bin/true
#         srun            srun -n N --distribution=cyclic /bin/true (3/3/2 and 16/16/16, checked)
#         hydra-slurm     mpiexec.hydra -launcher slurm -ppn 1 -n N /bin/true (Hydra inside an
#                         allocation; round robin over the allocation's nodes)
#         fork-floor      as above
#   N=1   grow-slurm+job  dynrun dvm grow --nodes 1 (a new allocation: h3), then a job with a
#                         rank on h3; measured only if this dynrun can grow under Slurm. After
#                         each run, untimed: dvm shrink --node h3 and wait until Slurm has h3 idle
#         srun-new-job    srun -N 1 -w h3 /bin/true outside the allocation: a new Slurm job
#                         with one step on h3, the floor of such a grow
#
# Every variant runs once per round, in a fresh random order (scripts/benchtimer),
# so a machine that gets busier or quieter during the run affects all alike.
# Reported: median, p10, p90 and the ratio to the peers of the same N.
#
# Everything it starts (hosts, sshds, Slurm, DVMs) is torn down when it
# exits, also on failure or Ctrl-C. Without root it only says why it cannot
# run; where Slurm cannot start (make deps-slurm installs it) it skips the
# Slurm part with a message.
#
# Usage: scripts/bench-hosts.sh               (as root, from anywhere in the repository)
#        ROUNDS=5 NS="8" PARTS=slurm scripts/bench-hosts.sh
set -euo pipefail

ROUNDS=${ROUNDS:-10}
PARTS=${PARTS:-"ssh slurm"}
SSH_HOME=${SSH_HOME-@empty}
WARMUP=${WARMUP:-1}
NS=${NS:-"8 48"}
SLOTS=16

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/common.sh"

if [[ $(id -u) -ne 0 ]]; then
	note "skipping bench-hosts: needs root to build the network-namespace hosts (internal/nshosts); run it as root"
	exit 0
fi
work_dir bench-hosts
pfx=dyn-bench-$$
spfx=dyn-bench-slurm-$$
hosts_up=0
slurm_up=0
warm=""

script_cleanup() {
	if [[ -n $warm ]]; then
		onh0 "$bin" dvm stop --dvm "$warm" >/dev/null 2>&1 || true
	fi
	if ((hosts_up)); then
		"$work/nshosts" down --prefix "$pfx" >&2 || true
	fi
	if ((slurm_up)); then
		"$work/slurmhosts" down --prefix "$spfx" >&2 || true
	fi
}

# onh0 CMD... runs CMD on h0 (its network and UTS namespace, its /etc/hosts,
# DYNRT_DIR of h0).
onh0() { "$work/nshosts" exec --prefix "$pfx" h0 "$@"; }
# onsh0 CMD... runs CMD on h0 of the Slurm cluster.
onsh0() { "$work/slurmhosts" exec --prefix "$spfx" h0 "$@"; }

# spread CMD... runs CMD on h0 and prints how many output lines each host
# printed, as "h0:3 h1:3 h2:2".
spread() { onh0 "$@" | sort | uniq -c | awk '{printf "%s%s:%s", sep, $2, $1; sep=" "}'; }

# --- build -----------------------------------------------------------------
note "building dynrun, nshosts, benchtimer and forkfloor in $work"
# dynrun in a prefix layout (DIR/bin/dynrun): run by that path on h0 it
# implies --prefix DIR, so the remote daemons find it (docs/clusters.md, ssh).
# The build tags of `make build`.
mkdir -p "$work/dynrt/bin"
bin=$work/dynrt/bin/dynrun
(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$bin" ./cmd/dynrun)
(cd "$root" && go build -o "$work/nshosts" ./internal/nshosts/cmd/nshosts)
(cd "$root" && go build -o "$work/slurmhosts" ./internal/slurmhosts/cmd/slurmhosts)
(cd "$root" && go build -o "$work/benchtimer" ./scripts/benchtimer)
(cd "$root" && CGO_ENABLED=0 go build -o "$work/forkfloor" ./scripts/forkfloor)

if ! command -v mpiexec.hydra >/dev/null; then
	note "installing mpich (mpiexec.hydra) with apt-get"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mpich; } >"$work/apt.log" 2>&1 ||
		note "apt-get failed; Hydra will be skipped"
fi

state() {
	printf 'load average %s, %s running, %s processes' "$(cut -d' ' -f1-3 /proc/loadavg)" \
		"$(awk '/^procs_running/ {print $2}' /proc/stat)" "$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)"
}

# want_spread N: the placement round robin over h0 h1 h2 gives, "h0:3 h1:3 h2:2".
want_spread() {
	python3 -c 'import sys; n=int(sys.argv[1]); print(" ".join("h%d:%d" % (i, n//3 + (i < n%3)) for i in range(3)))' "$1"
}

# line VARIANT N ARGV... appends a tab-separated spec line to $spec.
line() {
	local IFS=$'\t'
	echo "$*" >>"$spec"
}

ssh_part() {
	# --- hosts -----------------------------------------------------------------
	hosts_up=1 # from here on, also a half-built cluster is torn down
	local env=()
	if [[ $SSH_HOME == @empty ]]; then
		SSH_HOME=$work/home
		mkdir "$SSH_HOME"
	fi
	[[ -z $SSH_HOME ]] || env=(--env "HOME=$SSH_HOME")
	note "ssh sessions: HOME=${SSH_HOME:-unchanged}"
	if ! "$work/nshosts" up --prefix "$pfx" --hosts h0,h1,h2,h3 "${env[@]}" 2>"$work/up.err" >"$work/up.env"; then
		cat "$work/up.err" >&2
		die "cannot build the namespace hosts (make deps-hosts installs what they need)"
	fi
	. "$work/up.env"
	cat "$work/up.err" >&2
	ssh=$work/ssh
	printf '#!/bin/sh\nexec ssh -F %q "$@"\n' "$NSHOSTS_SSH_CONFIG" >"$ssh"
	chmod 755 "$ssh"
	onh0 "$ssh" h1 true || die "ssh from h0 to h1 does not work"

	have_hydra=0
	hydra=(mpiexec.hydra -launcher ssh -launcher-exec "$ssh" -hosts h0,h1,h2)
	if command -v mpiexec.hydra >/dev/null && onh0 "${hydra[@]}" -n 3 /bin/true >/dev/null 2>"$work/hydra.err"; then
		have_hydra=1
		hydra[0]=$(command -v mpiexec.hydra)
	else
		note "skipping hydra: mpiexec.hydra is missing or cannot run across the hosts: $(tail -2 "$work/hydra.err" 2>/dev/null)"
	fi

	# --- warm DVM and the spread check ------------------------------------------
	warm=$(onh0 "$bin" dvm start --daemonize --launcher ssh --launch-agent "$ssh" \
		--host "h0:$SLOTS,h1:$SLOTS,h2:$SLOTS" --name bench-warm 2>"$work/warm.err") ||
		{ cat "$work/warm.err" >&2; die "the warm DVM did not start"; }
	note "warm DVM $warm: h0 h1 h2 x $SLOTS slots, master on h0"

	for n in $NS; do
		want=$(want_spread "$n")
		got=$(spread "$bin" --dvm "$warm" -n "$n" --map-by node hostname)
		[[ $got == "$want" ]] || die "dynrun -n $n --map-by node placed $got, want $want"
		if ((have_hydra)); then
			got=$(spread "${hydra[@]}" -n "$n" hostname)
			[[ $got == "$want" ]] || die "mpiexec.hydra -n $n placed $got, want $want"
		fi
		note "N=$n: dynrun and Hydra both place $want"
	done
	# grow_job CMD: grow the warm DVM by h3, then run `dynrun -n 4 --map-by node
	# CMD` on it (one rank on h3): a shell command line for sh -c.
	grow_job() {
		printf '%q dvm grow --dvm %q --host h3:8 >/dev/null && %q --dvm %q -n 4 --map-by node %q' "$bin" "$warm" "$bin" "$warm" "$1"
	}
	got=$(onh0 sh -c "$(grow_job hostname)" | sort | tr '\n' ' ')
	onh0 "$bin" dvm shrink --dvm "$warm" --node h3 >/dev/null
	[[ $got == "h0 h1 h2 h3 " ]] || die "after dvm grow --host h3:8, a job of 4 --map-by node ran on: $got (want h0 h1 h2 h3)"
	note "dvm grow --host h3:8: a job of 4 --map-by node then runs on h0 h1 h2 h3"

	# --- spec --------------------------------------------------------------------
	spec=$work/spec
	: >"$spec"
	line dvm-start-ssh 3 "$bin" dvm start --daemonize --launcher ssh --launch-agent "$ssh" \
		--host "h0:$SLOTS,h1:$SLOTS,h2:$SLOTS" --name bench-start @then "$bin" dvm stop --dvm bench-start
	((have_hydra)) && line hydra 3 "${hydra[@]}" -n 3 /bin/true
	line ssh-floor 3 /bin/sh -c "$ssh h1 true & $ssh h2 true & wait"
	for n in $NS; do
		line dynrt-warm "$n" "$bin" --dvm "$warm" -n "$n" --map-by node /bin/true
		((have_hydra)) && line hydra "$n" "${hydra[@]}" -n "$n" /bin/true
		line fork-floor "$n" "$work/forkfloor" "$n" /bin/true
	done
	line grow-ssh 1 "$bin" dvm grow --dvm "$warm" --host h3:8 @then "$bin" dvm shrink --dvm "$warm" --node h3
	line grow-ssh+job 1 /bin/sh -c "$(grow_job /bin/true)" @then "$bin" dvm shrink --dvm "$warm" --node h3
	line ssh-floor 1 "$ssh" h3 true

	note "$ROUNDS rounds (+$WARMUP warm-up runs per variant), $(nproc) CPUs, kernel $(uname -r), $(git -C "$root" rev-parse --short HEAD)"
	note "before: $(state)"
	onh0 "$work/benchtimer" -rounds "$ROUNDS" -warmup "$WARMUP" -peers hydra,srun,ssh-floor <"$spec"
	note "after: $(state)"

	# What one ssh connection costs in CPU, client and server: the floor under
	# every variant that uses ssh, and on a loaded machine the reason its wall
	# time is what it is. The server side is what h1's sshd reaped from its
	# per-connection children (utime+stime of the dead children, /proc/PID/stat
	# fields 16 and 17).
	sshd_pid=$(cat "$NSHOSTS_DIR/h1/sshd.pid")
	hz=$(getconf CLK_TCK)
	children_ticks() { awk '{print $16 + $17}' "/proc/$1/stat"; }
	k=10
	before=$(children_ticks "$sshd_pid")
	client=$(onh0 bash -c 'for ((i = 0; i < '"$k"'; i++)); do "$1" h1 true; done; times' _ "$ssh" | tail -1)
	after=$(children_ticks "$sshd_pid")
	python3 - "$client" "$before" "$after" "$hz" "$k" <<-'EOF2'
	import re, sys
	client, before, after, hz, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
	secs = [int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", client)]
	c = sum(secs) / k * 1000
	s = (after - before) / hz / k * 1000
	print(f"\nCPU of one `ssh h1 true` (mean of {k}): client {c:.0f} ms, sshd {s:.0f} ms, together {c + s:.0f} ms\n")
	EOF2

	onh0 "$bin" dvm stop --dvm "$warm" >/dev/null
	warm=""
	"$work/nshosts" down --prefix "$pfx" >&2
	hosts_up=0
}

slurm_part() {
	if ! "$work/slurmhosts" up --prefix "$spfx" -k 4 --cpus "$SLOTS" 2>"$work/sup.err" >"$work/sup.env"; then
		slurm_up=1 # a half-built cluster is torn down too
		note "skipping the Slurm part: Slurm did not start on the namespace hosts (make deps-slurm installs it):"
		tail -5 "$work/sup.err" >&2
		return 0
	fi
	slurm_up=1
	cat "$work/sup.err" >&2
	local alloc=(salloc -N 3 -w h0,h1,h2 --ntasks-per-node="$SLOTS")
	# In the allocation: a warm DVM by the slurm launcher, the spread checks.
	local script
	script=$(
		cat <<-EOF
			set -e
			warm=\$($(printf '%q' "$bin") dvm start --daemonize --name bench-swarm)
			trap '$(printf '%q' "$bin") dvm stop --dvm bench-swarm >/dev/null 2>&1' EXIT
			for n in $NS; do
				echo "dynrun \$n \$($(printf '%q' "$bin") --dvm bench-swarm -n \$n --map-by node hostname | sort | uniq -c | awk '{printf "%s%s:%s", s, \$2, \$1; s=" "}')"
				echo "srun \$n \$(srun -n \$n --distribution=cyclic hostname | sort | uniq -c | awk '{printf "%s%s:%s", s, \$2, \$1; s=" "}')"
				echo "hydra-slurm \$n \$(mpiexec.hydra -launcher slurm -ppn 1 -n \$n hostname | sort | uniq -c | awk '{printf "%s%s:%s", s, \$2, \$1; s=" "}')"
			done
			if $(printf '%q' "$bin") dvm grow --dvm bench-swarm --nodes 1 >grow.out 2>&1; then
				echo "grow \$($(printf '%q' "$bin") --dvm bench-swarm -n 4 --map-by node hostname | sort | tr '\n' ' ')"
				$(printf '%q' "$bin") dvm shrink --dvm bench-swarm --node h3 >/dev/null
			else
				echo "grow-failed \$(tr '\n' ' ' <grow.out)"
			fi
		EOF
	)
	local checks have_hydra_slurm=1 grow=0
	checks=$(cd "$work" && onsh0 "${alloc[@]}" sh -c "$script" 2>"$work/scheck.err") ||
		{ cat "$work/scheck.err" >&2; die "the Slurm checks failed"; }
	for n in $NS; do
		local want
		want=$(want_spread "$n")
		for v in dynrun srun hydra-slurm; do
			local got
			got=$(awk -v v="$v" -v n="$n" '$1 == v && $2 == n {$1 = $2 = ""; sub(/^ +/, ""); print}' <<<"$checks")
			if [[ $got != "$want" ]]; then
				[[ $v == hydra-slurm ]] || die "under Slurm, $v -n $n placed '$got', want $want"
				note "skipping hydra-slurm: mpiexec.hydra -launcher slurm -ppn 1 -n $n placed '$got', want $want"
				have_hydra_slurm=0
			fi
		done
		note "Slurm, N=$n: placements $want checked"
	done
	if grep -q '^grow h0 h1 h2 h3 $' <<<"$checks"; then
		grow=1
		note "dvm grow --nodes 1 under Slurm: a job of 4 --map-by node then runs on h0 h1 h2 h3"
	else
		note "skipping grow-slurm: dvm grow --nodes 1 in the allocation did not give a usable h3: $(grep '^grow' <<<"$checks" | cut -c1-300)"
	fi

	spec=$work/spec-slurm
	: >"$spec"
	line dvm-start-slurm 3 "$bin" dvm start --daemonize --name bench-sstart @then "$bin" dvm stop --dvm bench-sstart
	line srun 3 srun -N 3 -n 3 /bin/true
	for n in $NS; do
		line dynrt-warm "$n" "$bin" --dvm bench-swarm -n "$n" --map-by node /bin/true
		line srun "$n" srun -n "$n" --distribution=cyclic /bin/true
		((have_hydra_slurm)) && line hydra-slurm "$n" mpiexec.hydra -launcher slurm -ppn 1 -n "$n" /bin/true
		line fork-floor "$n" "$work/forkfloor" "$n" /bin/true
	done
	# Slurm frees h3 some time after the grow's job is cancelled (COMPLETING,
	# then IDLE): the next grow would wait for it, so the untimed step after
	# each run waits too.
	local idle_h3='for i in $(seq 900); do [ "$(sinfo -h -n h3 -o %t)" = idle ] && exit 0; sleep 0.1; done; echo h3 not idle after 90 s >&2; exit 1'
	if ((grow)); then
		line grow-slurm+job 1 /bin/sh -c "$(printf '%q dvm grow --dvm bench-swarm --nodes 1 >/dev/null && %q --dvm bench-swarm -n 4 --map-by node /bin/true' "$bin" "$bin")" \
			@then /bin/sh -c "$(printf '%q dvm shrink --dvm bench-swarm --node h3 >/dev/null' "$bin") && $idle_h3"
		# Slurm's own floor for it: a new job of h3 with one step, outside the
		# allocation (its variables unset).
		line srun-new-job 1 /bin/sh -c 'unset $(env | sed -n "s/^\(SLURM_[A-Z_]*\)=.*/\1/p" | grep -v "^SLURM_CONF$"); exec srun -N 1 -w h3 /bin/true' \
			@then /bin/sh -c "$idle_h3"
	fi
	if ((grow)); then
		# The check's grow job ends some time after its node left.
		onsh0 sh -c "$idle_h3" || die "Slurm did not free h3 after the check's grow"
	fi
	note "Slurm: $ROUNDS rounds (+$WARMUP warm-up runs per variant) in salloc -N 3 --ntasks-per-node=$SLOTS on h0"
	note "before: $(state)"
	onsh0 "${alloc[@]}" sh -c "$(printf '%q' "$bin") dvm start --daemonize --name bench-swarm >/dev/null && trap '$(printf '%q' "$bin") dvm stop --dvm bench-swarm >/dev/null 2>&1' EXIT && $(printf '%q' "$work/benchtimer") -timeout 150s -rounds $ROUNDS -warmup $WARMUP -peers srun,hydra-slurm,srun-new-job" <"$spec"
	note "after: $(state)"
}

for part in $PARTS; do
	case $part in
	ssh) ssh_part ;;
	slurm) slurm_part ;;
	*) die "PARTS: unknown part '$part' (want ssh, slurm)" ;;
	esac
done
