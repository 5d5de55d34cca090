package textio

import (
	"errors"
	"fmt"
	"testing"
)

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

// TestErrWriterKeepsFirstError: writes go through until one fails; that
// error, wrapped with What, is kept and later writes are dropped.
func TestErrWriterKeepsFirstError(t *testing.T) {
	dst := &failAfter{n: 1}
	ew := &ErrWriter{W: dst, What: "write summary"}
	for i := 0; i < 3; i++ {
		if n, err := fmt.Fprint(ew, "line"); n != 4 || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	if ew.Err == nil || ew.Err.Error() != "write summary: disk full" {
		t.Errorf("Err = %v", ew.Err)
	}
}
