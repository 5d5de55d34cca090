package dependencies

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// childEnv, set to "1", makes the test binary start PostgreSQL, print
// "pgid <n>" and wait to be killed: a stand-in for drill.
const childEnv = "DRILL_DEPS_POSTGRES_CHILD"

func TestMain(m *testing.M) {
	testproc.HelperMain(childEnv, postgresChild)
	os.Exit(m.Run())
}

// postgresChild starts PostgreSQL, reports its process group on stdout and
// blocks (at most 5 minutes) until killed.
func postgresChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := StartPostgres(ctx, scenario.PostgresDep{Mode: scenario.PostgresBinaries}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start postgres:", err)
		return 1
	}
	fmt.Printf("pgid %d\n", pg.PGID)
	time.Sleep(5 * time.Minute)
	_ = pg.Close(context.Background())
	return 0
}

// TestPostgresDiesWithItsParent: the process that started PostgreSQL is
// SIGKILLed (no Close runs). The postmaster gets its parent-death signal and
// its children, which are not stopped, see it gone and exit: nothing of the
// cluster outlives a killed drill.
func TestPostgresDiesWithItsParent(t *testing.T) {
	_, err := findPostgresBinaries()
	needs.Part(t, "PostgreSQL server binaries", err)
	privateTempDir(t)
	cmd := testproc.Command(t, childEnv)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var tree []proctree.ID
	t.Cleanup(func() { // on failure, leave nothing running
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, id := range tree {
			if proctree.Same(id) {
				_ = syscall.Kill(id.PID, syscall.SIGKILL)
			}
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	pgid, convErr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pgid ")))
	if err != nil || convErr != nil || pgid <= 1 {
		t.Fatalf("child did not report the postmaster: %q %v %v", line, err, convErr)
	}
	// The postmaster's background workers are up once it accepts
	// connections; wait for at least one child to be sure.
	for deadline := time.Now().Add(30 * time.Second); len(tree) < 2; time.Sleep(20 * time.Millisecond) {
		if tree, err = proctree.TreeIDs(pgid); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("postmaster %d has no children: %v", pgid, tree)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var alive []int
		for _, id := range tree {
			if proctree.Same(id) {
				alive = append(alive, id.PID)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the cluster %v still alive 30 s after their starter was killed", alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
