#!/usr/bin/env bash
# What a browser on the drill's own machine costs the drill: runs a drill N
# times with --ui and a headless Chromium watching its console from the
# same machine (at the shell's priority, as a room member's browser on the
# operator's laptop would be), and prints per run the exit code, whether
# the measurement was valid and the largest share of a stream's requests
# sent late over the judged span (warm-up to the end, as bench/fidelity
# counts it). Asserts nothing: a figure from a machine doing other work
# says nothing about the console.
#
#   bench/console-browser.sh                   5 runs of scenarios/orders-db-brownout.yaml
#   bench/console-browser.sh -n 1              one run (checks the script works)
#   bench/console-browser.sh --no-browser      the same runs with --ui and no browser, to compare
#   bench/console-browser.sh -n 5 scenarios/orders-db-brownout-naive.yaml
#
# Environment: DRILL (default bin/drill, built with `make build` when
# missing), CHROMIUM (default: the first of chromium, chromium-browser,
# google-chrome on PATH). Needs jq, and what the scenario needs (the
# orders drills: PostgreSQL binaries under /usr/lib/postgresql/*/bin).
# Everything runs on loopback; reports and browser profiles go to a
# temporary directory removed on exit (KEEP=1 keeps it and prints where).
set -euo pipefail
cd "$(dirname "$0")/.."

n=5 browser=1 scenario=scenarios/orders-db-brownout.yaml
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n=$2; shift 2 ;;
	-n=*) n=${1#-n=}; shift ;;
	--no-browser) browser=0; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "usage: $0 [-n N] [--no-browser] [SCENARIO]" >&2; exit 2 ;;
	*) scenario=$1; shift ;;
	esac
done
case "$n" in '' | *[!0-9]* | 0) echo "$0: -n wants a count of runs, got '$n'" >&2; exit 2 ;; esac
[ -f "$scenario" ] || { echo "$0: no scenario file $scenario" >&2; exit 2; }
command -v jq >/dev/null || { echo "$0: needs jq (apt-get install jq)" >&2; exit 2; }

drill=${DRILL:-bin/drill}
if [ ! -x "$drill" ]; then
	if [ "$drill" != bin/drill ]; then
		echo "$0: DRILL=$drill is not an executable" >&2
		exit 2
	fi
	make build >&2
fi
chrome=${CHROMIUM:-}
if [ "$browser" = 1 ] && [ -z "$chrome" ]; then
	for c in chromium chromium-browser google-chrome google-chrome-stable; do
		if command -v "$c" >/dev/null; then chrome=$(command -v "$c"); break; fi
	done
	[ -n "$chrome" ] || { echo "$0: no Chromium on PATH (Debian: apt-get install chromium), or set CHROMIUM" >&2; exit 2; }
fi

tmp=$(mktemp -d)
drill_pid="" chrome_pgid=""
stop_browser() {
	if [ -n "$chrome_pgid" ]; then
		kill -- "-$chrome_pgid" 2>/dev/null || true
		wait "$chrome_pgid" 2>/dev/null || true
		chrome_pgid=""
	fi
}
cleanup() {
	stop_browser
	if [ -n "$drill_pid" ]; then
		kill -INT "$drill_pid" 2>/dev/null || true
		wait "$drill_pid" 2>/dev/null || true
	fi
	if [ "${KEEP:-0}" = 1 ]; then echo "kept: $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

echo "date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine:  $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min at the start; other work on the machine makes the runs meaningless)"
echo "drill:    $drill ($("$drill" version 2>/dev/null | head -1 || echo "version unknown"))"
echo "scenario: $scenario, $n runs with --ui"
if [ "$browser" = 1 ]; then
	echo "browser:  $("$chrome" --version 2>/dev/null || echo "$chrome") headless on this machine, watching the console"
else
	echo "browser:  none (--no-browser)"
fi

# late_share prints the largest share of a stream's requests sent late over
# the judged span [warm-up, duration) of run.json $1, in per cent.
late_share() {
	jq -r '
		(.plan.warmup // 0) as $from | (.plan.duration // 0) as $to
		| [ .series // {} | to_entries[] | .value.buckets // []
		    | map(select($to <= $from or (.start >= $from and .start + .width <= $to)))
		    | { late: (map(.late // 0) | add // 0), requests: (map(.requests // 0) | add // 0) }
		    | select(.requests > 0) | .late / .requests * 100 ]
		| (max // 0) | (. * 1000 | round) / 1000' "$1"
}

valid=0 recorded=0
for i in $(seq 1 "$n"); do
	out=$tmp/run-$i
	mkdir -p "$out"
	"$drill" run "$scenario" --ui --out "$out/reports" >"$out/stdout" 2>"$out/stderr" &
	drill_pid=$!
	watched="no browser"
	if [ "$browser" = 1 ]; then
		url=""
		for _ in $(seq 1 300); do
			url=$(grep -o 'http://[^ ]*?token=[0-9a-f]*' "$out/stderr" | head -1 || true)
			[ -n "$url" ] && break
			kill -0 "$drill_pid" 2>/dev/null || break
			sleep 0.2
		done
		if [ -n "$url" ]; then
			setsid "$chrome" --headless=new --no-sandbox --disable-gpu --no-first-run \
				--remote-debugging-address=127.0.0.1 --remote-debugging-port=0 \
				--user-data-dir="$out/chrome-profile" --window-size=1400,1100 "$url" >"$out/chrome.log" 2>&1 &
			chrome_pgid=$!
			watched="browser watched"
		else
			watched="no console URL on stderr"
		fi
	fi
	code=0
	wait "$drill_pid" || code=$?
	drill_pid=""
	if [ -n "$chrome_pgid" ]; then
		# What the browser shows at the end: the console page, its verdict
		# (the DevTools list of pages names its URL and title).
		port=$(head -1 "$out/chrome-profile/DevToolsActivePort" 2>/dev/null || true)
		pages=""
		if [ -n "$port" ] && command -v curl >/dev/null; then
			pages=$(curl -s --max-time 5 "http://127.0.0.1:$port/json/list" | jq -r '[.[] | select(.type == "page") | "\(.title) at \(.url)"] | join(", ")' 2>/dev/null || true)
		fi
		if ! kill -0 "$chrome_pgid" 2>/dev/null; then
			watched="browser exited during the run (see its log with KEEP=1)"
		elif [ -n "$pages" ]; then
			watched="browser watched: $pages"
		fi
	fi
	stop_browser
	rj=$(find "$out/reports" -name run.json 2>/dev/null | head -1)
	if [ -z "$rj" ]; then
		printf 'run %d: exit %d, no run.json (%s); last line: %s\n' "$i" "$code" "$watched" "$(tail -1 "$out/stderr")"
		continue
	fi
	recorded=$((recorded + 1))
	v=$(jq -r '.validity | if ((.loadBehind // []) + (.connectionErrors // []) + (.problems // []) | length) == 0 then "valid" else "INVALID" end' "$rj")
	[ "$v" = valid ] && valid=$((valid + 1))
	printf 'run %d: exit %d, %s, late %s %% (largest stream share, judged span), %s\n' "$i" "$code" "$v" "$(late_share "$rj")" "$watched"
	grep -m1 '^VALIDITY' "$out/stdout" | sed 's/^/       /' || true
done
echo "valid: $valid of $n runs ($recorded recorded)"
