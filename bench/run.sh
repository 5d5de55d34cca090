#!/usr/bin/env bash
# Load engine benchmarks (make bench). Prints figures; asserts nothing.
#
#   bench/run.sh            saturation vs vegeta CLI, seeds' 60 s, accuracy, memory 1 min
#   bench/run.sh --long     memory over 10 min instead of 1 min
#   bench/run.sh --quick    short smoke run of every benchmark (figures not meaningful)
#   bench/run.sh --mem-scale=0.1   memory benchmark at a tenth of the seeds' rates
#   (5) always: heap and RSS at 1, 10, 60 simulated minutes of the seeds' load (go test -bench LongRunMemory)
#   (6) always: 2,800 req/s against a target that holds every request 2 s, drill engine vs vegeta CLI
#   bench/run.sh --only=hang   just (6)
#   (7) always: the console's cost: a real drill run of the seeds' load with --ui and 10 viewers vs without, alternating
#       (--long adds one 10-minute run per side for its memory)
#   bench/run.sh --only=console   just (7)
#   (8) always: load workers: drill load on 1, 2 and 4 workers of the real control plane of test/controlplane
#       (go test ./test/cluster -bench Workers; the first build of the control plane takes 10-20 min)
#   bench/run.sh --only=workers   just (8)
#
# Needs: go, network access to the Go module proxy (installs the vegeta CLI
# v12.13.0 into a temporary GOBIN). Everything runs on loopback; the stub
# server and temp files are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

SAT_DUR=10s ROUNDS=3 SEEDS_DUR=60s ACC_DUR=20s MEM_DUR=60s WORKERS=32 MEM_SCALE=1 HANG_DUR=20s HANG_ROUNDS=2 ONLY=
CONSOLE_DUR=30s CONSOLE_ROUNDS=${CONSOLE_ROUNDS:-3} CONSOLE_MEM=0
for arg in "$@"; do
	case "$arg" in
	--long) MEM_DUR=600s CONSOLE_MEM=10m ;;
	--quick) SAT_DUR=2s ROUNDS=1 SEEDS_DUR=5s ACC_DUR=3s MEM_DUR=5s HANG_DUR=5s HANG_ROUNDS=1 CONSOLE_DUR=10s CONSOLE_ROUNDS=1 ;;
	--only=hang) ONLY=hang ;;
	--only=console) ONLY=console ;;
	--only=workers) ONLY=workers ;;
	--mem-scale=*) MEM_SCALE=${arg#--mem-scale=} ;;
	*) echo "usage: $0 [--long] [--quick] [--mem-scale=X] [--only=hang|console|workers]" >&2; exit 2 ;;
	esac
done

