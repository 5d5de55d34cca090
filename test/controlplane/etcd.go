package controlplane

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd starts a single-member etcd in this process, listening for
// clients and peers on the given loopback ports, keeping its data in
// dir/etcd-data and its log in dir/etcd.log. fsync is off: the data is
// throwaway and the machine is shared. It waits up to timeout for the server
// to be ready and returns the running server and its client URL
// (http://127.0.0.1:<clientPort>), or an error (the server is closed on error).
func startEtcd(ctx context.Context, dir string, clientPort, peerPort int, timeout time.Duration) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Name = "drill-test"
	cfg.Dir = filepath.Join(dir, "etcd-data")
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, clientURL.String(), nil
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("start etcd: %w", err)
	case <-time.After(timeout):
		e.Close()
		return nil, "", fmt.Errorf("start etcd: not ready after %s", timeout)
	case <-ctx.Done():
		e.Close()
		return nil, "", fmt.Errorf("start etcd: %w", ctx.Err())
	}
}
