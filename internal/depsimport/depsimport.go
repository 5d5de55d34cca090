// Package depsimport keeps the chosen dependencies in go.mod while the packages that use them are written; delete it once every import is real.
package depsimport

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/Shopify/toxiproxy/v2"
	_ "github.com/Shopify/toxiproxy/v2/client"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/prometheus/client_golang/api/prometheus/v1"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/rs/zerolog"
	_ "github.com/spf13/cobra"
	_ "github.com/testcontainers/testcontainers-go"
	_ "github.com/testcontainers/testcontainers-go/modules/postgres"
	_ "github.com/tsenart/vegeta/v12/lib"
	_ "go.yaml.in/yaml/v3"
	_ "gonum.org/v1/gonum/stat"
	_ "gonum.org/v1/plot"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/yaml"
)
