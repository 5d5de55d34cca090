#!/usr/bin/env bash
# build/prebuild.sh: builds, in the background and only on CPU that nothing
# else wants, the parts `make test` compiles from Go modules, in the order
# the tests need them: Traefik (build/traefik.sh; internal/traefik and the
# Compose pair), kube-apiserver and kube-controller-manager (test/cluster,
# test/controlplane), then the kubelet, kube-proxy and kube-scheduler
# (test/node). Cold, these are most of a fresh machine's `.ci/run`; built
# beside the timed drills they cost the wall clock little.
#
# Each part is built by the same command and under the same lock file as
# the test that needs it would use (build/traefik.sh; test/controlplane's
# `controlplane build`), so a test that gets there first waits for the
# build under way and then finds it up to date. A failed prebuild only
# logs: the test that needs the part builds it itself and says why.
#
# "Nothing else wants": as root, the builder runs in a cpu cgroup of its own
# with cpu.idle set (cgroup v1 or v2), so any other task, the drills' load
# generator and the replicas above all, preempts it at once and it gets only
# idle time; where that cgroup cannot be made it runs at nice 19 and says so.
#
# Usage: build/prebuild.sh start   start the builder, log in bin/prebuild.log
#        build/prebuild.sh stop    end it if it still runs; print its timings
#        build/prebuild.sh run     the builder itself (what start runs)
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
traefik_version=${TRAEFIK_VERSION:-v3.6.12}
log=bin/prebuild.log
pidfile=bin/prebuild.pid
cgfile=bin/prebuild.cgroup

# idle_cgroup: move this shell into a new cpu cgroup with cpu.idle=1 and
# write its path to $cgfile; fail (moving nothing) where that is not
# possible.
idle_cgroup() {
	local base rel dir
	if [ -f /sys/fs/cgroup/cpu/cgroup.procs ]; then
		# cgroup v1: a child of this process's own cpu cgroup.
		rel=$(sed -n 's/^[0-9]*:[^:]*\bcpu\b[^:]*:\(.*\)$/\1/p' /proc/self/cgroup | head -n 1)
		base=/sys/fs/cgroup/cpu${rel%/}
	elif [ -f /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control; then
		# cgroup v2: beside the others at the root (a cgroup holding
		# processes cannot have children with controllers).
		base=/sys/fs/cgroup
	else
		return 1
	fi
	dir=$base/drill-prebuild-$BASHPID
	mkdir "$dir" 2>/dev/null || return 1
	if [ ! -f "$dir/cpu.idle" ] || ! echo 1 >"$dir/cpu.idle" 2>/dev/null ||
		! echo "$BASHPID" >"$dir/cgroup.procs" 2>/dev/null; then
		rmdir "$dir" 2>/dev/null || true
		return 1
	fi
	echo "$dir" >"$cgfile"
}

# leave_cgroup: move this shell back to the cgroup above and remove the
# idle one (its builds have ended).
leave_cgroup() {
	[ -f "$cgfile" ] || return 0
	local dir
	dir=$(cat "$cgfile")
	echo "$BASHPID" >"$(dirname "$dir")/cgroup.procs" 2>/dev/null || true
	rmdir "$dir" 2>/dev/null && rm -f "$cgfile"
	return 0
}

# step NAME CMD...: run CMD, then log how long it took or that it failed.
step() {
	local name=$1 start=$SECONDS
	shift
	echo "prebuild: building $name"
	if "$@"; then
		echo "prebuild: $name ready in $((SECONDS - start)) s"
	else
		echo "prebuild: $name failed after $((SECONDS - start)) s (exit $?); the tests that need it build it themselves"
	fi
}

run() {
	if idle_cgroup; then
		echo "prebuild: in cpu cgroup $(cat "$cgfile") (cpu.idle 1: only CPU time no other task wants)"
	else
		renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
		echo "prebuild: no idle cpu cgroup here (needs root and a cpu controller with cpu.idle); building at nice 19"
	fi
	trap leave_cgroup EXIT
	local start=$SECONDS
	step "Traefik $traefik_version" env GO="$go" ./build/traefik.sh "$traefik_version"
	step "the Kubernetes control plane and node parts" \
		bash -c 'cd test/controlplane && exec "$0" run ./cmd/controlplane build --node' "$go"
	echo "prebuild: done in $((SECONDS - start)) s"
}

start() {
	mkdir -p bin
	stop >/dev/null 2>&1 || true
	# Job control gives the builder a process group of its own, which stop
	# ends as a whole; it also keeps the terminal's Ctrl-C away from it
	# (make test's trap stops it instead).
	set -m
	"$0" run >"$log" 2>&1 </dev/null &
	echo $! >"$pidfile"
	set +m
	echo "prebuild: started (pid $!; log $log)"
}

stop() {
	if [ -f "$pidfile" ]; then
		local pid
		pid=$(cat "$pidfile")
		rm -f "$pidfile"
		if kill -0 "$pid" 2>/dev/null; then
			echo "prebuild: still running; stopping it"
			kill -TERM -- "-$pid" 2>/dev/null || true
			for _ in $(seq 50); do
				kill -0 -- "-$pid" 2>/dev/null || break
				sleep 0.2
			done
			kill -KILL -- "-$pid" 2>/dev/null || true
		fi
	fi
	if [ -f "$cgfile" ]; then
		local dir
		dir=$(cat "$cgfile")
		if [ -f "$dir/cgroup.procs" ]; then
			xargs -r kill -KILL <"$dir/cgroup.procs" 2>/dev/null || true
			for _ in $(seq 50); do
				rmdir "$dir" 2>/dev/null && break
				sleep 0.2
			done
		fi
		rm -f "$cgfile"
	fi
	if [ -f "$log" ]; then
		grep '^prebuild: ' "$log" || true
	fi
}

case ${1:-} in
start) start ;;
stop) stop ;;
run) run ;;
*)
	echo "usage: build/prebuild.sh start|stop|run" >&2
	exit 2
	;;
esac
