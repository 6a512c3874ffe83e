"""What the results say: comparisons and verdicts, checks, rates, derived figures, gates."""
