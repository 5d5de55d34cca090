package cpuuse

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// Self is this process's own totals at one moment, for figures per
// request: its CPU time and its heap allocations since it started.
type Self struct {
	// CPU is user plus system time (getrusage RUSAGE_SELF; 0 where it
	// cannot be read).
	CPU time.Duration `json:"cpu"`
	// AllocObjects and AllocBytes count heap allocations (runtime/metrics
	// /gc/heap/allocs:objects and :bytes): what the garbage collector
	// must later find and free.
	AllocObjects uint64 `json:"allocObjects"`
	AllocBytes   uint64 `json:"allocBytes"`
}

// ReadSelf reads this process's [Self] now.
func ReadSelf() Self {
	var s Self
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() == metrics.KindUint64 {
		s.AllocObjects = m[0].Value.Uint64()
	}
	if m[1].Value.Kind() == metrics.KindUint64 {
		s.AllocBytes = m[1].Value.Uint64()
	}
	return s
}

// Since is what the process used from earlier to s.
func (s Self) Since(earlier Self) Self {
	return Self{
		CPU:          s.CPU - earlier.CPU,
		AllocObjects: s.AllocObjects - earlier.AllocObjects,
		AllocBytes:   s.AllocBytes - earlier.AllocBytes,
	}
}
