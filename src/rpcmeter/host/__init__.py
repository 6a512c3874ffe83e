"""The host's side of a run: CPU placement and cgroups, launching, the watchdog, environments
and the servers' builds made in them."""
