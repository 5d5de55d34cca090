// Command drill runs chaos drills and load tests described in YAML
// scenarios. See the README for usage and exit codes.
package main

import "github.com/drillhq/drill/internal/app"

func main() { app.Main() }
