package refservices

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeConfig is a service Config with the shared settings as its own
// fields, as order-gateway's and payment-core's are.
type fakeConfig struct {
	Build                           Build
	DatabaseURL                     string
	ReadyTimeout                    time.Duration
	WatchdogInterval, WatchdogStall time.Duration
	DebugEndpoints                  bool
	defaulted                       bool
}

func (c *fakeConfig) Common() Fields {
	return Fields{Build: &c.Build, DatabaseURL: &c.DatabaseURL, ReadyTimeout: &c.ReadyTimeout,
		WatchdogInterval: &c.WatchdogInterval, WatchdogStall: &c.WatchdogStall, DebugEndpoints: &c.DebugEndpoints}
}

func (c *fakeConfig) SetDefaults() { c.Common().SetDefaults(); c.defaulted = true }

func (c *fakeConfig) Validate() error { return errors.Join(ValidateBase(c.Build, c.DatabaseURL)...) }

func TestFieldsSetAndDefaults(t *testing.T) {
	var c fakeConfig
	st := Settings{Build: BuildNaive, DatabaseURL: "postgres://x@127.0.0.1:1/db", ReadyTimeout: time.Second,
		WatchdogInterval: time.Millisecond, WatchdogStall: time.Minute, DebugEndpoints: true}
	c.Common().Set(st)
	if got := c.Common().Get(); got != st {
		t.Fatalf("Get after Set = %+v, want %+v", got, st)
	}
	c = fakeConfig{}
	c.Common().SetDefaults()
	if c.Build != BuildCorrect || c.ReadyTimeout != DefaultReadyTimeout || c.WatchdogInterval != 0 {
		t.Fatalf("SetDefaults = %+v, want build correct, ready timeout 250ms, watchdog left to NewWatchdog", c)
	}
}

func TestNewBase(t *testing.T) {
	c := &fakeConfig{DatabaseURL: "postgres://x@127.0.0.1:1/db"}
	b, err := NewBase("svc", c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.defaulted || b.Settings.Build != BuildCorrect || b.Logger == nil || b.Probe == nil || b.Watchdog == nil || b.Registry == nil {
		t.Fatalf("NewBase = %+v (config defaulted %v)", b, c.defaulted)
	}
	if _, err := NewBase("svc", &fakeConfig{Build: "odd"}, nil); err == nil ||
		!strings.HasPrefix(err.Error(), "configure svc: ") || !strings.Contains(err.Error(), "--database-url") || !strings.Contains(err.Error(), "--build") {
		t.Fatalf("NewBase of an invalid config: %v, want configure svc: naming --build and --database-url", err)
	}
	if _, err := NewBase("svc", &fakeConfig{DatabaseURL: "postgres://x@[::1"}, nil); err == nil ||
		!strings.HasPrefix(err.Error(), "configure svc: --database-url: ") {
		t.Fatalf("NewBase of a bad DSN: %v, want configure svc: --database-url: ...", err)
	}
}
