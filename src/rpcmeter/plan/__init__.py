"""From a suite file to what runs: reading and checking it, the targets, each variant's plan, the cases in order."""
