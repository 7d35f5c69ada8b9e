"""Suite-wide pytest wiring: the suite's plugin (e2e/plugin/: options, the run's life, the node
fixtures tests ask for, the summary), registered for every run from the repository root."""

pytest_plugins = ["e2e.plugin"]
