# common.sh — sourced by the demo and benchmark scripts in scripts/: one work
# directory, removed on exit, and the stop of whatever the script started
# (its job, its DVM and, if the stop did not work, its master by pid),
# however the script ends (normally, on an error, on Ctrl-C).
#
#   . "$root/scripts/lib/common.sh"
#   work_dir bench-rc            # sets $work and installs the traps
#   dvm=… master_pid=… job_pid=… # set as things start; stop_all uses them
#   script_cleanup() { …; }      # optional: more to undo, run after stop_all

note() { printf '# %s\n' "$*" >&2; }

die() {
	printf '%s: %s\n' "$(basename "$0" .sh)" "$*" >&2
	exit 1
}

# stop_all ends the job and the DVM the script started (idempotent).
stop_all() {
	if [[ -n ${job_pid:-} ]] && kill -0 "$job_pid" 2>/dev/null; then
		kill -TERM "$job_pid" 2>/dev/null || true # dynrun kills its job and exits
		wait "$job_pid" 2>/dev/null || true
	fi
	if [[ -n ${dvm:-} ]]; then
		"$work/dynrun" dvm stop --dvm "$dvm" >/dev/null 2>&1 || true
	fi
	# Only the master this script started, by pid, if the stop did not work.
	if [[ -n ${master_pid:-} ]] && kill -0 "$master_pid" 2>/dev/null; then
		kill -TERM "$master_pid" 2>/dev/null || true
		sleep 1
		kill -KILL "$master_pid" 2>/dev/null || true
	fi
	job_pid="" dvm="" master_pid=""
}

# work_dir NAME makes $work under $TMPDIR and removes it (after stop_all)
# when the script exits.
work_dir() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap _common_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# private_dvm_dir makes $work/dvm the rendezvous directory of the DVMs
# this script starts, a private one: the user's other DVMs stay out of it.
private_dvm_dir() {
	export DYNRT_DIR="$work/dvm"
	unset DYNRT_DVM
	mkdir -m 700 "$DYNRT_DIR"
	dvm="" master_pid="" job_pid=""
}

# master_pid_of DVM prints the pid of the master of DVM ($work/dynrun).
master_pid_of() {
	"$work/dynrun" dvm status --dvm "$1" --json | grep -o '"pid": *[0-9]*' | head -n 1 | grep -o '[0-9]*$'
}

# step prints the heading of a demo's step.
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# load prints the load averages over 1, 5 and 15 minutes.
load() { cut -d' ' -f1-3 /proc/loadavg; }

_common_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_all
	if declare -F script_cleanup >/dev/null; then
		script_cleanup || true
	fi
	rm -rf "$work"
	exit "$rc"
}

# demo_finish NAME JOB_RC: the end of the demos (scripts/demo*.sh): the
# benchmark's summary from $work/job.log, its exit status, the plot of
# $work/demo.jsonl into $out, and the stop of the DVM ($dvm). Uses step().
demo_finish() {
	local name=$1 job_rc=$2
	step "the benchmark ended with exit status $job_rc; its summary (ms; medians over the changes of a row):"
	grep -v '^{' "$work/job.log" || true
	((job_rc == 0)) || exit "$job_rc"

	step "rcplot: per-iteration time (work, sync, resource-change step; changes in flight shaded)"
	mkdir -p "$out"
	cp "$work/demo.jsonl" "$out/demo.jsonl"
	rcplot -o "$out" -phases=false "$out/demo.jsonl"

	step "dynrun dvm stop"
	dynrun dvm stop --dvm "$dvm"
	dvm=""
	echo "$name done: nothing left running; the plot and the JSON lines are in $out/"
}
