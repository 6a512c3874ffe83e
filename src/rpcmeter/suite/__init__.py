"""What a suite says: its model, the workloads, placeholders in command lines, the driver options."""
