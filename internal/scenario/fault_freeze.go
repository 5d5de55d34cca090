package scenario

// The fault kinds that are not toxics: they take a proxy or a dependency
// out of service as a whole, so stream and toxicity do not apply.
const (
	// FaultDown disables the proxy: the listener closes and every connection
	// drops, so clients see "connection refused" rather than a hang.
	FaultDown FaultType = "down"
	// FaultProcessPause sends SIGSTOP to a local process group and SIGCONT on revert.
	FaultProcessPause FaultType = "process-pause"
	// FaultContainerPause pauses a container through the Docker API.
	FaultContainerPause FaultType = "container-pause"
)

var downSpec = FaultSpec{
	Type:   FaultDown,
	Target: TargetProxy,
	Doc: "Disables the proxy: its listener closes and every connection drops, so clients " +
		"fail fast with \"connection refused\" or a reset instead of hanging (compare the " +
		"timeout 0 pause). Ending the fault enables the proxy again.",
	Example: `- name: pg-down
  type: down
  proxy: postgres
  at: 20s
  for: 10s`,
}

var processPauseSpec = FaultSpec{
	Type:   FaultProcessPause,
	Target: TargetDependency,
	Doc: "Freezes a local dependency: SIGSTOP to its process group and every descendant " +
		"(PostgreSQL's backends live in sessions of their own), SIGCONT when the fault " +
		"ends. Unlike the timeout 0 pause, held connections survive and resume. Local " +
		"environment only.",
	Example: `- name: pg-freeze
  type: process-pause
  dependency: postgres
  at: 20s
  for: 15s`,
}

var containerPauseSpec = FaultSpec{
	Type:   FaultContainerPause,
	Target: TargetDependency,
	Doc: "Freezes a dependency's container through the Docker API (docker pause, a cgroup " +
		"freeze) and unpauses it when the fault ends; held connections survive. Needs a " +
		"postgres dependency with mode: container, or in a compose environment a service " +
		"of the Compose file (its container).",
	Example: `- name: pg-container-freeze
  type: container-pause
  dependency: postgres-container
  at: 20s
  for: 15s`,
	CheckTarget: func(s *Scenario, f *Fault, report func(key, msg string)) {
		for _, d := range s.Dependencies {
			if d.Name == f.Dependency && (d.Postgres == nil || d.Postgres.Mode != PostgresContainer) {
				report("dependency", "container-pause needs a postgres dependency with mode: container")
			}
		}
	},
}
