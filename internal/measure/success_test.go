package measure

import (
	"encoding/json"
	"testing"
	"time"
)

// TestSuccessHistogram: a bucket's success latency survives run.json
// (encode, decode, merge, pack, clone, reset), and a bucket of a record
// made before it was kept (successes, no "success" key) says it was not
// recorded.
func TestSuccessHistogram(t *testing.T) {
	b := NewBucket(0, time.Second)
	for _, d := range []time.Duration{10 * time.Millisecond, 30 * time.Millisecond} {
		b.Requests++
		b.OK++
		b.Codes[200]++
		Record(b.Latency, d)
		Record(b.Success, d)
	}
	if !b.SuccessRecorded() {
		t.Fatal("a bucket recorded with its successes says it was not recorded")
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Bucket
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Success.TotalCount() != 2 || !back.SuccessRecorded() {
		t.Fatalf("decoded success histogram holds %d, want 2", back.Success.TotalCount())
	}
	merged := NewBucket(0, time.Second)
	merged.Merge(&back)
	merged.Merge(Pack(b).Bucket())
	if merged.Success.TotalCount() != 4 || merged.OK != 4 || !merged.SuccessRecorded() {
		t.Errorf("merged: success %d of OK %d, want 4 of 4", merged.Success.TotalCount(), merged.OK)
	}
	if c := merged.Clone(); c.Success.TotalCount() != 4 {
		t.Errorf("clone: success %d, want 4", c.Success.TotalCount())
	}
	merged.Reset(time.Second, time.Second)
	if merged.Success == nil || merged.Success.TotalCount() != 0 {
		t.Errorf("reset left a success histogram of %d", merged.Success.TotalCount())
	}

	old := []byte(`{"start":0,"width":1000000000,"intended":2,"requests":2,"ok":2,"codes":{"200":2}}`)
	var o Bucket
	if err := json.Unmarshal(old, &o); err != nil {
		t.Fatal(err)
	}
	if o.SuccessRecorded() {
		t.Error("a bucket of an older record (successes, no success histogram) says it was recorded")
	}
	none := []byte(`{"start":0,"width":1000000000,"intended":2,"requests":2,"ok":0,"codes":{"503":2}}`)
	var n Bucket
	if err := json.Unmarshal(none, &n); err != nil {
		t.Fatal(err)
	}
	if !n.SuccessRecorded() {
		t.Error("a bucket without successes says its (empty) success latency was not recorded")
	}
}