tmp=$(mktemp -d)
stub_pid="" hstub_pid=""
cleanup() {
	for pid in $stub_pid $hstub_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== machine"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "nproc:   $(nproc)"
echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "go:      $(go version)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other work on the machine makes figures noisy)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "nofile:  $(ulimit -n)"

echo "== build"
go build -o "$tmp/stub" ./bench/stub
go build -o "$tmp/loadbench" ./bench/loadbench
go build -o "$tmp/consolebench" ./bench/consolebench
CGO_ENABLED=0 go build -trimpath -o "$tmp/drill" ./cmd/drill
GOBIN="$tmp/bin" go install github.com/tsenart/vegeta/v12@v12.13.0
echo "vegeta:  $("$tmp/bin/vegeta" -version 2>&1 | head -1)"

# hang_bench: section (6), also alone with --only=hang.
hang_bench() {
	echo "== (6) hanging target: 2,800 req/s for $HANG_DUR against a stub that holds every request 2 s (timeout 5 s), drill engine vs vegeta CLI, alternating"
	command -v /usr/bin/time >/dev/null || { echo "  skipped: /usr/bin/time (Debian's time package) is missing"; return; }
	"$tmp/stub" -hold 2s -addr 127.0.0.1:0 >"$tmp/hstub.out" &
	hstub_pid=$!
	for _ in $(seq 50); do [ -s "$tmp/hstub.out" ] && break; sleep 0.1; done
	local hurl
	hurl=$(awk '{print $2}' "$tmp/hstub.out")
	[ -n "$hurl" ] || { echo "hanging stub did not start" >&2; exit 1; }
	# cpu_rss WHO SENT FILE: CPU per request and peak RSS from GNU time's "%U %S %M" line.
	cpu_rss() { awk -v w="$1" -v n="$2" '{ printf "  %s: CPU %.2f s, %.1f µs per request, peak RSS %.1f MiB\n", w, $1 + $2, ($1 + $2) * 1e6 / n, $3 / 1024 }' "$3"; }
	for i in $(seq "$HANG_ROUNDS"); do
		for who in drill vegeta; do
			if [ $((i % 2)) -eq 0 ]; then who=$([ "$who" = drill ] && echo vegeta || echo drill); fi
			if [ "$who" = drill ]; then
				/usr/bin/time -o "$tmp/h.time" -f '%U %S %M' "$tmp/loadbench" hang -url "$hurl/" -rate 2800 -duration "$HANG_DUR" >"$tmp/h.out"
				cat "$tmp/h.out"
				cpu_rss drill "$(sed -n 's/.* sent=\([0-9]*\) .*/\1/p' "$tmp/h.out")" "$tmp/h.time"
			else
				echo "GET $hurl/" | /usr/bin/time -o "$tmp/h.time" -f '%U %S %M' "$tmp/bin/vegeta" attack -rate=2800 -duration="$HANG_DUR" -timeout=5s -output="$tmp/hv.bin"
				"$tmp/loadbench" vegeta-lag -rate 2800 "$tmp/hv.bin" >"$tmp/h.out"
				cat "$tmp/h.out"
				cpu_rss vegeta "$(sed -n 's/.* sent=\([0-9]*\) .*/\1/p' "$tmp/h.out")" "$tmp/h.time"
				rm -f "$tmp/hv.bin"
			fi
		done
	done
}
# workers_bench: section (8), also alone with --only=workers.
workers_bench() {
	echo "== (8) load workers: drill load of 2,000 req/s for 20 s on 1, 2 and 4 workers of the real control plane (test/cluster)"
	go test ./test/cluster -run '^$' -bench 'Workers' -benchtime=1x -timeout 60m | grep -E '^workers|^Benchmark|^cluster:|SKIP|FAIL'
}
if [ "$ONLY" = workers ]; then workers_bench; exit 0; fi
if [ "$ONLY" = hang ]; then hang_bench; exit 0; fi

"$tmp/stub" -addr 127.0.0.1:0,127.0.0.1:0,127.0.0.1:0 >"$tmp/stub.out" &
stub_pid=$!
for _ in $(seq 50); do [ "$(wc -l <"$tmp/stub.out")" -ge 3 ] && break; sleep 0.1; done
mapfile -t urls < <(awk '{print $2}' "$tmp/stub.out")
[ "${#urls[@]}" -eq 3 ] || { echo "stub did not start" >&2; exit 1; }
url1=${urls[0]} url2=${urls[1]} url3=${urls[2]}

# console_bench: section (7), also alone with --only=console.
console_bench() {
	echo "== (7) console: the seeds' load from drill run for $CONSOLE_DUR with --ui and 10 viewers vs without, $CONSOLE_ROUNDS rounds alternating"
	local mem=()
	if [ "$CONSOLE_MEM" != 0 ]; then mem=(-memory "$CONSOLE_MEM"); fi
	"$tmp/consolebench" -drill "$tmp/drill" -urls "$url1,$url2,$url3" -duration "$CONSOLE_DUR" -rounds "$CONSOLE_ROUNDS" -viewers 10 "${mem[@]}"
}
if [ "$ONLY" = console ]; then console_bench; exit 0; fi

echo "== (1) saturation: drill engine vs vegeta CLI, rate=max, $WORKERS workers, $SAT_DUR per run, alternating"
drill_rates=() vegeta_rates=() drill_cpu=() vegeta_cpu=()
TIMEFORMAT='%U %S'
# cpu_us_per_req N FILE: user+sys CPU seconds in FILE (from bash's time) per request, in µs.
cpu_us_per_req() { awk -v n="$1" '{ printf "%.1f", ($1 + $2) * 1e6 / n }' "$2"; }
run_drill() {
	{ time "$tmp/loadbench" saturation -url "$url1/" -duration "$SAT_DUR" -workers "$WORKERS" >"$tmp/d.out"; } 2>"$tmp/d.time"
	out=$(cat "$tmp/d.out")
	n=$(sed -n 's/.* requests=\([0-9]*\) .*/\1/p' <<<"$out")
	c=$(cpu_us_per_req "$n" "$tmp/d.time")
	echo "  $out cpu=${c}µs/req"
	drill_rates+=("$(sed -n 's/.* rate=\([0-9]*\) req\/s.*/\1/p' <<<"$out")")
	drill_cpu+=("$c")
}
run_vegeta() {
	{ time (echo "GET $url1/" | "$tmp/bin/vegeta" attack -rate=0 -max-workers="$WORKERS" -duration="$SAT_DUR" -output="$tmp/v.bin"); } 2>"$tmp/v.time"
	n=$("$tmp/bin/vegeta" report -type=json "$tmp/v.bin" | grep -o '"requests":[0-9]*' | cut -d: -f2)
	secs=${SAT_DUR%s}
	r=$((n / secs))
	c=$(cpu_us_per_req "$n" "$tmp/v.time")
	echo "  vegeta saturation: requests=$n seconds=$secs rate=$r req/s cpu=${c}µs/req"
	vegeta_rates+=("$r")
	vegeta_cpu+=("$c")
	rm -f "$tmp/v.bin"
}
for i in $(seq "$ROUNDS"); do
	if [ $((i % 2)) -eq 1 ]; then run_drill; run_vegeta; else run_vegeta; run_drill; fi
done
sum() { local s=0; for x in "$@"; do s=$((s + x)); done; echo "$s"; }
d=$(sum "${drill_rates[@]}") v=$(sum "${vegeta_rates[@]}")
awk -v d="$d" -v v="$v" -v n="$ROUNDS" 'BEGIN { printf "  mean drill %.0f req/s, vegeta %.0f req/s, ratio drill/vegeta %.3f\n", d/n, v/n, d/v }'
awk -v d="${drill_cpu[*]}" -v v="${vegeta_cpu[*]}" 'BEGIN {
	nd = split(d, a, " "); nv = split(v, b, " "); for (i = 1; i <= nd; i++) sd += a[i]; for (i = 1; i <= nv; i++) sv += b[i]
	printf "  client CPU per request: drill %.1f µs, vegeta %.1f µs (vegeta/drill %.3f: above 1 means drill is cheaper)\n", sd/nd, sv/nv, (sv/nv)/(sd/nd) }'

echo "== (2) seeds: 2800 + 1400 + 150 req/s for $SEEDS_DUR against three local stub listeners"
"$tmp/loadbench" seeds -urls "$url1/orders,$url2/auth,$url3/tax" -duration "$SEEDS_DUR"

echo "== (3) accuracy: 100 req/s for $ACC_DUR through in-process Toxiproxy, without and with a 50 ms latency toxic"
"$tmp/loadbench" accuracy -upstream "${url1#http://}" -duration "$ACC_DUR"

echo "== (4) memory: (2800+1400+150) x $MEM_SCALE req/s for $MEM_DUR (RSS sampled every 10 s)"
"$tmp/loadbench" memory -scale "$MEM_SCALE" -urls "$url1/orders,$url2/auth,$url3/tax" -duration "$MEM_DUR"

echo "== (5) long runs: the seeds' 4,350 req/s fed into the recorders on a fast-forwarded clock for 60 simulated minutes, with the journal and with every second kept in memory"
go test ./internal/load -run '^$' -bench 'LongRunMemory' -benchtime=1x | grep -E '^long run|^Benchmark'

hang_bench

console_bench

workers_bench
