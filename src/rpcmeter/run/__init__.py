"""Running a plan: the run and its case runners, events, the rate search, profiles, Prometheus."""
